"""Real clients (confluent-kafka = librdkafka, kafka-python) used by the scenarios, bounded."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition


def ck_produce(bootstrap: str, topic: str, messages: list[tuple[int | None, bytes | None, bytes | None]],
               config: dict[str, Any] | None = None, timeout: float = 30.0) -> list[tuple[int, int, str | None]]:
    """Produce (partition, key, value) with librdkafka; per message in send order:
    (partition, offset, error name or None)."""
    conf = {"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all", "message.timeout.ms": int(timeout * 1000)}
    conf.update(config or {})
    p = Producer(conf)
    results: list[Any] = [None] * len(messages)

    def delivered(i: int):
        def cb(err: KafkaError | None, msg: Any) -> None:
            results[i] = (msg.partition(), msg.offset(), err.name() if err else None)
        return cb

    for i, (partition, key, value) in enumerate(messages):
        kw = {} if partition is None else {"partition": partition}
        p.produce(topic, value=value, key=key, on_delivery=delivered(i), **kw)
        p.poll(0)
    left = p.flush(timeout)
    assert left == 0, f"{left} messages not delivered after {timeout}s"
    return results


def ck_consumer(bootstrap: str, **config: Any) -> Consumer:
    conf = {"bootstrap.servers": bootstrap, "group.id": "conformance-unused", "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "enable.partition.eof": False}
    conf.update({k.replace("_", "."): v for k, v in config.items()})
    return Consumer(conf)


def ck_read(bootstrap: str, topic: str, partitions: list[int], count: int, timeout: float = 30.0,
            start: int = OFFSET_BEGINNING) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """Assign the partitions at ``start`` and read ``count`` records (bounded); sorted by (partition, offset)."""
    c = ck_consumer(bootstrap)
    out: list[tuple[int, int, bytes | None, bytes | None]] = []
    try:
        c.assign([CkTopicPartition(topic, p, start) for p in partitions])
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            for m in c.consume(num_messages=max(1, count - len(out)), timeout=0.2):
                if m.error() is None:
                    out.append((m.partition(), m.offset(), m.key(), m.value()))
        # Anything beyond ``count`` would show now.
        for m in c.consume(num_messages=100, timeout=0.3):
            if m.error() is None:
                out.append((m.partition(), m.offset(), m.key(), m.value()))
    finally:
        c.close()
    return sorted(out)


def kp_offsets(bootstrap: str, topic: str, partitions: list[int]) -> dict[int, tuple[int, int]]:
    """kafka-python's view: partition -> (beginning offset, end offset)."""
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, request_timeout_ms=15_000)
    try:
        tps = [KpTopicPartition(topic, p) for p in partitions]
        first, last = c.beginning_offsets(tps), c.end_offsets(tps)
        return {tp.partition: (first[tp], last[tp]) for tp in tps}
    finally:
        c.close()


def kp_read(bootstrap: str, topic: str, partition: int, count: int, timeout: float = 20.0) -> list[tuple[int, bytes | None, bytes | None]]:
    """kafka-python consumer, no group, auto.offset.reset=earliest: (offset, key, value) of ``count`` records."""
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, auto_offset_reset="earliest",
                      request_timeout_ms=15_000)
    out: list[tuple[int, bytes | None, bytes | None]] = []
    try:
        c.assign([KpTopicPartition(topic, partition)])
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            for msgs in c.poll(timeout_ms=200).values():
                out += [(m.offset, m.key, m.value) for m in msgs]
        for msgs in c.poll(timeout_ms=200).values():
            out += [(m.offset, m.key, m.value) for m in msgs]
    finally:
        c.close()
    return out
