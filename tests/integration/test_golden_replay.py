"""Replay Apache Kafka 4.0.0's golden request frames against kafka-sidecar and compare the answers.

The golden frames (``tests/data/kafka-4.0.0``, see its README.md) are the exact bytes that real clients
and Kafka 4.0.0 exchanged. For each scenario, a fresh kafka-sidecar is set up like the recorded
broker (``num.partitions=1``, auto-create on), the recorded request frames are sent again in
their recorded order, one TCP connection per recorded connection, and both answers (Kafka's and
ours) are decoded with kio, normalized, and compared field by field.

Normalization removes only what legitimately differs between two brokers or two runs:
throttle times; topic ids (each is replaced by the name of the topic it identifies, as learned
from that broker's own Metadata/CreateTopics answers); cluster id; broker host and port;
producer ids; fetch session ids (we decline KIP-227 sessions with session id 0, which the
protocol allows); the orders that Kafka takes from hash sets (the partitions of a topic in
Metadata, the topics of an "all topics" Metadata answer); and messages Kafka reworded after
4.0.0 (``REWORDED_SINCE_4_0``: we answer as the current Kafka, which the conformance suite
checks against the reference broker).

Requests are rewritten only where a recorded value cannot mean anything to another broker:
Fetch v13+ topic ids (Kafka's id of a topic becomes ours), and the session id/epoch of Fetch
requests that continue a session Kafka granted (they become the full fetches a client sends
after a broker declines sessions).
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
import enum
import functools
import io
import json
import socket
import struct
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from kafka_sidecar.protocol.framing import parse_request_header
from kafka_sidecar.protocol.messages import build
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from tests.support import GOLDEN, SidecarProcess

# The recorded broker's non-default settings that matter here (README: num.partitions=1).
BROKER_OVERRIDES = {"num.partitions": "1", "auto.create.topics.enable": "true"}

PRODUCE, FETCH, LIST_OFFSETS, METADATA, API_VERSIONS, CREATE_TOPICS, INIT_PRODUCER_ID = 0, 1, 2, 3, 18, 19, 22
UNSET_AUTHORIZED_OPERATIONS = -2147483648
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


# ---- golden frames ------------------------------------------------------------------------


@dataclass(frozen=True)
class Exchange:
    """One recorded request and, when the recording has it, Kafka's response."""

    scenario: str
    conn: int
    correlation_id: int
    api_key: int
    api_name: str
    version: int
    request: bytes  # the full frame, size prefix included
    response: bytes | None

    @property
    def key(self) -> tuple[str, int, int]:
        return (self.scenario, self.conn, self.correlation_id)

    @property
    def label(self) -> str:
        return f"conn{self.conn}-corr{self.correlation_id}-{self.api_name}-v{self.version}"


@functools.cache
def load_exchanges(scenario: str) -> tuple[Exchange, ...]:
    path = GOLDEN / scenario / "frames.jsonl"
    if not path.exists():
        return ()
    requests, responses = [], {}
    with path.open() as f:
        for line in f:
            fr = json.loads(line)
            if fr["dir"] == "request":
                requests.append(fr)
            else:
                responses[(fr["conn"], fr["correlation_id"])] = bytes.fromhex(fr["hex"])
    return tuple(
        Exchange(
            scenario, fr["conn"], fr["correlation_id"], fr["api_key"], fr["api_name"], fr["api_version"],
            bytes.fromhex(fr["hex"]), responses.get((fr["conn"], fr["correlation_id"])),
        )
        for fr in requests
    )


def answered(scenario: str, api_keys: set[int] | None = None) -> list[Any]:
    """pytest params: the exchanges of ``scenario`` that have a recorded answer to compare with."""
    return [
        pytest.param(ex, id=ex.label)
        for ex in load_exchanges(scenario)
        if ex.response is not None and (api_keys is None or ex.api_key in api_keys)
    ]


# ---- kio decoding -------------------------------------------------------------------------


def _flexible_request(api_key: int, version: int) -> bool:
    return bool(load_request_schema(api_key, version).__flexible__)


def _skip_tagged_fields(buf: bytes, pos: int) -> int:
    def uvarint(p: int) -> tuple[int, int]:
        value = shift = 0
        while True:
            b = buf[p]
            p += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value, p
            shift += 7

    count, pos = uvarint(pos)
    for _ in range(count):
        _tag, pos = uvarint(pos)
        size, pos = uvarint(pos)
        pos += size
    return pos


def _api_versions_known(version: int) -> bool:
    try:
        load_response_schema(API_VERSIONS, version)
    except Exception:
        return False
    return True


def decode_response(api_key: int, version: int, frame: bytes) -> tuple[int, Any]:
    """(correlation id, kio entity) of a response frame; the whole frame must be consumed."""
    (size,) = struct.unpack_from(">i", frame, 0)
    assert size == len(frame) - 4, f"frame size {size} but {len(frame) - 4} bytes follow it"
    (correlation_id,) = struct.unpack_from(">i", frame, 4)
    pos = 8
    if api_key == API_VERSIONS:
        # Header v0 always; an unknown version is answered with a v0 body (KIP-511).
        schema_version = version if _api_versions_known(version) else 0
    else:
        schema_version = version
        if _flexible_request(api_key, version):
            pos = _skip_tagged_fields(frame, pos)
    body, used = entity_reader(load_response_schema(api_key, schema_version))(frame, pos)
    assert pos + used == len(frame), f"{len(frame) - pos - used} bytes left after the response body"
    return correlation_id, body


def decode_request(ex: Exchange) -> Any | None:
    """The recorded request body (trailing bytes ignored, as Kafka does), or None without a schema."""
    try:
        schema = load_request_schema(ex.api_key, ex.version)
    except Exception:
        return None
    payload = ex.request[4:]
    header = parse_request_header(payload, bool(schema.__flexible__))
    body, _used = entity_reader(schema)(payload, header.body_offset)
    return body


def plain(value: Any) -> Any:
    """A kio entity as plain data: dicts, lists, ints (error codes, ms), str, bytes, UUID, None."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [plain(v) for v in value]
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    if isinstance(value, datetime.datetime):
        return round((value - _EPOCH).total_seconds() * 1000)
    return value


# ---- topic ids ----------------------------------------------------------------------------


@dataclass
class TopicIds:
    """What one broker's answers said about topic ids: id -> topic name."""

    names: dict[uuid.UUID, str] = field(default_factory=dict)

    def learn(self, api_key: int, body: dict[str, Any]) -> None:
        if api_key in (METADATA, CREATE_TOPICS):
            for t in body.get("topics") or []:
                if t.get("name") and isinstance(t.get("topic_id"), uuid.UUID) and t["topic_id"].int:
                    self.names[t["topic_id"]] = t["name"]

    def id_of(self, name: str) -> uuid.UUID | None:
        return next((i for i, n in self.names.items() if n == name), None)

    def label(self, topic_id: Any) -> Any:
        if topic_id is None or (isinstance(topic_id, uuid.UUID) and topic_id.int == 0):
            return None
        name = self.names.get(topic_id)
        return f"<id of topic {name}>" if name else str(topic_id)


# ---- replay -------------------------------------------------------------------------------


class RawClient:
    """A socket that sends request frames and reads size-prefixed response frames."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)

    def request(self, frame: bytes) -> bytes:
        self.sock.sendall(frame)
        head = self._read(4)
        (size,) = struct.unpack(">i", head)
        return head + self._read(size)

    def _read(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(min(n - len(buf), 1 << 20))
            if not chunk:
                raise ConnectionError(f"server closed the connection ({len(buf)} of {n} bytes read)")
            buf += chunk
        return bytes(buf)

    def close(self) -> None:
        self.sock.close()


def _reencode_request(ex: Exchange, change) -> bytes:
    """``ex.request`` with its body decoded, changed by ``change(body) -> body`` and encoded again."""
    schema = load_request_schema(ex.api_key, ex.version)
    payload = ex.request[4:]
    header = parse_request_header(payload, bool(schema.__flexible__))
    body, used = entity_reader(schema)(payload, header.body_offset)
    writer = entity_writer(schema)

    def encode(entity: Any) -> bytes:
        out = io.BytesIO()
        writer(out, entity)
        return out.getvalue()

    original = payload[header.body_offset : header.body_offset + used]
    assert encode(body) == original, f"{ex.label}: kio does not re-encode the recorded request identically"
    new_payload = payload[: header.body_offset] + encode(change(body))
    return struct.pack(">i", len(new_payload)) + new_payload


def rewrite_request(ex: Exchange, kafka_ids: TopicIds, our_ids: TopicIds) -> bytes:
    """The bytes to send for ``ex``: as recorded, except what only meant something to Kafka."""
    if ex.api_key != FETCH:
        return ex.request
    body = decode_request(ex)
    uses_ids = ex.version >= 13 and any(kafka_ids.names.get(t.topic_id) for t in body.topics)
    in_session = body.session_id != 0
    if not uses_ids and not in_session:
        return ex.request

    def change(b: Any) -> Any:
        if uses_ids:
            topics = []
            for t in b.topics:
                name = kafka_ids.names.get(t.topic_id)
                ours = our_ids.id_of(name) if name else None
                assert name is None or ours is not None, f"{ex.label}: we never reported an id for topic {name}"
                topics.append(dataclasses.replace(t, topic_id=ours) if ours else t)
            b = dataclasses.replace(b, topics=tuple(topics))
        if in_session:
            # Kafka granted a session; we answer session id 0 (none), after which a client sends
            # full fetches: session id 0, epoch 0.
            b = dataclasses.replace(b, session_id=0, session_epoch=0)
        return b

    return _reencode_request(ex, change)


@dataclass
class Replay:
    """Our raw answer to every replayed request, and what each broker said about topic ids."""

    ours: dict[tuple[str, int, int], bytes | Exception] = field(default_factory=dict)
    kafka_ids: TopicIds = field(default_factory=TopicIds)
    our_ids: TopicIds = field(default_factory=TopicIds)

    def run(self, server: SidecarProcess, exchanges: list[Exchange]) -> Replay:
        clients: dict[tuple[str, int], RawClient] = {}
        try:
            for ex in exchanges:
                if ex.response is not None:
                    self.kafka_ids.learn(ex.api_key, plain(decode_response(ex.api_key, ex.version, ex.response)[1]))
                conn = (ex.scenario, ex.conn)
                try:
                    frame = rewrite_request(ex, self.kafka_ids, self.our_ids)
                    client = clients.get(conn) or clients.setdefault(conn, RawClient(server.port))
                    answer = client.request(frame)
                except (OSError, AssertionError) as e:
                    self.ours[ex.key] = e
                    if conn in clients:
                        clients.pop(conn).close()
                    continue
                self.ours[ex.key] = answer
                try:
                    self.our_ids.learn(ex.api_key, plain(decode_response(ex.api_key, ex.version, answer)[1]))
                except Exception:
                    pass  # reported by the comparison of this exchange
        finally:
            for c in clients.values():
                c.close()
        return self


def _scenario_server(tmp_path_factory: pytest.TempPathFactory, name: str) -> SidecarProcess:
    return SidecarProcess(tmp_path_factory.mktemp(name) / "data", BROKER_OVERRIDES).start()


@pytest.fixture(scope="module")
def metadata_replay(tmp_path_factory) -> Iterator[Replay]:
    """apiversions-metadata: every recorded request, in order, against one fresh server."""
    server = _scenario_server(tmp_path_factory, "golden-apiversions-metadata")
    try:
        yield Replay().run(server, list(load_exchanges("apiversions-metadata")))
    finally:
        server.stop()


@pytest.fixture(scope="module")
def produce_fetch_replay(tmp_path_factory) -> Iterator[Replay]:
    """produce-fetch: CreateTopics, the 37 Produce requests, then the reads, as recorded."""
    server = _scenario_server(tmp_path_factory, "golden-produce-fetch")
    try:
        yield Replay().run(server, list(load_exchanges("produce-fetch")))
    finally:
        server.stop()


@pytest.fixture(scope="module")
def configs_replay(tmp_path_factory) -> Iterator[Replay]:
    """configs' CreateTopics requests, after produce-fetch's CreateTopics made topic ``golden``."""
    server = _scenario_server(tmp_path_factory, "golden-configs")
    setup = [ex for ex in load_exchanges("produce-fetch") if ex.api_key == CREATE_TOPICS]
    creates = [ex for ex in load_exchanges("configs") if ex.api_key == CREATE_TOPICS]
    try:
        yield Replay().run(server, setup + creates)
    finally:
        server.stop()


# ---- normalization and comparison -----------------------------------------------------------


def _map_topic_ids(value: Any, ids: TopicIds) -> Any:
    if isinstance(value, dict):
        return {k: ids.label(v) if k == "topic_id" else _map_topic_ids(v, ids) for k, v in value.items()}
    if isinstance(value, list):
        return [_map_topic_ids(v, ids) for v in value]
    return value


# Error messages Kafka 4.0.0 recorded that later Kafka versions reworded: 4.0.0's text -> today's.
REWORDED_SINCE_4_0 = {
    f"Unable to replicate the partition {rf} time(s): The target replication factor of {rf} cannot be reached "
    "because only 1 broker(s) are registered.":
    f"Unable to replicate the partition {rf} time(s): The target replication factor of {rf} cannot be reached "
    "because only 1 broker(s) are registered or some brokers have all their log directories cordoned."
    for rf in range(2, 10)
}


def normalize(api_key: int, version: int, body: dict[str, Any], request: Any, ids: TopicIds) -> dict[str, Any]:
    """``body`` without what legitimately differs between two brokers (see the module doc)."""
    body = _map_topic_ids(copy.deepcopy(body), ids)
    body.pop("throttle_time", None)
    if api_key == CREATE_TOPICS:
        for t in body["topics"]:
            t["error_message"] = REWORDED_SINCE_4_0.get(t["error_message"], t["error_message"])
    if api_key == METADATA:
        for b in body["brokers"]:
            b["host"] = b["port"] = "<listener>"
        body["cluster_id"] = "<cluster id>" if body["cluster_id"] else body["cluster_id"]
        for t in body["topics"]:
            t["partitions"].sort(key=lambda p: p["partition_index"])  # Kafka: hash-set order
        all_topics = request is None or request.topics is None or (version == 0 and not request.topics)
        if all_topics:
            body["topics"].sort(key=lambda t: t["name"] or "")  # Kafka: hash-set order
    elif api_key == FETCH:
        body.pop("session_id", None)
    elif api_key == INIT_PRODUCER_ID and body["producer_id"] >= 0:
        body["producer_id"] = "<producer id>"
    return body


def _describe_records(data: bytes) -> str:
    """Batch boundaries of a records blob: base offset..last offset (bytes) each."""
    out, pos = [], 0
    while pos + 12 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        if pos + 12 + length > len(data):
            out.append(f"partial batch {base} ({len(data) - pos} of {12 + length} bytes)")
            break
        (delta,) = struct.unpack_from(">i", data, pos + 23)
        out.append(f"{base}..{base + delta} ({12 + length} B)")
        pos += 12 + length
    if len(out) > 8:
        out = [*out[:4], f"... {len(out) - 8} more ...", *out[-4:]]
    return f"{len(data)} bytes: " + ", ".join(out)


def differences(kafka: Any, ours: Any, path: str = "") -> list[str]:
    """Every path where the two plain values differ, with both values."""
    if isinstance(kafka, dict) and isinstance(ours, dict):
        out = []
        for k in [*kafka, *(k for k in ours if k not in kafka)]:
            if k not in ours:
                out.append(f"{path}.{k}: only in Kafka's answer")
            elif k not in kafka:
                out.append(f"{path}.{k}: only in ours")
            else:
                out += differences(kafka[k], ours[k], f"{path}.{k}")
        return out
    if isinstance(kafka, list) and isinstance(ours, list):
        out = []
        if len(kafka) != len(ours):
            out.append(f"{path}: {len(kafka)} items in Kafka's answer, {len(ours)} in ours")
        for i, (a, b) in enumerate(zip(kafka, ours, strict=False)):
            hint = ""
            if isinstance(a, dict):
                for k in ("name", "partition_index", "index", "api_key"):
                    if k in a:
                        hint = f"({k}={a[k]!r})"
                        break
            out += differences(a, b, f"{path}[{i}]{hint}")
        return out
    if isinstance(kafka, bytes | bytearray) and isinstance(ours, bytes | bytearray):
        if kafka == ours:
            return []
        first = next((i for i, (a, b) in enumerate(zip(kafka, ours, strict=False)) if a != b), min(len(kafka), len(ours)))
        return [
            f"{path}: bytes differ from byte {first}\n      Kafka: {_describe_records(kafka)}\n      ours:  {_describe_records(ours)}"
        ]
    if kafka != ours or type(kafka) is not type(ours):
        return [f"{path}: Kafka={kafka!r} ours={ours!r}"]
    return []


def assert_same(label: str, kafka: Any, ours: Any) -> None:
    problems = differences(kafka, ours)
    if problems:
        shown = problems[:40] + ([f"... and {len(problems) - 40} more"] if len(problems) > 40 else [])
        pytest.fail(f"{label}: {len(problems)} difference(s) from Kafka 4.0.0:\n  " + "\n  ".join(shown), pytrace=False)


# The version ranges Kafka 4.3.1 (the conformance suite's reference) advertises, recorded from its
# ApiVersions answer: the captures are Kafka 4.0.0's, and versions Kafka serves since (Produce v13,
# Fetch v18, JoinGroup v0-1 again, ...) are ones we serve too.
CURRENT_KAFKA_RANGES = {
    int(k): (lo, hi)
    for k, (lo, hi) in json.loads((GOLDEN.parent / "kafka-4.3.1" / "api-versions.json").read_text())["api_keys"].items()
}


def compare_api_versions(label: str, kafka: dict[str, Any], ours: dict[str, Any]) -> None:
    """We advertise only what we implement (fewer APIs than Kafka): same error code, same schema,
    ascending keys, and each of our version ranges within Kafka's: Kafka 4.0.0's as captured, widened
    to Kafka 4.3.1's (CURRENT_KAFKA_RANGES) for the versions it serves since (JoinGroup v0-1 again)."""
    problems = []
    if kafka["error_code"] != ours["error_code"]:
        problems.append(f".error_code: Kafka={kafka['error_code']} ours={ours['error_code']}")
    # APIs Kafka 4.0.0 did not offer yet but 4.3.1 serves (share groups, KIP-932): 4.3.1's ranges.
    kafka_ranges = dict(CURRENT_KAFKA_RANGES)
    for k in kafka["api_keys"]:
        lo, hi = CURRENT_KAFKA_RANGES.get(k["api_key"], (k["min_version"], k["max_version"]))
        kafka_ranges[k["api_key"]] = (min(k["min_version"], lo), max(k["max_version"], hi))
    keys = [k["api_key"] for k in ours["api_keys"]]
    if keys != sorted(set(keys)):
        problems.append(f".api_keys: not ascending and unique: {keys}")
    for k in ours["api_keys"]:
        lo, hi = k["min_version"], k["max_version"]
        if k["api_key"] not in kafka_ranges:
            problems.append(f".api_keys: we list api {k['api_key']}, which Kafka does not offer")
        elif not (kafka_ranges[k["api_key"]][0] <= lo <= hi <= kafka_ranges[k["api_key"]][1]):
            problems.append(f".api_keys(api_key={k['api_key']}): ours {lo}-{hi} not within Kafka's {kafka_ranges[k['api_key']]}")
    if problems:
        pytest.fail(f"{label}: {len(problems)} difference(s) from Kafka 4.0.0:\n  " + "\n  ".join(problems), pytrace=False)


def _recorded_answer(scenario: str, conn: int, correlation_id: int) -> Exchange:
    return next(ex for ex in load_exchanges(scenario) if (ex.conn, ex.correlation_id) == (conn, correlation_id))


def _expected_body(ex: Exchange, replay: Replay) -> dict[str, Any]:
    """Kafka's normalized answer to ``ex``; for the few answers that depend on Kafka's own timing,
    the answer Kafka gave to the same question once that timing no longer mattered."""
    kafka = plain(decode_response(ex.api_key, ex.version, ex.response)[1])
    if ex.scenario == "apiversions-metadata" and (ex.conn, ex.correlation_id) == (6, 2):
        # InitProducerId: Kafka's first answer was COORDINATOR_LOAD_IN_PROGRESS (its producer-id
        # manager was still loading); the retry (corr 3) got the id. We answer at once.
        retry = _recorded_answer(ex.scenario, 6, 3)
        kafka = plain(decode_response(retry.api_key, retry.version, retry.response)[1])
    if ex.scenario == "apiversions-metadata" and (ex.conn, ex.correlation_id) in ((10, 5), (12, 4)):
        # librdkafka pipelined two Metadata requests for a topic to auto-create; Kafka answered
        # both UNKNOWN_TOPIC_OR_PARTITION because its controller had not created the topic yet.
        # We create synchronously, so the second one finds it: expect the topic as Kafka later
        # described it (its "all topics" answer, conn 13 corr 5).
        later = _recorded_answer(ex.scenario, 13, 5)
        described = {t["name"]: t for t in plain(decode_response(later.api_key, later.version, later.response)[1])["topics"]}
        kafka["topics"] = [described[t["name"]] if t["error_code"] else t for t in kafka["topics"]]
    return normalize(ex.api_key, ex.version, kafka, decode_request(ex), replay.kafka_ids)


def check_exchange(ex: Exchange, replay: Replay) -> None:
    answer = replay.ours.get(ex.key)
    if answer is None:
        pytest.fail(f"{ex.label}: not replayed", pytrace=False)
    if isinstance(answer, Exception):
        pytest.fail(f"{ex.label}: no answer from kafka-sidecar: {answer!r}", pytrace=False)
    try:
        correlation_id, body = decode_response(ex.api_key, ex.version, answer)
    except Exception as e:
        pytest.fail(f"{ex.label}: our answer does not decode as {ex.api_name} v{ex.version}: {e!r}", pytrace=False)
    assert correlation_id == ex.correlation_id, f"{ex.label}: correlation id {correlation_id}, expected {ex.correlation_id}"
    kafka_correlation_id, _ = decode_response(ex.api_key, ex.version, ex.response)
    assert kafka_correlation_id == ex.correlation_id

    if ex.api_key == API_VERSIONS:
        if not _api_versions_known(ex.version):
            # Unknown version: the whole answer is fixed by KIP-511; compare the bytes too.
            assert_same(ex.label, plain(decode_response(ex.api_key, ex.version, ex.response)[1]), plain(body))
            assert answer[8:] == ex.response[8:], f"{ex.label}: body bytes differ: Kafka {ex.response[8:].hex()} ours {answer[8:].hex()}"
            return
        compare_api_versions(ex.label, plain(decode_response(ex.api_key, ex.version, ex.response)[1]), plain(body))
        return
    expected = _expected_body(ex, replay)
    ours = normalize(ex.api_key, ex.version, plain(body), decode_request(ex), replay.our_ids)
    assert_same(ex.label, expected, ours)


# ---- the tests ----------------------------------------------------------------------------


@pytest.mark.parametrize("ex", answered("apiversions-metadata"))
def test_apiversions_metadata(metadata_replay: Replay, ex: Exchange) -> None:
    check_exchange(ex, metadata_replay)


@pytest.mark.parametrize("ex", answered("produce-fetch"))
def test_produce_fetch(produce_fetch_replay: Replay, ex: Exchange) -> None:
    check_exchange(ex, produce_fetch_replay)


@pytest.mark.parametrize("ex", answered("configs", {CREATE_TOPICS}))
def test_configs_create_topics(configs_replay: Replay, ex: Exchange) -> None:
    check_exchange(ex, configs_replay)


def test_golden_frames_present() -> None:
    """The replay tests above are generated from the golden data: make sure it was found."""
    for scenario in ("apiversions-metadata", "produce-fetch", "configs"):
        assert load_exchanges(scenario), f"no golden frames under {GOLDEN / scenario}"


# ---- Kafka 4.0 behaviours next to the golden ones, from its source ----------------------------


def _send(client: RawClient, api_key: int, version: int, body: dict[str, Any], correlation_id: int = 1) -> dict[str, Any]:
    schema = load_request_schema(api_key, version)
    out = io.BytesIO()
    entity_writer(schema)(out, build(schema, body))
    payload = struct.pack(">hhih", api_key, version, correlation_id, 4) + b"test" + (b"\0" if schema.__flexible__ else b"") + out.getvalue()
    answer = client.request(struct.pack(">i", len(payload)) + payload)
    return plain(decode_response(api_key, version, answer)[1])


def test_create_topics_and_metadata_checks_beyond_the_golden_frames(sidecar_factory) -> None:
    """ReplicationControlManager/ControllerApis.createTopics and KafkaApis.getTopicMetadata
    (Kafka 4.0) cases that the golden scenarios do not record."""
    server = sidecar_factory(BROKER_OVERRIDES)
    client = RawClient(server.port)

    def topic(name: str, np: int = 1, rf: int = 1, assignments=(), configs=()) -> dict[str, Any]:
        return {"name": name, "num_partitions": np, "replication_factor": rf, "assignments": list(assignments), "configs": list(configs)}

    answer = _send(client, CREATE_TOPICS, 7, {"timeout": 1000, "validate_only": False, "topics": [
        topic("a.b"), topic("dup"), topic("dup"),
        topic("x", -1, -1, [{"partition_index": 0, "broker_ids": [2]}]),
        topic("y", 1, 1, [{"partition_index": 0, "broker_ids": [1]}]),
        topic("z", -1, -1, [{"partition_index": 1, "broker_ids": [1]}]),
        topic("n", configs=[{"name": "retention.ms", "value": None}]),
        topic("rf0", 1, 0), topic("rf0np0", 0, 0),
        topic("manual", -1, -1, [{"partition_index": 0, "broker_ids": [1]}, {"partition_index": 1, "broker_ids": [1]}]),
    ]})
    got = [(t["name"], t["error_code"], t["error_message"], t["num_partitions"]) for t in answer["topics"]]
    assert got == [
        ("a.b", 0, None, 1),
        ("x", 39, "The manual partition assignment includes broker 2, but no such broker is registered.", -1),
        ("y", 42, "A manual partition assignment was specified, but replication factor was not set to -1.", -1),
        ("z", 39, "partitions should be a consecutive 0-based integer sequence", -1),
        ("n", 40, "Null value not supported for topic configs: retention.ms", -1),
        ("rf0", 38, "Replication factor must be larger than 0, or -1 to use the default value.", -1),
        ("rf0np0", 38, "Replication factor must be larger than 0, or -1 to use the default value.", -1),
        ("manual", 0, None, 2),
        ("dup", 42, "Duplicate topic name.", -1),  # after the others, created neither time
    ]
    answer = _send(client, CREATE_TOPICS, 7, {"timeout": 1000, "validate_only": False, "topics": [topic("a_b")]}, 2)
    assert [(t["error_code"], t["error_message"]) for t in answer["topics"]] == [(17, "Topic 'a_b' collides with existing topic: a.b")]

    # Metadata v9: existing topics first; without auto-creation an invalid name is 17, not 3;
    # authorized operations as Kafka reports them without an authorizer.
    answer = _send(client, METADATA, 9, {"topics": [{"name": "bad name"}, {"name": "__consumer_offsets"}, {"name": "a.b"}],
                                         "allow_auto_topic_creation": False, "include_cluster_authorized_operations": True,
                                         "include_topic_authorized_operations": True}, 3)
    assert [(t["name"], t["error_code"], t["is_internal"], t["topic_authorized_operations"]) for t in answer["topics"]] == [
        ("a.b", 0, False, 3576), ("bad name", 17, False, 3576), ("__consumer_offsets", 3, True, 3576),
    ]
    assert answer["cluster_authorized_operations"] == 8096
    client.close()
