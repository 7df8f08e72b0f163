"""Helpers shared by the retention and DeleteRecords integration tests: real clients
(kafka-python, confluent-kafka) for the behaviour, raw kio requests where the exact
error codes and fields of an answer are the subject, and directory listings."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from kafka import KafkaConsumer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka_sidecar.client import KafkaClient

# Retention checks every 200 ms from start-up, .deleted files removed 200 ms later.
FAST_RETENTION = {
    "log.retention.check.interval.ms": "200",
    "log.initial.task.delay.ms": "0",
    "log.segment.delete.delay.ms": "200",
}
SEGMENT_EXTENSIONS = (".log", ".index", ".timeindex")
DELETE_RECORDS, FETCH, LIST_OFFSETS = 21, 1, 2
EARLIEST, LATEST = -2, -1


def create_topic(bootstrap: str, name: str, configs: dict[str, str] | None = None, partitions: int = 1) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic(name, partitions, 1, topic_configs=dict(configs or {}))])
    finally:
        admin.close()


def offsets(bootstrap: str, topic: str, partition: int = 0) -> tuple[int, int]:
    """(earliest, latest) by ListOffsets, through kafka-python."""
    tp = TopicPartition(topic, partition)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, request_timeout_ms=10_000)
    try:
        return consumer.beginning_offsets([tp])[tp], consumer.end_offsets([tp])[tp]
    finally:
        consumer.close()


def consume(bootstrap: str, topic: str, end: int, *, seek_to: int | None = None, partition: int = 0, timeout: float = 20.0) -> list[Any]:
    """Records from a kafka-python consumer with auto.offset.reset=earliest and no committed
    offset (or positioned at ``seek_to``), up to offset ``end`` - 1 (bounded by ``timeout``)."""
    tp = TopicPartition(topic, partition)
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
        auto_offset_reset="earliest", request_timeout_ms=10_000, max_partition_fetch_bytes=1 << 20,
    )
    out: list[Any] = []
    try:
        consumer.assign([tp])
        if seek_to is not None:
            consumer.seek(tp, seek_to)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and (not out or out[-1].offset < end - 1):
            for msgs in consumer.poll(timeout_ms=200).values():
                out += msgs
        # Anything past ``end`` would show up now.
        for msgs in consumer.poll(timeout_ms=100).values():
            out += msgs
    finally:
        consumer.close()
    return out


class Raw:
    """Raw requests (kio-encoded) to the broker, for exact error codes and fields."""

    def __init__(self, bootstrap: str) -> None:
        self.client = KafkaClient(bootstrap, client_id="retention-tests", timeout=15.0)
        self.client.metadata(None)

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> Raw:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def delete_records(self, topic: str, partition: int, offset: int, timeout_ms: int = 10_000) -> tuple[int, int]:
        """DeleteRecords v2 for one partition: (error code, low watermark)."""
        _, body = self.client.bootstrap.request(DELETE_RECORDS, {
            "topics": [{"name": topic, "partitions": [{"partition_index": partition, "offset": offset}]}],
            "timeout": timeout_ms,
        }, max_version=2, min_version=2)
        (t,) = body.topics
        (p,) = t.partitions
        assert (t.name, p.partition_index) == (topic, partition)
        return p.error_code.value, p.low_watermark

    def list_offset(self, topic: str, partition: int, timestamp: int) -> tuple[int, int]:
        """ListOffsets v7 for one partition: (error code, offset)."""
        _, body = self.client.bootstrap.request(LIST_OFFSETS, {
            "replica_id": -1, "isolation_level": 0,
            "topics": [{"name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": -1, "timestamp": timestamp}]}],
        }, max_version=7, min_version=7)
        (t,) = body.topics
        (p,) = t.partitions
        return p.error_code.value, p.offset

    def fetch(self, topic: str, partition: int, offset: int) -> Any:
        """Fetch v12 by topic name, one partition: the partition's answer."""
        _, body = self.client.bootstrap.request(FETCH, {
            "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [{
                "partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
                "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1 << 20,
            }]}],
            "forgotten_topics_data": [], "rack_id": "",
        }, max_version=12, min_version=12)
        (t,) = body.responses
        (p,) = t.partitions
        return p


def segment_files(partition_dir: Path) -> set[str]:
    """Segment files (``.deleted`` ones included) in a partition directory."""
    try:
        names = os.listdir(partition_dir)
    except FileNotFoundError:
        return set()
    return {f for f in names if f.removesuffix(".deleted").endswith(SEGMENT_EXTENSIONS)}


def live_bases(partition_dir: Path) -> list[int]:
    """Base offsets of the segments in use (``.log`` files not renamed ``.deleted``)."""
    return sorted(int(f[:-4]) for f in segment_files(partition_dir) if f.endswith(".log"))


def files_of(*bases: int, suffix: str = "") -> set[str]:
    return {f"{b:020d}{ext}{suffix}" for b in bases for ext in SEGMENT_EXTENSIONS}


def read_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """Kafka's offset checkpoint file: ``0``, count, then ``topic partition offset`` lines."""
    lines = path.read_text().split("\n")
    assert lines[0] == "0", lines
    count = int(lines[1])
    entries = {}
    for line in lines[2 : 2 + count]:
        topic, partition, offset = line.split(" ")
        entries[(topic, int(partition))] = int(offset)
    assert lines[2 + count :] == [""], lines
    return entries
