"""The Kafka requests the Spark data sources need, on top of ``client.KafkaClient``.

Metadata (with optional auto-creation, as producers do), ListOffsets,
Fetch, Produce, InitProducerId and DeleteRecords, each sent to the partition
leader with the highest version both sides support (ApiVersions negotiation is
the client's). Works against kafka-sidecar and against any Kafka broker.
No pyspark here: executors and the driver both use it.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from kafka_sidecar.client import KafkaClient, KafkaClientError
from kio.schema.errors import ErrorCode

METADATA, FETCH, LIST_OFFSETS, PRODUCE, INIT_PRODUCER_ID, DELETE_RECORDS = 3, 1, 2, 0, 22, 21
EARLIEST, LATEST = -2, -1
OFFSET_OUT_OF_RANGE = 1
UNKNOWN_TOPIC_OR_PARTITION = 3
LEADER_NOT_AVAILABLE = 5
# Errors a client retries after refreshing metadata (Kafka's RetriableException subclasses we may meet).
RETRIABLE = {3, 5, 6, 7, 13, 14, 15, 16, 19, 20, 56, 74, 75, 89}

TopicPartition = tuple[str, int]


class KafkaError(Exception):
    """A Kafka error code answered for a topic-partition (or a request)."""

    def __init__(self, message: str, code: int = -1) -> None:
        super().__init__(message)
        self.code = code


def error_name(code: int) -> str:
    try:
        return f"{ErrorCode(code).name.upper()} ({code})"
    except ValueError:
        return f"error code {code}"


def _code(value: Any) -> int:
    return int(getattr(value, "value", value))


@dataclass
class TopicMeta:
    name: str
    error: int
    internal: bool
    leaders: dict[int, int]  # partition -> leader node id (-1 if none)


class Broker:
    """A connection to a cluster through one bootstrap address (blocking, not thread-safe)."""

    def __init__(self, bootstrap: str, client_id: str = "kafka-sidecar-spark", timeout: float = 30.0,
                 command_config: dict[str, str] | None = None) -> None:
        self.bootstrap_servers = bootstrap
        self.client_id = client_id
        self.timeout = timeout
        self.command_config = command_config
        self.client = KafkaClient(bootstrap, client_id=client_id, timeout=timeout, command_config=command_config)
        self.topics: dict[str, TopicMeta] = {}

    def close(self) -> None:
        try:
            self.client.close()
        except OSError:
            pass

    def reconnect(self) -> None:
        """Drop every connection and bootstrap again (after a connection was lost)."""
        self.close()
        self.client = KafkaClient(self.bootstrap_servers, client_id=self.client_id, timeout=self.timeout,
                                  command_config=self.command_config)
        self.metadata(sorted(self.topics))

    def __enter__(self) -> Broker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- metadata ------------------------------------------------------------------

    def metadata(self, topics: list[str] | None, *, auto_create: bool = False) -> dict[str, TopicMeta]:
        """Metadata for ``topics`` (None = all); remembers brokers and leaders."""
        _, body = self.client.bootstrap.request(METADATA, {
            "topics": None if topics is None else [{"name": t, "topic_id": None} for t in topics],
            "allow_auto_topic_creation": auto_create,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        }, max_version=12, min_version=1)
        # KafkaClient.node() connects by the node ids Metadata announced.
        self.client._nodes = {b.node_id: (b.host, b.port) for b in body.brokers}
        result: dict[str, TopicMeta] = {}
        for t in body.topics:
            meta = TopicMeta(
                name=t.name,
                error=_code(t.error_code),
                internal=bool(t.is_internal),
                leaders={p.partition_index: int(p.leader_id) for p in t.partitions},
            )
            result[t.name] = meta
            if meta.error == 0:
                self.topics[t.name] = meta
        return result

    def wait_for_topics(self, topics: list[str], *, auto_create: bool, timeout: float = 30.0) -> dict[str, TopicMeta]:
        """Metadata until every topic has leaders (retrying the first UNKNOWN_TOPIC_OR_PARTITION
        that auto-creation answers, like Kafka's producer); raises KafkaError otherwise."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                metas = self.metadata(topics, auto_create=auto_create)
            except (OSError, KafkaClientError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
                self.reconnect()  # e.g. a broker that dropped us during a concurrent auto-creation
                continue
            codes = {}
            for t in topics:
                meta = metas.get(t)
                if meta is None:
                    codes[t] = UNKNOWN_TOPIC_OR_PARTITION
                elif meta.error != 0:
                    codes[t] = meta.error
                elif not meta.leaders or any(leader < 0 for leader in meta.leaders.values()):
                    codes[t] = LEADER_NOT_AVAILABLE
            if not codes:
                return metas
            # Auto-creation answers UNKNOWN_TOPIC_OR_PARTITION first; a new topic may lack leaders.
            retry = {LEADER_NOT_AVAILABLE} | ({UNKNOWN_TOPIC_OR_PARTITION} if auto_create else set())
            if any(c not in retry for c in codes.values()) or time.monotonic() > deadline:
                t, code = next(iter(codes.items()))
                raise KafkaError(f"topic {t!r} is not available: {error_name(code)}", code)
            time.sleep(0.1)

    def leader(self, topic: str, partition: int) -> int:
        meta = self.topics.get(topic)
        if meta is None or partition not in meta.leaders:
            self.metadata([topic])
            meta = self.topics.get(topic)
        if meta is None or partition not in meta.leaders:
            raise KafkaError(f"{topic}-{partition} does not exist", UNKNOWN_TOPIC_OR_PARTITION)
        node = meta.leaders[partition]
        if node < 0:
            raise KafkaError(f"{topic}-{partition} has no leader", LEADER_NOT_AVAILABLE)
        return node

    def _by_leader(self, tps: list[TopicPartition]) -> dict[int, list[TopicPartition]]:
        groups: dict[int, list[TopicPartition]] = defaultdict(list)
        for tp in tps:
            groups[self.leader(*tp)].append(tp)
        return groups

    # ---- ListOffsets ---------------------------------------------------------------

    def list_offsets(self, targets: dict[TopicPartition, int], isolation_level: int = 0) -> dict[TopicPartition, tuple[int, int]]:
        """ListOffsets: timestamp (or -2 earliest / -1 latest) per partition ->
        (offset, timestamp); offset -1 when no record has a timestamp >= the target."""
        out: dict[TopicPartition, tuple[int, int]] = {}
        for node, tps in self._by_leader(list(targets)).items():
            topics: dict[str, list[dict[str, Any]]] = defaultdict(list)
            for t, p in tps:
                topics[t].append({"partition_index": p, "current_leader_epoch": -1, "timestamp": targets[(t, p)]})
            _, body = self.client.node(node).request(LIST_OFFSETS, {
                "replica_id": -1,
                "isolation_level": isolation_level,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
            }, max_version=7, min_version=1)
            for t in body.topics:
                for p in t.partitions:
                    code = _code(p.error_code)
                    if code != 0:
                        raise KafkaError(f"ListOffsets for {t.name}-{p.partition_index} failed: {error_name(code)}", code)
                    out[(t.name, p.partition_index)] = (p.offset, p.timestamp)
        missing = set(targets) - set(out)
        if missing:
            raise KafkaError(f"ListOffsets answered nothing for {sorted(missing)}")
        return out

    def earliest(self, tps: list[TopicPartition], isolation_level: int = 0) -> dict[TopicPartition, int]:
        return {tp: o for tp, (o, _) in self.list_offsets(dict.fromkeys(tps, EARLIEST), isolation_level).items()}

    def latest(self, tps: list[TopicPartition], isolation_level: int = 0) -> dict[TopicPartition, int]:
        return {tp: o for tp, (o, _) in self.list_offsets(dict.fromkeys(tps, LATEST), isolation_level).items()}

    # ---- Fetch ---------------------------------------------------------------------

    def fetch(self, topic: str, partition: int, offset: int, *, max_bytes: int, max_wait_ms: int = 0,
              isolation_level: int = 0) -> tuple[int, int, int, bytes, list[tuple[int, int]]]:
        """One Fetch of one partition: (error code, high watermark, log start offset, records,
        aborted transactions as (producer id, first offset); empty unless read_committed)."""
        node = self.leader(topic, partition)
        _, body = self.client.node(node).request(FETCH, {
            "replica_id": -1, "max_wait": max_wait_ms, "min_bytes": 1 if max_wait_ms else 0,
            "max_bytes": max_bytes, "isolation_level": isolation_level,
            "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [{
                "partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
                "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": max_bytes,
            }]}],
            "forgotten_topics_data": [], "rack_id": "",
        }, max_version=12, min_version=4)
        if _code(body.error_code) != 0:
            raise KafkaError(f"Fetch failed: {error_name(_code(body.error_code))}", _code(body.error_code))
        for t in body.responses:
            for p in t.partitions:
                if t.topic == topic and p.partition_index == partition:
                    aborted = [(a.producer_id, a.first_offset) for a in (getattr(p, "aborted_transactions", None) or [])]
                    return (_code(p.error_code), p.high_watermark, getattr(p, "log_start_offset", -1),
                            bytes(p.records or b""), aborted)
        raise KafkaError(f"Fetch answered nothing for {topic}-{partition}")

    # ---- Produce -------------------------------------------------------------------

    def init_producer_id(self) -> tuple[int, int]:
        """A fresh idempotent producer id and epoch (no transactional id)."""
        node = next(iter(self.client._nodes), None)
        conn = self.client.bootstrap if node is None else self.client.node(node)
        _, body = conn.request(INIT_PRODUCER_ID, {
            "transactional_id": None, "transaction_timeout": -1, "producer_id": -1, "producer_epoch": -1,
        }, max_version=4)
        code = _code(body.error_code)
        if code != 0:
            raise KafkaError(f"InitProducerId failed: {error_name(code)}", code)
        return body.producer_id, body.producer_epoch

    def produce(self, node: int, batches: dict[TopicPartition, bytes], *, acks: int, timeout_ms: int) -> dict[TopicPartition, tuple[int, int, str | None]]:
        """One Produce request (one batch per partition) -> per partition
        (error code, base offset, error message)."""
        topics: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for (t, p), records in batches.items():
            topics[t].append({"index": p, "records": records})
        _, body = self.client.node(node).request(PRODUCE, {
            "transactional_id": None, "acks": acks, "timeout": timeout_ms,
            "topic_data": [{"name": t, "partition_data": ps} for t, ps in topics.items()],
        }, max_version=9, min_version=3)
        out: dict[TopicPartition, tuple[int, int, str | None]] = {}
        for t in body.responses:
            for p in t.partition_responses:
                out[(t.name, p.index)] = (_code(p.error_code), p.base_offset, getattr(p, "error_message", None))
        return out

    # ---- DeleteRecords -------------------------------------------------------------

    def delete_records(self, offsets: dict[TopicPartition, int], timeout_ms: int = 30000) -> dict[TopicPartition, tuple[int, int]]:
        """DeleteRecords: per partition (error code, low watermark)."""
        out: dict[TopicPartition, tuple[int, int]] = {}
        for node, tps in self._by_leader(list(offsets)).items():
            topics: dict[str, list[dict[str, Any]]] = defaultdict(list)
            for t, p in tps:
                topics[t].append({"partition_index": p, "offset": offsets[(t, p)]})
            _, body = self.client.node(node).request(DELETE_RECORDS, {
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
                "timeout": timeout_ms,
            }, max_version=2)
            for t in body.topics:
                for p in t.partitions:
                    out[(t.name, p.partition_index)] = (_code(p.error_code), p.low_watermark)
        return out


__all__ = ["Broker", "KafkaError", "KafkaClientError", "TopicMeta", "error_name", "EARLIEST", "LATEST"]
