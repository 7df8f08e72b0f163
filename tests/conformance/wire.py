"""Raw Kafka requests for the conformance suite, at fixed versions both brokers support.

One ``Wire`` is one TCP connection to a single-broker cluster (ours or the reference): the
bootstrap broker is every partition's leader and every group's coordinator, so requests go
to it directly. Bodies are encoded and decoded with kio (``kafka_sidecar.protocol.messages``)
and handed back as plain data (``plain``): dicts, lists, ints (error codes, milliseconds),
str, bytes. Nothing here retries a refused request silently except where Kafka itself is
documented to answer a retriable error for a moment (a just-created partition's leader).
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import socket
import struct
import time
import uuid
from typing import Any

from kafka_sidecar.protocol.messages import decode_response, encode_request
from kafka_sidecar.protocol.records import Record, RecordBatch, decode_batches, encode_batch

PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 8, 9, 10
DESCRIBE_GROUPS, LIST_GROUPS = 15, 16
CREATE_TOPICS, DELETE_TOPICS, DELETE_RECORDS, INIT_PRODUCER_ID = 19, 20, 21, 22
DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 33, 44

EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4

# Error codes the scenarios name (Kafka's Errors.java).
ERRORS = {
    0: "NONE", 1: "OFFSET_OUT_OF_RANGE", 2: "CORRUPT_MESSAGE", 3: "UNKNOWN_TOPIC_OR_PARTITION",
    6: "NOT_LEADER_OR_FOLLOWER", 7: "REQUEST_TIMED_OUT", 10: "MESSAGE_TOO_LARGE",
    14: "COORDINATOR_LOAD_IN_PROGRESS", 15: "COORDINATOR_NOT_AVAILABLE", 16: "NOT_COORDINATOR",
    21: "INVALID_REQUIRED_ACKS",
    17: "INVALID_TOPIC_EXCEPTION", 32: "INVALID_TIMESTAMP", 36: "TOPIC_ALREADY_EXISTS",
    37: "INVALID_PARTITIONS", 38: "INVALID_REPLICATION_FACTOR", 40: "INVALID_CONFIG",
    42: "INVALID_REQUEST", 44: "POLICY_VIOLATION", 45: "OUT_OF_ORDER_SEQUENCE_NUMBER",
    47: "INVALID_PRODUCER_EPOCH", 59: "UNKNOWN_PRODUCER_ID", 87: "INVALID_RECORD",
    70: "FETCH_SESSION_ID_NOT_FOUND", 71: "INVALID_FETCH_SESSION_EPOCH", 100: "UNKNOWN_TOPIC_ID",
    106: "FETCH_SESSION_TOPIC_ID_ERROR",
}
RETRIABLE_AFTER_CREATE = {3, 5, 6}  # UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER
RETRIABLE_COORDINATOR = {14, 15, 16}  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def error_name(code: int) -> str:
    return f"{ERRORS.get(code, 'error')}({code})"


def plain(value: Any) -> Any:
    """A kio entity as plain data (error codes and durations as ints)."""
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


def parse_bootstrap(bootstrap: str) -> tuple[str, int]:
    host, _, port = bootstrap.split(",")[0].strip().rpartition(":")
    return host.strip("[]") or "127.0.0.1", int(port)


class Wire:
    """One connection; ``call`` sends one request at a fixed version and returns plain data."""

    def __init__(self, bootstrap: str, client_id: str = "conformance", timeout: float = 20.0) -> None:
        self.bootstrap = bootstrap
        self.sock = socket.create_connection(parse_bootstrap(bootstrap), timeout=timeout)
        self.client_id = client_id
        self._correlation = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Wire:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _read(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(min(n - len(buf), 1 << 20))
            if not chunk:
                raise ConnectionError(f"{self.bootstrap} closed the connection ({len(buf)} of {n} bytes read)")
            buf += chunk
        return bytes(buf)

    def frame(self, api_key: int, version: int, data: dict[str, Any]) -> bytes:
        """The exact bytes of a request (to send more than once: ``send_frame``)."""
        self._correlation += 1
        return encode_request(api_key, version, self._correlation, self.client_id, data)

    def send_frame(self, api_key: int, version: int, frame: bytes) -> dict[str, Any]:
        self.sock.sendall(frame)
        (size,) = struct.unpack(">i", self._read(4))
        correlation_id, body = decode_response(api_key, version, self._read(size))
        expected = struct.unpack_from(">i", frame, 8)[0]
        assert correlation_id == expected, f"correlation id {correlation_id}, expected {expected}"
        return plain(body)

    def call(self, api_key: int, version: int, data: dict[str, Any]) -> dict[str, Any]:
        return self.send_frame(api_key, version, self.frame(api_key, version, data))

    def pipeline(self, calls: list[tuple[int, int, dict[str, Any]]]) -> list[dict[str, Any]]:
        """Several requests in one write (the broker handles them in order, back to back); their answers."""
        frames = [(k, v, self.frame(k, v, d)) for k, v, d in calls]
        self.sock.sendall(b"".join(f for _, _, f in frames))
        out = []
        for api_key, version, frame in frames:
            (size,) = struct.unpack(">i", self._read(4))
            correlation_id, body = decode_response(api_key, version, self._read(size))
            assert correlation_id == struct.unpack_from(">i", frame, 8)[0]
            out.append(plain(body))
        return out

    # ------------------------------------------------------------------ topics

    def metadata(self, topics: list[str] | None, auto_create: bool = False) -> dict[str, Any]:
        return self.call(METADATA, 12, {
            "topics": None if topics is None else [{"name": t, "topic_id": None} for t in topics],
            "allow_auto_topic_creation": auto_create,
            "include_topic_authorized_operations": False,
        })

    def create_topics(self, topics: list[dict[str, Any]], validate_only: bool = False) -> dict[str, dict[str, Any]]:
        """CreateTopics v7; ``topics``: dicts with name, partitions (1), rf (1), configs ({}).

        Returns name -> {error, message, partitions, configs: name -> (value, source)}.
        """
        body = self.call(CREATE_TOPICS, 7, {
            "topics": [{
                "name": t["name"],
                "num_partitions": t.get("partitions", 1),
                "replication_factor": t.get("rf", 1),
                "assignments": [],
                "configs": [{"name": k, "value": v} for k, v in (t.get("configs") or {}).items()],
            } for t in topics],
            "timeout": 15_000,
            "validate_only": validate_only,
        })
        return {
            r["name"]: {
                "error": r["error_code"], "message": r["error_message"],
                "partitions": r["num_partitions"], "replication_factor": r["replication_factor"],
            }
            for r in body["topics"]
        }

    def create_topic(self, name: str, partitions: int = 1, configs: dict[str, str] | None = None, timeout: float = 20.0) -> None:
        """Create a topic and wait (bounded) until each partition answers ListOffsets."""
        result = self.create_topics([{"name": name, "partitions": partitions, "configs": configs or {}}])[name]
        assert result["error"] == 0, f"CreateTopics {name} {configs}: {error_name(result['error'])} {result['message']}"
        self.wait_ready(name, partitions, timeout)

    def wait_ready(self, topic: str, partitions: int = 1, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            codes = [self.list_offsets(topic, p, LATEST)["error"] for p in range(partitions)]
            if all(c == 0 for c in codes):
                return
            if time.monotonic() > deadline or any(c not in RETRIABLE_AFTER_CREATE | {0} for c in codes):
                raise AssertionError(f"topic {topic} not ready after {timeout}s: {[error_name(c) for c in codes]}")
            time.sleep(0.05)

    def delete_topics(self, names: list[str]) -> dict[str, int]:
        body = self.call(DELETE_TOPICS, 6, {
            "topics": [{"name": n, "topic_id": uuid.UUID(int=0)} for n in names], "timeout": 15_000,
        })
        return {r["name"]: r["error_code"] for r in body["responses"]}

    # ------------------------------------------------------------------ records

    def produce(self, topic: str, records: bytes, partition: int = 0, acks: int = -1) -> dict[str, Any]:
        """Produce v9 of one partition: {error, base_offset, log_append_time, log_start_offset, message}."""
        return self.produce_result(self.send_frame(PRODUCE, 9, self.produce_frame(topic, records, partition, acks)))

    def produce_frame(self, topic: str, records: bytes, partition: int = 0, acks: int = -1) -> bytes:
        return self.frame(PRODUCE, 9, {
            "transactional_id": None, "acks": acks, "timeout": 15_000,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}],
        })

    @staticmethod
    def produce_result(body: dict[str, Any]) -> dict[str, Any]:
        (t,) = body["responses"]
        (p,) = t["partition_responses"]
        return {
            "error": p["error_code"], "base_offset": p["base_offset"], "log_append_time": p["log_append_time"],
            "log_start_offset": p["log_start_offset"], "message": p["error_message"],
            "record_errors": [(e["batch_index"], e["batch_index_error_message"]) for e in p["record_errors"]],
        }

    def fetch(self, topic: str, partition: int, offset: int, *, max_bytes: int = 1 << 20,
              partition_max_bytes: int = 1 << 20, max_wait_ms: int = 0) -> dict[str, Any]:
        """Fetch v12 of one partition by name: the partition's fields, records as bytes."""
        body = self.call(FETCH, 12, {
            "replica_id": -1, "max_wait": max_wait_ms, "min_bytes": 0, "max_bytes": max_bytes,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [{
                "partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
                "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": partition_max_bytes,
            }]}],
            "forgotten_topics_data": [], "rack_id": "",
        })
        assert body["error_code"] == 0, f"Fetch: top-level {error_name(body['error_code'])}"
        (t,) = body["responses"]
        (p,) = t["partitions"]
        return {
            "error": p["error_code"], "high_watermark": p["high_watermark"],
            "last_stable_offset": p["last_stable_offset"], "log_start_offset": p["log_start_offset"],
            "records": p["records"] or b"",
        }

    def fetch_by_id(self, topic_id: uuid.UUID, partition: int = 0, offset: int = 0) -> dict[str, Any]:
        """Fetch v13 (topic ids): the top-level error and the partition's error."""
        body = self.call(FETCH, 13, {
            "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic_id": topic_id, "partitions": [{
                "partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
                "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1 << 20,
            }]}],
            "forgotten_topics_data": [], "rack_id": "",
        })
        parts = [p for t in body["responses"] for p in t["partitions"]]
        return {"error": body["error_code"], "partition_errors": [p["error_code"] for p in parts]}

    def fetch_session(self, version: int, session_id: int, epoch: int, topics: list[tuple[Any, list[tuple[int, int]]]],
                      forgotten: list[tuple[Any, list[int]]] | None = None, *, max_wait_ms: int = 0,
                      partition_max_bytes: int = 1 << 20) -> dict[str, Any]:
        """One Fetch with session fields (KIP-227), v7-v17: ``topics`` as (name, or topic id at v13+,
        [(partition, fetch offset)]), ``forgotten`` as (name or id, [partitions]). The plain body."""
        key = "topic_id" if version >= 13 else "topic"
        data: dict[str, Any] = {
            "max_wait": max_wait_ms, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": session_id, "session_epoch": epoch,
            "topics": [{key: t, "partitions": [{
                "partition": p, "current_leader_epoch": -1, "fetch_offset": o, "last_fetched_epoch": -1,
                "log_start_offset": -1, "partition_max_bytes": partition_max_bytes, "replica_directory_id": None}
                for p, o in parts]}
                for t, parts in topics],
            "forgotten_topics_data": [{key: t, "partitions": parts} for t, parts in forgotten or []],
            "rack_id": "",
        }
        if version >= 15:
            data.update(replica_state={"replica_id": -1, "replica_epoch": -1}, cluster_id=None)
        else:
            data["replica_id"] = -1
        return self.call(FETCH, version, data)

    def fetch_all(self, topic: str, partition: int = 0, start: int = 0, timeout: float = 20.0) -> list[RecordBatch]:
        """Every batch from ``start`` to the high watermark (CRC-checked), at most one of each."""
        out: list[RecordBatch] = []
        offset = start
        deadline = time.monotonic() + timeout
        while True:
            p = self.fetch(topic, partition, offset)
            assert p["error"] == 0, f"Fetch {topic}-{partition} at {offset}: {error_name(p['error'])}"
            for b in decode_batches(p["records"], verify_crc=True):
                if b.last_offset >= offset:
                    out.append(b)
                    offset = b.next_offset
            if offset >= p["high_watermark"]:
                return out
            assert time.monotonic() < deadline, f"fetch of {topic}-{partition} stalled at {offset}"

    def records(self, topic: str, partition: int = 0, start: int = 0) -> list[Record]:
        return [r for b in self.fetch_all(topic, partition, start) for r in b.records if r.offset >= start]

    def list_offsets(self, topic: str, partition: int, timestamp: int, version: int = 7) -> dict[str, Any]:
        body = self.call(LIST_OFFSETS, version, {
            "replica_id": -1, "isolation_level": 0,
            "topics": [{"name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": -1, "timestamp": timestamp}]}],
        })
        (t,) = body["topics"]
        (p,) = t["partitions"]
        return {"error": p["error_code"], "offset": p["offset"], "timestamp": p["timestamp"]}

    def offsets(self, topic: str, partition: int = 0) -> tuple[int, int]:
        """(log start offset, high watermark) by ListOffsets."""
        first = self.list_offsets(topic, partition, EARLIEST)
        last = self.list_offsets(topic, partition, LATEST)
        assert first["error"] == last["error"] == 0, (first, last)
        return first["offset"], last["offset"]

    def delete_records(self, topic: str, partition: int, offset: int) -> dict[str, int]:
        body = self.call(DELETE_RECORDS, 2, {
            "topics": [{"name": topic, "partitions": [{"partition_index": partition, "offset": offset}]}],
            "timeout": 15_000,
        })
        (t,) = body["topics"]
        (p,) = t["partitions"]
        return {"error": p["error_code"], "low_watermark": p["low_watermark"]}

    def init_producer_id(self, timeout: float = 20.0) -> dict[str, int]:
        """InitProducerId v4 without a transactional id; retries Kafka's retriable answers (bounded):
        a fresh Kafka answers COORDINATOR_LOAD_IN_PROGRESS until its first block of ids arrives."""
        deadline = time.monotonic() + timeout
        while True:
            body = self.call(INIT_PRODUCER_ID, 4, {
                "transactional_id": None, "transaction_timeout": 60_000, "producer_id": -1, "producer_epoch": -1,
            })
            if body["error_code"] not in RETRIABLE_COORDINATOR or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        return {"error": body["error_code"], "producer_id": body["producer_id"], "producer_epoch": body["producer_epoch"]}

    # ------------------------------------------------------------------ configs and groups

    def describe_configs(self, resource_type: int, name: str, keys: list[str] | None = None, synonyms: bool = False) -> dict[str, Any]:
        body = self.call(DESCRIBE_CONFIGS, 4, {
            "resources": [{"resource_type": resource_type, "resource_name": name, "configuration_keys": keys}],
            "include_synonyms": synonyms, "include_documentation": False,
        })
        (r,) = body["results"]
        return r

    def incremental_alter_configs(self, resource_type: int, name: str, ops: list[tuple[str, int, str | None]],
                                  validate_only: bool = False) -> dict[str, Any]:
        """``ops``: (config name, operation 0 SET/1 DELETE/2 APPEND/3 SUBTRACT, value)."""
        body = self.call(INCREMENTAL_ALTER_CONFIGS, 1, {
            "resources": [{"resource_type": resource_type, "resource_name": name, "configs": [
                {"name": k, "config_operation": op, "value": v} for k, op, v in ops]}],
            "validate_only": validate_only,
        })
        (r,) = body["responses"]
        return {"error": r["error_code"], "message": r["error_message"]}

    def alter_configs(self, resource_type: int, name: str, configs: dict[str, str], validate_only: bool = False) -> dict[str, Any]:
        body = self.call(ALTER_CONFIGS, 2, {
            "resources": [{"resource_type": resource_type, "resource_name": name, "configs": [
                {"name": k, "value": v} for k, v in configs.items()]}],
            "validate_only": validate_only,
        })
        (r,) = body["responses"]
        return {"error": r["error_code"], "message": r["error_message"]}

    def describe_group(self, group: str) -> dict[str, Any]:
        body = self.call(DESCRIBE_GROUPS, 5, {"groups": [group], "include_authorized_operations": False})
        (g,) = body["groups"]
        return g

    def offset_fetch(self, group: str, topic: str, partitions: list[int]) -> dict[int, tuple[int, int]]:
        """OffsetFetch v7: partition -> (committed offset, error)."""
        body = self.call(OFFSET_FETCH, 7, {
            "group_id": group, "topics": [{"name": topic, "partition_indexes": partitions}], "require_stable": False,
        })
        assert body["error_code"] == 0, f"OffsetFetch {group}: {error_name(body['error_code'])}"
        return {p["partition_index"]: (p["committed_offset"], p["error_code"]) for t in body["topics"] for p in t["partitions"]}


# --------------------------------------------------------------------------- batches


def batch(values: list[bytes | None], *, keys: list[bytes | None] | None = None, timestamp: int | None = None,
          timestamps: list[int] | None = None, **kw: Any) -> bytes:
    """One RecordBatch v2 with the given values (and keys), offsets from 0, CRC correct."""
    ts = int(time.time() * 1000) if timestamp is None else timestamp
    keys = keys if keys is not None else [None] * len(values)
    stamps = timestamps if timestamps is not None else [ts] * len(values)
    return encode_batch([Record(i, stamps[i], keys[i], v) for i, v in enumerate(values)], **kw)


def corrupt_crc(raw: bytes) -> bytes:
    """The same batch with one bit of its last record byte flipped (the stored CRC no longer matches)."""
    out = bytearray(raw)
    out[-1] ^= 0x01
    return bytes(out)


def now_ms() -> int:
    return int(time.time() * 1000)
