"""Hypothesis strategies for Kafka request frames, good and bad.

- ``golden_frames()``: every request Kafka 4.0.0's clients sent in the golden captures
  (``tests/data/kafka-4.0.0/*/frames.jsonl``), as captured;
- ``mutated_frames()``: those, mutated: bit flips, overwritten bytes, interesting
  integers written over fields, inserted/deleted/duplicated ranges, truncation, a
  different API key or version, a wrong size prefix;
- ``structured_frames()``: well-formed requests of every API and version the server
  supports, built field by field from kio's schemas (so handlers, not only the decoder,
  get odd values: negative counts, huge timeouts, unknown topics, empty names...);
- ``random_frames()``: a header with a random API key and version, then random bytes;
- ``request_frames()``: all of the above.

Each frame is a whole frame (int32 size prefix included) unless the size prefix is the
mutation. The values are bounded (lists of at most 3 items, short strings and byte
strings), so one case stays small.
"""

from __future__ import annotations

import datetime
import io
import json
import struct
import uuid
from dataclasses import fields
from functools import cache
from pathlib import Path
from typing import Any

from hypothesis import strategies as st
from kafka_sidecar.protocol.records import Record, encode_batch
from kafka_sidecar.server.dispatch import SUPPORTED_APIS
from kio.index import load_request_schema
from kio.serial import entity_writer
from kio.serial._introspect import EntityField, EntityTupleField, classify_field, is_optional

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "kafka-4.0.0"

# Names the fuzzer uses, so requests hit things that exist (created by the test's setup).
TOPICS = ["fuzz-a", "fuzz-b", "fuzz-compact"]
GROUPS = ["fuzz-group"]

INT_LIMITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}


@cache
def golden_request_frames() -> tuple[bytes, ...]:
    out = []
    for path in sorted(GOLDEN.glob("*/frames.jsonl")):
        for line in path.read_text().splitlines():
            if line.strip():
                d = json.loads(line)
                if d.get("dir") == "request":
                    out.append(bytes.fromhex(d["hex"]))
    return tuple(out)


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def header(api_key: int, version: int, correlation_id: int, client_id: str | None, flexible: bool) -> bytes:
    if client_id is None:
        head = struct.pack(">hhih", api_key, version, correlation_id, -1)
    else:
        cid = client_id.encode()
        head = struct.pack(">hhih", api_key, version, correlation_id, len(cid)) + cid
    return head + (b"\0" if flexible else b"")


# ------------------------------------------------------------------------ primitives


def _ints(bits: int) -> st.SearchStrategy[int]:
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    edges = sorted({0, 1, -1, 2, 5, 100, lo, hi, lo + 1, hi - 1} & set(range(lo, hi + 1)) if bits <= 16 else {0, 1, -1, 2, 5, 100, lo, hi, lo + 1, hi - 1})
    return st.one_of(st.sampled_from(edges), st.integers(-3, 64), st.integers(lo, hi))


def _millis(bits: int) -> st.SearchStrategy[datetime.timedelta]:
    # Mostly short (a case must not hold the connection long), sometimes anything.
    hi = min(2 ** (bits - 1) - 1, 2**45)  # datetime.timedelta's own limit is near 2**56 ms
    return st.one_of(st.integers(-1, 300), st.sampled_from([0, -1, hi]), st.integers(-(2 ** 31), hi)).map(
        lambda ms: datetime.timedelta(milliseconds=ms)
    )


def _strings() -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(TOPICS + GROUPS + ["", "-", ".", "..", "a" * 250, "__consumer_offsets"]),
        st.text(max_size=12),
        st.text(alphabet="abcxyz-._", min_size=1, max_size=12),
    )


def _batches() -> st.SearchStrategy[bytes]:
    record = st.builds(
        lambda i, k, v, ts: Record(i, ts, k, v),
        st.just(0), st.one_of(st.none(), st.binary(max_size=8)), st.one_of(st.none(), st.binary(max_size=32)),
        st.integers(-1, 2**41),
    )

    def build(recs: list[Record], compression: int, pid: int, seq: int) -> bytes:
        recs = [Record(i, r.timestamp, r.key, r.value) for i, r in enumerate(recs)]
        return encode_batch(recs, compression=compression, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                            base_sequence=seq if pid >= 0 else -1)

    return st.builds(build, st.lists(record, min_size=1, max_size=4), st.sampled_from([0, 1, 2, 3, 4]),
                     st.sampled_from([-1, -1, 0, 7]), st.integers(0, 10))


def _records() -> st.SearchStrategy[bytes]:
    valid = _batches()
    broken = valid.flatmap(lambda b: st.builds(_mutate_once, st.just(b), st.randoms(use_true_random=False)))
    return st.one_of(valid, broken, st.binary(max_size=120))


PRIMITIVES: dict[str, st.SearchStrategy[Any]] = {
    "bool": st.booleans(),
    "bytes": st.binary(max_size=24),
    "string": _strings(),
    "uuid": st.one_of(st.just(uuid.UUID(int=0)), st.uuids()),
    "records": _records(),
    "timedelta_i32": _millis(32),
    "timedelta_i64": _millis(64),
    "float64": st.floats(allow_nan=True),
    **{name: _ints(bits) for name, bits in INT_LIMITS.items()},
    "uint16": st.integers(0, 2**16 - 1),
}


# Fields whose large values are legitimate but slow (thousands of partitions created per case):
# kept small so a case stays fast. The server's own cap (10000 per request) is tested elsewhere.
BY_NAME: dict[str, st.SearchStrategy[Any]] = {
    "num_partitions": st.sampled_from([-2, -1, 0, 1, 2, 3]),
    "count": st.sampled_from([-1, 0, 1, 3]),
}


@cache
def entity_strategy(cls: type) -> st.SearchStrategy[Any]:
    """A kio entity of ``cls`` with every field drawn (recursively)."""
    kwargs: dict[str, st.SearchStrategy[Any]] = {}
    for f in fields(cls):
        klass = classify_field(f)
        if isinstance(klass, EntityField | EntityTupleField):
            inner: st.SearchStrategy[Any] = st.deferred(lambda t=klass.type_: entity_strategy(t))
        else:
            kind = f.metadata.get("kafka_type", "")
            inner = BY_NAME[f.name] if f.name in BY_NAME else PRIMITIVES.get(kind, st.nothing())
        if klass.is_array:
            inner = st.lists(inner, max_size=3).map(tuple)
        if is_optional(f):
            inner = st.one_of(st.none(), inner)
        kwargs[f.name] = inner
    return st.builds(cls, **kwargs)


def _encode(cls: type, entity: Any) -> bytes | None:
    out = io.BytesIO()
    try:
        entity_writer(cls)(out, entity)
    except (ValueError, TypeError, OverflowError, struct.error, UnicodeError):
        return None
    return out.getvalue()


@st.composite
def structured_frames(draw: st.DrawFn) -> bytes:
    """A well-formed request of a supported API and version, with drawn field values."""
    spec = draw(st.sampled_from(sorted(SUPPORTED_APIS.values(), key=lambda s: s.key)))
    version = draw(st.integers(spec.min_version, spec.max_version))
    cls = load_request_schema(spec.key, version)
    entity = draw(entity_strategy(cls))
    body = _encode(cls, entity)
    if body is None:
        body = draw(st.binary(max_size=40))
    cid = draw(st.one_of(st.just("fuzz"), st.none(), st.text(max_size=8)))
    return frame(header(spec.key, version, draw(st.integers(-(2**31), 2**31 - 1)), cid, bool(cls.__flexible__)) + body)


# ------------------------------------------------------------------------- mutations

INTERESTING = [b"\x00\x00\x00\x00", b"\xff\xff\xff\xff", b"\x7f\xff\xff\xff", b"\x80\x00\x00\x00",
               b"\x00\x00\x00\x01", b"\x00\x00\x10\x00", b"\xff\xfe", b"\x7f\xff", b"\x80", b"\x00"]


def _mutate_once(data: bytes, rnd: Any) -> bytes:
    buf = bytearray(data)
    if not buf:
        return bytes(rnd.randbytes(rnd.randrange(1, 16)))
    op = rnd.randrange(8)
    i = rnd.randrange(len(buf))
    if op == 0:
        buf[i] ^= 1 << rnd.randrange(8)
    elif op == 1:
        buf[i] = rnd.randrange(256)
    elif op == 2:
        v = rnd.choice(INTERESTING)
        buf[i : i + len(v)] = v
    elif op == 3:
        del buf[i : i + rnd.randrange(1, 16)]
    elif op == 4:
        buf[i:i] = rnd.randbytes(rnd.randrange(1, 16))
    elif op == 5:
        j = rnd.randrange(len(buf))
        buf[i:i] = buf[j : j + rnd.randrange(1, 32)]
    elif op == 6:
        del buf[i:]
    else:
        n = rnd.randrange(1, 8)
        buf[i : i + n] = bytes(n)
    return bytes(buf)


@st.composite
def mutated_frames(draw: st.DrawFn) -> bytes:
    original = draw(st.sampled_from(golden_request_frames()))
    payload = original[4:]
    rnd = draw(st.randoms(use_true_random=False))
    how = draw(st.sampled_from(["body", "body", "body", "version", "api-key", "truncate", "size"]))
    if how == "version":
        payload = payload[:2] + struct.pack(">h", draw(st.integers(-2, 20))) + payload[4:]
    elif how == "api-key":
        key = draw(st.one_of(st.sampled_from(sorted(SUPPORTED_APIS)), st.integers(-1, 100)))
        payload = struct.pack(">h", key) + payload[2:]
    elif how == "truncate":
        payload = payload[: draw(st.integers(0, max(0, len(payload) - 1)))]
    if how in ("body", "size") or draw(st.booleans()):
        for _ in range(draw(st.integers(1, 4))):
            cut = 8 if len(payload) > 8 and draw(st.booleans()) else 0  # keep the header now and then
            payload = payload[:cut] + _mutate_once(payload[cut:], rnd)
    if how == "size":
        size = draw(st.one_of(st.integers(-(2**31), 2**31 - 1), st.integers(0, len(payload) + 8)))
        return struct.pack(">i", size) + payload
    return frame(payload)


@st.composite
def random_frames(draw: st.DrawFn) -> bytes:
    key = draw(st.one_of(st.sampled_from(sorted(SUPPORTED_APIS)), st.integers(-(2**15), 2**15 - 1)))
    version = draw(st.one_of(st.integers(-1, 20), st.integers(-(2**15), 2**15 - 1)))
    flexible = draw(st.booleans())
    cid = draw(st.one_of(st.none(), st.text(max_size=6)))
    body = draw(st.binary(max_size=64))
    return frame(header(key, version, draw(st.integers(0, 1000)), cid, flexible) + body)


def golden_frames() -> st.SearchStrategy[bytes]:
    return st.sampled_from(golden_request_frames())


def request_frames() -> st.SearchStrategy[bytes]:
    return st.one_of(mutated_frames(), structured_frames(), random_frames(), golden_frames())


def request_streams() -> st.SearchStrategy[bytes]:
    """What one connection sends: one to three frames back to back."""
    return st.lists(request_frames(), min_size=1, max_size=3).map(b"".join)
