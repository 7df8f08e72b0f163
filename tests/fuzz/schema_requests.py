"""Schema-valid requests for every advertised (API, version), sent over TCP, answers checked.

    python -m tests.fuzz.schema_requests --bootstrap HOST:PORT [--random N] [--show]

The requests are what Kafka's request schemas (kio's classes, ``tests/fuzz/schema_codec.py``)
accept, built deterministically per (API, version) in these variants:

- ``nulls``: every nullable field null (arrays, strings, structs), the rest empty or zero;
- ``empty``: every array empty, strings and bytes empty, numbers zero;
- ``max``: long arrays (48 items at the top, fewer inside), 2,000-character strings,
  every integer at its type's maximum;
- ``min``: one item per array, one-character strings, every integer at its minimum;
- ``tagged`` (flexible versions): drawn values plus unknown tagged fields in every struct
  and in the request header, which Kafka's parsers skip;
- ``random-<i>``: values drawn from edge cases and the names the broker has (topics, their
  ids, a group), ``--random`` of them.

Fields that only say how long the broker may wait (Fetch/ShareFetch ``max_wait``, JoinGroup's
``rebalance_timeout``, and its ``session_timeout`` in v0, which is its rebalance timeout) are kept
under 200 ms so a case cannot park the connection for days; everything else gets its extremes.

Outcomes (``Outcome.kind``): ``answered`` (the answer decodes with Kafka's response schema for
that version, strictly: every byte, no null where none is allowed), ``no-answer`` (Produce
acks=0: a following ApiVersions is answered on the same connection), ``closed`` (the broker
closed the connection), ``bad-answer``/``timeout`` (failures). One connection serves the cases
in turn and is reopened after a close.
"""

from __future__ import annotations

import argparse
import random
import socket
import struct
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kafka_sidecar.protocol.records import Record, encode_batch
from kafka_sidecar.server.dispatch import SUPPORTED_APIS
from kio.index import load_request_schema, load_response_schema

from tests.fuzz.schema_codec import (
    UNKNOWN_TAGS,
    DecodeError,
    Field,
    decode,
    encode,
    schema_fields,
    uvarint,
)

TOPICS = ["fuzz-a", "fuzz-b", "fuzz-compact"]
NEW_TOPICS = ["fuzz-new-0", "fuzz-new-1", "fuzz-new-2"]  # the only new names: topics created stay few
GROUP = "fuzz-group"
LONG = 2000
WAIT_FIELDS = {"max_wait", "rebalance_timeout"}  # how long the broker may park the request
WAIT_CAP_MS = 200

_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64, "error_code": 16,
         "timedelta_i32": 32, "timedelta_i64": 64, "datetime_i64": 64}
FIXED_VARIANTS = ("nulls", "empty", "max", "min", "tagged")


@dataclass
class Context:
    """What the broker has, so drawn values reach past "unknown topic"."""

    topic_ids: list[uuid.UUID]


def _limits(kind: str) -> tuple[int, int]:
    if kind == "uint16":
        return 0, 2**16 - 1
    bits = _BITS[kind]
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


def _batch(rnd: random.Random) -> bytes:
    n = rnd.randint(1, 3)
    pid = rnd.choice([-1, -1, 0, 1000])
    recs = [Record(i, rnd.choice([-1, 0, 1_700_000_000_000]), rnd.choice([None, b"k"]), rnd.choice([None, b"", b"v" * 40]))
            for i in range(n)]
    return encode_batch(recs, compression=rnd.choice([0, 0, 1, 2, 3, 4]), producer_id=pid,
                        producer_epoch=0 if pid >= 0 else -1, base_sequence=0 if pid >= 0 else -1)


class Generator:
    """Values for one request, by variant (deterministic for a given seed)."""

    def __init__(self, variant: str, rnd: random.Random, ctx: Context, api_key: int, version: int) -> None:
        self.variant, self.rnd, self.ctx, self.api_key, self.version = variant, rnd, ctx, api_key, version
        self.tagged = variant == "tagged"

    def struct(self, cls: type, depth: int) -> dict[str, Any]:
        regular, tagged = schema_fields(cls)
        out = {f.name: self.field(f, depth) for f in regular}
        for f in tagged:  # known tagged fields: present in the drawn variants, absent in the fixed ones
            if self.variant.startswith("random") or self.tagged:
                if self.rnd.random() < 0.5:
                    out[f.name] = self.field(f, depth)
        if self.tagged:
            known = {f.tag for f in tagged}
            extra = {}
            for _ in range(self.rnd.randint(1, 3)):
                tag = self.rnd.choice([max(known, default=-1) + 1, 77, 1000, 2**20, 2**31 - 1])
                if tag not in known:
                    extra[tag] = self.rnd.randbytes(self.rnd.choice([0, 1, 8, 40]))
            out[UNKNOWN_TAGS] = extra
        return out

    def field(self, f: Field, depth: int) -> Any:
        v = self.variant
        if f.nullable and (v == "nulls" or (v.startswith("random") or self.tagged) and self.rnd.random() < 0.1):
            return None
        if f.array:
            if v in ("nulls", "empty"):
                n = 0
            elif v == "max":
                n = (48, 4, 2)[min(depth, 2)]
            elif v == "min":
                n = 1
            else:
                n = self.rnd.choice([0, 1, 1, 2, 3])
            return [self.value(f, depth + 1) for _ in range(n)]
        return self.value(f, depth + 1)

    def value(self, f: Field, depth: int) -> Any:
        kind, v, rnd = f.kind, self.variant, self.rnd
        if kind == "struct":
            assert f.entity is not None
            return self.struct(f.entity, depth)
        if kind in _BITS or kind == "uint16":
            lo, hi = _limits(kind)
            wait = f.name in WAIT_FIELDS or (self.api_key == 11 and self.version == 0 and f.name == "session_timeout")
            if wait:
                hi = WAIT_CAP_MS
            if v in ("nulls", "empty"):
                return 0
            if v == "max":
                return hi
            if v == "min":
                return lo
            r = rnd.random()
            if r < 0.3:
                return max(lo, min(hi, rnd.choice([lo, hi, -1, 0, 1, lo + 1, hi - 1])))
            if r < 0.8:
                return max(lo, min(hi, rnd.randint(-2, 5)))
            return rnd.randint(lo, hi)
        if kind == "bool":
            return v == "max" or (v.startswith("random") or self.tagged) and rnd.random() < 0.5
        if kind == "float64":
            return {"max": 1.7976931348623157e308, "min": -1.7976931348623157e308}.get(
                v, 0.0 if v in ("nulls", "empty") else rnd.choice([0.0, -1.0, float("nan"), float("inf"), 2.5]))
        if kind == "uuid":
            if v in ("nulls", "empty", "min"):
                return uuid.UUID(int=0)
            if v == "max":
                return uuid.UUID(int=2**128 - 1)
            return rnd.choice([uuid.UUID(int=0), uuid.UUID(int=rnd.getrandbits(128)), *self.ctx.topic_ids])
        if kind == "string":
            if v in ("nulls", "empty"):
                return ""
            if v == "max":
                return "t" * LONG
            if v == "min":
                return "a"
            return rnd.choice([*TOPICS, *TOPICS, *NEW_TOPICS, GROUP, "", "ü-ñ", "a" * 250, "x" * LONG, "__consumer_offsets"])
        if kind == "bytes":
            if v in ("nulls", "empty"):
                return b""
            return b"\xff" * (LONG if v == "max" else 1) if v in ("max", "min") else rnd.randbytes(rnd.choice([0, 1, 16, 300]))
        if kind == "records":
            if v in ("nulls", "empty"):
                return b""
            if v in ("max", "min") or rnd.random() < 0.7:
                return _batch(rnd)
            return rnd.randbytes(rnd.choice([0, 10, 61, 200]))
        raise TypeError(kind)


def header(api_key: int, version: int, correlation_id: int, flexible: bool, tags: dict[int, bytes] | None = None) -> bytes:
    cid = b"fuzz-schema"
    head = struct.pack(">hhih", api_key, version, correlation_id, len(cid)) + cid
    if flexible:
        tags = tags or {}
        head += uvarint(len(tags)) + b"".join(uvarint(t) + uvarint(len(d)) + d for t, d in sorted(tags.items()))
    return head


@dataclass
class Case:
    api_key: int
    version: int
    variant: str
    body: bytes
    data: dict[str, Any]
    header_tags: dict[int, bytes]

    @property
    def name(self) -> str:
        return f"{SUPPORTED_APIS[self.api_key].name} v{self.version} {self.variant}"

    @property
    def acks0(self) -> bool:
        return self.api_key == 0 and self.data.get("acks") == 0


def cases(ctx: Context, random_count: int, apis: list[int] | None = None) -> Iterator[Case]:
    """Every advertised (API, version) in every variant (``random_count`` drawn ones)."""
    for spec in sorted(SUPPORTED_APIS.values(), key=lambda s: s.key):
        if apis and spec.key not in apis:
            continue
        for version in range(spec.min_version, spec.max_version + 1):
            cls = load_request_schema(spec.key, version)
            flexible = bool(cls.__flexible__)
            variants = [v for v in FIXED_VARIANTS if v != "tagged" or flexible]
            variants += [f"random-{i}" for i in range(random_count)]
            for variant in variants:
                rnd = random.Random(f"{spec.key}/{version}/{variant}")
                data = Generator(variant, rnd, ctx, spec.key, version).struct(cls, 0)
                tags = {5: b"x", 2**20: rnd.randbytes(4)} if variant == "tagged" else {}
                yield Case(spec.key, version, variant, encode(cls, data), data, tags)


@dataclass
class Outcome:
    kind: str  # answered, no-answer, closed, bad-answer, timeout
    detail: str = ""
    answer: dict[str, Any] | None = None


class Sender:
    """One connection to the broker, reopened after a close."""

    def __init__(self, host: str, port: int, timeout: float = 10.0) -> None:
        self.addr, self.timeout = (host, port), timeout
        self.sock: socket.socket | None = None
        self.correlation = 0
        self.reconnects = 0

    def _connect(self) -> socket.socket:
        if self.sock is None:
            self.sock = socket.create_connection(self.addr, timeout=self.timeout)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.reconnects += 1
        return self.sock

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def _read(self, n: int) -> bytes | None:
        assert self.sock is not None
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(min(n - len(buf), 1 << 20))
            if not chunk:
                return None
            buf += chunk
        return bytes(buf)

    def _answer(self) -> bytes | None:
        size = self._read(4)
        if size is None:
            return None
        return self._read(struct.unpack(">i", size)[0])

    def _send(self, api_key: int, version: int, body: bytes, tags: dict[int, bytes]) -> int:
        sock = self._connect()
        self.correlation += 1
        flexible = bool(load_request_schema(api_key, version).__flexible__)
        payload = header(api_key, version, self.correlation, flexible, tags) + body
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        return self.correlation

    def run(self, case: Case) -> Outcome:
        try:
            correlation = self._send(case.api_key, case.version, case.body, case.header_tags)
            if case.acks0:  # no answer: the connection must still answer an ApiVersions (or be closed)
                correlation = self._send(18, 0, b"", {})
                api_key, version = 18, 0
            else:
                api_key, version = case.api_key, case.version
            payload = self._answer()
        except TimeoutError:
            self.close()
            return Outcome("timeout", f"no answer within {self.timeout:.0f} s")
        except (ConnectionError, OSError) as e:
            self.close()
            return Outcome("closed", type(e).__name__)
        if payload is None:
            self.close()
            return Outcome("closed")
        return check_answer(api_key, version, correlation, payload, "no-answer" if case.acks0 else "answered")


def check_answer(api_key: int, version: int, correlation: int, payload: bytes, kind: str) -> Outcome:
    cls = load_response_schema(api_key, version)
    try:
        (got,) = struct.unpack_from(">i", payload)
        if got != correlation:
            return Outcome("bad-answer", f"correlation id {got}, expected {correlation}")
        offset = 4
        if cls.__flexible__ and api_key != 18:  # response header v1: tagged fields (ApiVersions keeps v0)
            offset += 1
            if payload[4] != 0:
                return Outcome("bad-answer", f"response header with {payload[4]} tagged fields")
        answer = decode(cls, payload, offset)
    except (DecodeError, struct.error, IndexError) as e:
        return Outcome("bad-answer", str(e))
    return Outcome(kind, answer=answer)


def error_codes(answer: Any) -> set[int]:
    """Every error code in an answer (any depth)."""
    found: set[int] = set()
    stack = [answer]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            for k, v in x.items():
                if k == "error_code" and isinstance(v, int):
                    found.add(v)
                else:
                    stack.append(v)
        elif isinstance(x, list):
            stack.extend(x)
    return found


def topic_ids(host: str, port: int) -> list[uuid.UUID]:
    """The broker's topic ids (Metadata v12), for drawn uuids that name real topics."""
    s = Sender(host, port)
    try:
        cls = load_request_schema(3, 12)
        body = encode(cls, {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
        correlation = s._send(3, 12, body, {})
        payload = s._answer()
        assert payload is not None
        out = check_answer(3, 12, correlation, payload, "answered")
        assert out.answer is not None, out.detail
        return [t["topic_id"] for t in out.answer["topics"] if t["name"] in TOPICS]
    finally:
        s.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--random", type=int, default=4)
    parser.add_argument("--api", type=int, action="append")
    parser.add_argument("--show", action="store_true", help="print every case's outcome")
    args = parser.parse_args()
    host, _, port = args.bootstrap.rpartition(":")
    ctx = Context(topic_ids(host, int(port)))
    sender = Sender(host, int(port))
    counts: dict[str, int] = {}
    for case in cases(ctx, args.random, args.api):
        out = sender.run(case)
        counts[out.kind] = counts.get(out.kind, 0) + 1
        if args.show or out.kind not in ("answered", "no-answer"):
            codes = sorted(error_codes(out.answer)) if out.answer else ""
            print(f"{case.name}: {out.kind} {out.detail} {codes}", flush=True)
    sender.close()
    print(counts, f"{sender.reconnects} connections")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
