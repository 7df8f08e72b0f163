"""Bad input over raw TCP: the server answers like Kafka or closes only that connection.

Every case checks three things: the bad connection gets Kafka's answer (or is
closed, as Kafka closes it), a second connection opened before keeps working,
and the server log has exactly one line about the problem. Expected answers
were checked against Apache Kafka 4.1.0 and the
golden frames of Kafka 4.0.0.

``RawClient`` and the request helpers here are also used by ``test_crash.py``
and ``test_cli.py``.
"""

from __future__ import annotations

import datetime
import io
import json
import random
import re
import socket
import struct
import time
import uuid
import zlib
from typing import Any

import pytest
from kafka_sidecar.protocol.records import Record, decode_batches, encode_batch
from kio.index import load_response_schema
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.create_topics.v5 import request as create_topics
from kio.schema.fetch.v12 import request as fetch
from kio.schema.list_offsets.v7 import request as list_offsets
from kio.schema.metadata.v12 import request as metadata
from kio.schema.produce.v9 import request as produce
from kio.serial import entity_reader, entity_writer

from tests.support import GOLDEN, RECENT_TS, SidecarProcess

API_VERSIONS = 18
NONE = 0
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
MESSAGE_TOO_LARGE = 10
UNSUPPORTED_VERSION = 35
INVALID_RECORD = 87

IO_TIMEOUT = 10.0


# --------------------------------------------------------------------------- raw client


class RawClient:
    """One TCP connection speaking Kafka frames; requests are kio entities."""

    def __init__(self, port: int, client_id: str = "raw", timeout: float = IO_TIMEOUT) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.client_id = client_id
        self._buf = b""
        self._next_correlation_id = 1
        self.log_start = 0  # where the server log stood when this connection was made (see ``bad``)

    @property
    def local_port(self) -> int:
        return self.sock.getsockname()[1]

    @property
    def peer_pattern(self) -> re.Pattern[str]:
        """How the server names this connection in its log: ``127.0.0.1:<our port>``."""
        return re.compile(rf"127\.0\.0\.1:{self.local_port}(?!\d)")

    def close(self) -> None:
        self.sock.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def encode(self, req: Any, correlation_id: int, version: int | None = None) -> bytes:
        """A framed request: header v1 (v2 when flexible) + the kio-encoded body."""
        cls = type(req)
        cid = self.client_id.encode()
        version = cls.__version__ if version is None else version
        head = struct.pack(">hhih", cls.__api_key__, version, correlation_id, len(cid)) + cid
        if cls.__flexible__:
            head += b"\0"
        body = io.BytesIO()
        entity_writer(cls)(body, req)
        payload = head + body.getvalue()
        return struct.pack(">i", len(payload)) + payload

    def recv_frame(self) -> bytes | None:
        """The next response frame (without its size), or None when the server closed."""

        def fill(n: int) -> bool:
            while len(self._buf) < n:
                chunk = self.sock.recv(1 << 16)
                if not chunk:
                    return False
                self._buf += chunk
            return True

        if not fill(4):
            return None
        (size,) = struct.unpack_from(">i", self._buf)
        if not fill(4 + size):
            return None
        frame, self._buf = self._buf[4 : 4 + size], self._buf[4 + size :]
        return frame

    @staticmethod
    def decode(frame: bytes, api_key: int, version: int) -> tuple[int, Any]:
        """(correlation id, response entity) of a response frame."""
        cls = load_response_schema(api_key, version)
        (correlation_id,) = struct.unpack_from(">i", frame)
        # ApiVersions answers always use response header v0.
        pos = 4 + (1 if cls.__flexible__ and api_key != API_VERSIONS else 0)
        value, _ = entity_reader(cls)(frame, pos)
        return correlation_id, value

    def request(self, req: Any) -> Any:
        correlation_id = self._next_correlation_id
        self._next_correlation_id += 1
        self.send_raw(self.encode(req, correlation_id))
        frame = self.recv_frame()
        assert frame is not None, f"server closed the connection instead of answering {type(req).__name__}"
        got, value = self.decode(frame, type(req).__api_key__, type(req).__version__)
        assert got == correlation_id
        return value

    def is_closed_by_server(self) -> bool:
        """True when the server closed this connection (EOF or reset) without answering."""
        try:
            return self.recv_frame() is None
        except ConnectionResetError:
            return True


def api_versions_request() -> ApiVersionsRequest:
    return ApiVersionsRequest(client_software_name="kafka-sidecar-tests", client_software_version="1")


def metadata_request(topics: list[str] | None, allow_auto_create: bool = True) -> Any:
    return metadata.MetadataRequest(
        topics=None if topics is None else tuple(metadata.MetadataRequestTopic(topic_id=None, name=t) for t in topics),
        allow_auto_topic_creation=allow_auto_create,
        include_topic_authorized_operations=False,
    )


def create_topic(port: int, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> None:
    client = RawClient(port, client_id="setup")
    try:
        resp = client.request(create_topics.CreateTopicsRequest(
            topics=(create_topics.CreatableTopic(
                name=name, num_partitions=partitions, replication_factor=1, assignments=(),
                configs=tuple(create_topics.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()),
            ),),
            timeout=datetime.timedelta(seconds=10),
            validate_only=False,
        ))
    finally:
        client.close()
    (result,) = resp.topics
    assert result.error_code == NONE, (result.error_code, result.error_message)


def produce_request(topic: str, partitions: dict[int, bytes | None], acks: int = -1) -> Any:
    return produce.ProduceRequest(
        acks=acks,
        timeout=datetime.timedelta(seconds=10),
        topic_data=(produce.TopicProduceData(
            name=topic,
            partition_data=tuple(produce.PartitionProduceData(index=i, records=r) for i, r in partitions.items()),
        ),),
    )


def partition_results(resp: Any) -> dict[int, Any]:
    """Produce response partitions by index (one topic)."""
    (topic,) = resp.responses
    return {p.index: p for p in topic.partition_responses}


def list_offset(client: RawClient, topic: str, partition: int, timestamp: int = -1) -> int:
    """ListOffsets latest (-1) / earliest (-2): the offset."""
    resp = client.request(list_offsets.ListOffsetsRequest(
        replica_id=-1, isolation_level=0,
        topics=(list_offsets.ListOffsetsTopic(name=topic, partitions=(
            list_offsets.ListOffsetsPartition(partition_index=partition, timestamp=timestamp),
        )),),
    ))
    (p,) = resp.topics[0].partitions
    assert p.error_code == NONE, p.error_code
    return p.offset


def fetch_once(client: RawClient, topic: str, partition: int, offset: int, max_bytes: int = 1 << 20) -> tuple[Any, bytes]:
    """One Fetch v12 (no wait): (partition response, raw records bytes)."""
    resp = client.request(fetch.FetchRequest(
        max_wait=datetime.timedelta(0), min_bytes=0, max_bytes=max_bytes, isolation_level=0,
        session_id=0, session_epoch=-1,
        topics=(fetch.FetchTopic(topic=topic, partitions=(
            fetch.FetchPartition(partition=partition, fetch_offset=offset, partition_max_bytes=max_bytes),
        )),),
        forgotten_topics_data=(),
    ))
    assert resp.error_code == NONE
    (p,) = resp.responses[0].partitions
    return p, bytes(p.records or b"")


def fetch_all(client: RawClient, topic: str, partition: int, start: int = 0, timeout: float = 15.0) -> list[Record]:
    """Every record from ``start`` to the high watermark (CRC-checked), by repeated Fetch."""
    out: list[Record] = []
    offset = start
    deadline = time.monotonic() + timeout
    while True:
        p, raw = fetch_once(client, topic, partition, offset)
        assert p.error_code == NONE, (topic, partition, offset, p.error_code)
        for batch in decode_batches(raw, verify_crc=True):
            out.extend(r for r in batch.records if r.offset >= offset)
            offset = max(offset, batch.next_offset)
        if offset >= p.high_watermark:
            return out
        assert time.monotonic() < deadline, f"fetching {topic}-{partition} stalled at offset {offset}"


def records(values: list[bytes], ts: int = RECENT_TS) -> bytes:
    return encode_batch([Record(i, ts + i, b"k%d" % i, v) for i, v in enumerate(values)])


# ------------------------------------------------------------------------ log checks


def log_lines_matching(server: SidecarProcess, needles: list[str | re.Pattern[str]], since: int = 0) -> list[str]:
    """Server log lines (from character ``since`` on) that mention one of ``needles``."""

    def hit(line: str) -> bool:
        return any(n.search(line) if isinstance(n, re.Pattern) else n in line for n in needles)

    return [line for line in server.log_text()[since:].splitlines() if hit(line)]


def assert_one_log_line(server: SidecarProcess, needles: list[str | re.Pattern[str]], reason: str, since: int = 0, timeout: float = 5.0) -> str:
    """Exactly one server log line names this connection/client/partition, and it says ``reason`` (regex)."""
    deadline = time.monotonic() + timeout
    lines = log_lines_matching(server, needles, since)
    while not lines and time.monotonic() < deadline:
        time.sleep(0.05)
        lines = log_lines_matching(server, needles, since)
    assert lines, f"no server log line mentions any of {needles}; log since the test began:\n{server.log_text()[since:][-3000:]}"
    assert len(lines) == 1, f"expected one log line, got {len(lines)}:\n" + "\n".join(lines)
    assert re.search(reason, lines[0], re.IGNORECASE), f"log line does not say /{reason}/: {lines[0]}"
    return lines[0]


def assert_healthy(server: SidecarProcess, witness: RawClient) -> None:
    assert server.proc is not None and server.proc.poll() is None, "server exited"
    resp = witness.request(api_versions_request())
    assert resp.error_code == NONE
    assert {k.api_key for k in resp.api_keys} >= {0, 1, 3, 18}


@pytest.fixture
def witness(sidecar: SidecarProcess):
    """A connection opened (and used) before the bad input; it must keep working."""
    client = RawClient(sidecar.port, client_id="witness")
    assert_healthy(sidecar, client)
    yield client
    client.close()


@pytest.fixture
def bad(sidecar: SidecarProcess):
    """The connection that sends the bad input, with a unique client id."""
    client = RawClient(sidecar.port, client_id=f"bad-{uuid.uuid4().hex[:10]}")
    client.log_start = len(sidecar.log_text())  # only lines logged from now on count
    yield client
    client.close()


def _header(api_key: int, version: int, correlation_id: int, client_id: str, flexible: bool) -> bytes:
    cid = client_id.encode()
    return struct.pack(">hhih", api_key, version, correlation_id, len(cid)) + cid + (b"\0" if flexible else b"")


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


# ------------------------------------------------------------------- connection level


def test_garbage_frame_closes_only_that_connection(sidecar, witness, bad):
    garbage = random.Random(20251122).randbytes(64)
    bad.send_raw(_frame(garbage))
    assert bad.is_closed_by_server()
    assert_one_log_line(sidecar, [bad.peer_pattern], r"closing connection", since=bad.log_start)
    assert_healthy(sidecar, witness)


@pytest.mark.parametrize("size", [2**31 - 1, -1, -(2**31), 0], ids=["max-int", "minus-one", "min-int", "zero"])
def test_absurd_frame_size_closes_only_that_connection(sidecar, witness, bad, size):
    bad.send_raw(struct.pack(">i", size) + b"\0" * 16)
    assert bad.is_closed_by_server()
    assert_one_log_line(sidecar, [bad.peer_pattern], r"size|shorter", since=bad.log_start)
    assert_healthy(sidecar, witness)


def test_unknown_api_key_closes_only_that_connection(sidecar, witness, bad):
    bad.send_raw(_frame(_header(1000, 0, 7, bad.client_id, False) + b"\0" * 8))
    assert bad.is_closed_by_server()
    assert_one_log_line(sidecar, [bad.peer_pattern, bad.client_id], r"api key.*1000", since=bad.log_start)
    assert_healthy(sidecar, witness)


@pytest.mark.parametrize("version", [2, 14, -1])
def test_unsupported_produce_version_closes_only_that_connection(sidecar, witness, bad, version):
    # Kafka 4.x accepts Produce 3+; below or above the range it closes the connection.
    body = struct.pack(">hhii", -1, -1, 1000, 0)
    bad.send_raw(_frame(_header(0, version, 7, bad.client_id, version >= 9) + body))
    assert bad.is_closed_by_server()
    assert_one_log_line(sidecar, [bad.peer_pattern, bad.client_id], rf"version {version}\b.*produce|produce.*version {version}\b", since=bad.log_start)
    assert_healthy(sidecar, witness)


def test_truncated_request_closes_only_that_connection(sidecar, witness, bad):
    partial = _header(API_VERSIONS, 0, 7, bad.client_id, False)
    bad.send_raw(struct.pack(">i", 100) + partial)
    bad.sock.shutdown(socket.SHUT_WR)  # the client goes away mid-frame
    assert bad.is_closed_by_server()
    assert_one_log_line(sidecar, [bad.peer_pattern], rf"truncated.*{len(partial)}\D+100", since=bad.log_start)
    assert_healthy(sidecar, witness)


@pytest.mark.parametrize(
    ("api_key", "version", "flexible", "body"),
    [
        (3, 12, True, b"\x05\x00"),  # Metadata v12: 4 topics announced, none sent
        (3, 1, False, b"\x00\x00\x00\x05\x00"),  # Metadata v1, same in the non-flexible format
        (3, 12, True, b"\xff\xff\xff\xff\x07"),  # compact array of 2**32 - 2 topics
        (18, 3, True, b"\x05ab"),  # ApiVersions v3: client software name cut short
    ],
    ids=["metadata-v12", "metadata-v1", "metadata-huge-array", "apiversions-v3"],
)
def test_undecodable_body_closes_only_that_connection(sidecar, witness, bad, api_key, version, flexible, body):
    bad.send_raw(_frame(_header(api_key, version, 7, bad.client_id, flexible) + body))
    assert bad.is_closed_by_server()
    assert_one_log_line(sidecar, [bad.peer_pattern, bad.client_id], r"decode", since=bad.log_start)
    assert_healthy(sidecar, witness)


def _golden_unsupported_api_versions() -> tuple[bytes, bytes]:
    """Kafka 4.0.0's ApiVersions v127 request and its answer, as captured (full frames)."""
    frames = [json.loads(line) for line in (GOLDEN / "apiversions-metadata" / "frames.jsonl").read_text().splitlines() if line.strip()]
    req = next(f for f in frames if f["dir"] == "request" and f["api_key"] == API_VERSIONS and f["api_version"] == 127)
    resp = next(f for f in frames if f["dir"] == "response" and f["conn"] == req["conn"] and f["correlation_id"] == req["correlation_id"])
    return bytes.fromhex(req["hex"]), bytes.fromhex(resp["hex"])


def test_api_versions_unsupported_version_gets_kafkas_v0_answer(sidecar, witness, bad):
    request, expected = _golden_unsupported_api_versions()
    bad.send_raw(request)
    frame = bad.recv_frame()
    assert frame is not None, "server closed the connection instead of answering ApiVersions v127"
    # Byte for byte what Kafka answered: header v0, v0 body, error 35, api_keys [{18, 0, 4}].
    assert struct.pack(">i", len(frame)) + frame == expected
    correlation_id, body = RawClient.decode(frame, API_VERSIONS, 0)
    assert body.error_code == UNSUPPORTED_VERSION
    assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [(18, 0, 4)]
    # The client retries with a version it knows, on the same connection.
    assert bad.request(api_versions_request()).error_code == NONE
    assert_one_log_line(sidecar, [bad.peer_pattern, "golden-raw-unsupported"], r"version.*127|127.*version", since=bad.log_start)
    assert_healthy(sidecar, witness)


def test_pipelined_requests_are_answered_in_order(sidecar, witness, bad):
    kinds = []
    data = b""
    for i in range(50):
        req = api_versions_request() if i % 2 == 0 else metadata_request(None)
        kinds.append(req)
        data += bad.encode(req, 1000 + i)
    bad.send_raw(data)  # all 50 before reading anything
    for i, req in enumerate(kinds):
        frame = bad.recv_frame()
        assert frame is not None, f"connection closed after {i} of 50 pipelined responses"
        correlation_id, body = RawClient.decode(frame, type(req).__api_key__, type(req).__version__)
        assert correlation_id == 1000 + i
        if isinstance(req, ApiVersionsRequest):
            assert body.error_code == NONE
        else:
            assert [b.node_id for b in body.brokers] == [1]
    assert_healthy(sidecar, witness)


def test_pipelined_requests_before_a_bad_one_are_answered_then_closed(sidecar, witness, bad):
    data = b"".join(bad.encode(api_versions_request(), 100 + i) for i in range(10))
    data += _frame(_header(1000, 0, 999, bad.client_id, False))
    data += b"".join(bad.encode(api_versions_request(), 200 + i) for i in range(5))
    bad.send_raw(data)
    got = []
    while True:
        frame = bad.recv_frame()
        if frame is None:
            break
        got.append(struct.unpack_from(">i", frame)[0])
        assert len(got) <= 15
    assert got == list(range(100, 110))
    assert_one_log_line(sidecar, [bad.peer_pattern, bad.client_id], r"api key.*1000", since=bad.log_start)
    assert_healthy(sidecar, witness)


# --------------------------------------------------------------------- produce level


def _unique_topic() -> str:
    return f"bad-input-{uuid.uuid4().hex[:12]}"


def _partition_needles(bad: RawClient, topic: str, partition: int) -> list[str | re.Pattern[str]]:
    return [re.compile(rf"{re.escape(topic)}-{partition}(?!\d)"), bad.client_id]


def test_produce_bad_crc_fails_only_that_partition(sidecar, witness, bad):
    topic = _unique_topic()
    create_topic(sidecar.port, topic, partitions=2)
    good = records([b"good-0", b"good-1"])
    corrupt = bytearray(records([b"corrupt-0", b"corrupt-1"]))
    corrupt[-1] ^= 0x5A  # a value byte: the stored CRC-32C no longer matches
    results = partition_results(bad.request(produce_request(topic, {0: bytes(corrupt), 1: good})))
    assert sorted(results) == [0, 1]
    assert results[0].error_code == CORRUPT_MESSAGE
    assert results[0].base_offset == -1
    assert results[1].error_code == NONE
    assert results[1].base_offset == 0
    assert_one_log_line(sidecar, [*_partition_needles(bad, topic, 0), re.compile(rf"{re.escape(topic)}-1(?!\d)")], r"crc", since=bad.log_start)
    # Nothing of the corrupt batch was stored; the good one was.
    assert list_offset(witness, topic, 0) == 0
    assert list_offset(witness, topic, 1) == 2
    assert [r.value for r in fetch_all(witness, topic, 1)] == [b"good-0", b"good-1"]
    # The connection stays usable (a partition error is an answer, not a protocol violation).
    assert partition_results(bad.request(produce_request(topic, {0: good})))[0].base_offset == 0
    assert_healthy(sidecar, witness)


def _legacy_message_set(value: bytes, ts: int = 1_700_000_000_000) -> bytes:
    """One message in the magic 1 format (what pre-0.11 clients sent): offset, size, crc32, magic 1, ..."""
    body = struct.pack(">bbq", 1, 0, ts) + struct.pack(">i", -1) + struct.pack(">i", len(value)) + value
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", 0, len(message)) + message


def test_produce_magic_1_batch_is_invalid_record(sidecar, witness, bad):
    # Kafka (ProduceRequest.validateRecords): Produce v3+ must carry magic 2 -> INVALID_RECORD (87).
    topic = _unique_topic()
    create_topic(sidecar.port, topic)
    results = partition_results(bad.request(produce_request(topic, {0: _legacy_message_set(b"old-format")})))
    assert results[0].error_code == INVALID_RECORD
    assert results[0].base_offset == -1
    assert_one_log_line(sidecar, _partition_needles(bad, topic, 0), r"magic", since=bad.log_start)
    assert list_offset(witness, topic, 0) == 0
    assert_healthy(sidecar, witness)


def test_produce_two_batches_for_one_partition_is_invalid_record(sidecar, witness, bad):
    # Kafka: "Produce requests with version 3+ are only allowed to contain exactly one record batch per partition".
    topic = _unique_topic()
    create_topic(sidecar.port, topic)
    batch = records([b"a"])
    results = partition_results(bad.request(produce_request(topic, {0: batch + batch})))
    assert results[0].error_code == INVALID_RECORD
    assert list_offset(witness, topic, 0) == 0
    assert_one_log_line(sidecar, _partition_needles(bad, topic, 0), r"one record batch|batches", since=bad.log_start)
    assert_healthy(sidecar, witness)


def test_produce_empty_records_is_invalid_record(sidecar, witness, bad):
    # Kafka: "Produce requests with version 3+ must have at least one record batch per partition" -> 87.
    topic = _unique_topic()
    create_topic(sidecar.port, topic)
    results = partition_results(bad.request(produce_request(topic, {0: b""})))
    assert results[0].error_code == INVALID_RECORD
    assert list_offset(witness, topic, 0) == 0
    assert_one_log_line(sidecar, _partition_needles(bad, topic, 0), r"batch|record", since=bad.log_start)
    assert_healthy(sidecar, witness)


def test_produce_batch_over_max_message_bytes(sidecar, witness, bad):
    topic = _unique_topic()
    create_topic(sidecar.port, topic, configs={"max.message.bytes": "1000"})
    small = records([b"x" * 100])
    big = records([b"x" * 2000])
    assert len(small) < 1000 < len(big)
    results = partition_results(bad.request(produce_request(topic, {0: big})))
    assert results[0].error_code == MESSAGE_TOO_LARGE
    assert results[0].base_offset == -1
    assert_one_log_line(sidecar, _partition_needles(bad, topic, 0), r"max\.message\.bytes|too large|larger", since=bad.log_start)
    assert list_offset(witness, topic, 0) == 0
    # A batch under the limit still goes in.
    results = partition_results(bad.request(produce_request(topic, {0: small})))
    assert (results[0].error_code, results[0].base_offset) == (NONE, 0)
    assert_healthy(sidecar, witness)


def test_produce_to_unknown_topic(sidecar, witness, bad):
    topic = _unique_topic()
    results = partition_results(bad.request(produce_request(topic, {0: records([b"v"])})))
    assert results[0].error_code == UNKNOWN_TOPIC_OR_PARTITION
    assert results[0].base_offset == -1
    assert_one_log_line(sidecar, [re.compile(re.escape(topic)), bad.client_id], r"unknown|does not (exist|host)|no such", since=bad.log_start)
    # Produce never creates topics (only Metadata auto-creates).
    resp = witness.request(metadata_request([topic], allow_auto_create=False))
    assert resp.topics[0].error_code == UNKNOWN_TOPIC_OR_PARTITION
    assert_healthy(sidecar, witness)


def test_produce_to_unknown_partition(sidecar, witness, bad):
    topic = _unique_topic()
    create_topic(sidecar.port, topic, partitions=1)
    results = partition_results(bad.request(produce_request(topic, {7: records([b"v"]), 0: records([b"ok"])})))
    assert results[7].error_code == UNKNOWN_TOPIC_OR_PARTITION
    assert results[7].base_offset == -1
    assert (results[0].error_code, results[0].base_offset) == (NONE, 0)
    assert_one_log_line(sidecar, _partition_needles(bad, topic, 7), r"unknown|does not (exist|host)|no such", since=bad.log_start)
    assert_healthy(sidecar, witness)
