"""Real clients (confluent-kafka = librdkafka, kafka-python, Kafka's Java console consumer) used by the scenarios, bounded."""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
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


_FETCH_SESSION_LOG4J = """status = warn
appender.stderr.type = Console
appender.stderr.name = STDERR
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.stderr.ref = STDERR
logger.fsh.name = org.apache.kafka.clients.FetchSessionHandler
logger.fsh.level = DEBUG
"""
_CREATED = re.compile(r"sent a full fetch response that created a new incremental fetch session (-?\d+)")
_INCREMENTAL = re.compile(r"sent an incremental fetch response with throttleTimeMs = \d+ for session (-?\d+)")


def java_fetch_sessions(bootstrap: str, topic: str, work_dir: Path, count: int,
                        produce_one: Callable[[int], None], gap: float = 0.3) -> dict[str, Any]:
    """Kafka's own Java consumer (kafka-console-consumer.sh) subscribed to ``topic`` until it has
    read ``count`` records, with its FetchSessionHandler's DEBUG lines on. The records are made by
    ``produce_one(i)`` one at a time, ``gap`` seconds apart, once the consumer's first full fetch
    was answered, so they reach it in incremental answers. Returns what the consumer says about
    the broker's fetch sessions (the ids it got, the sessions of its incremental answers) and the
    records read."""
    from tests.support import kafka_bin

    work_dir.mkdir(parents=True, exist_ok=True)
    config = work_dir / "fetch-session-log4j2.properties"
    config.write_text(_FETCH_SESSION_LOG4J)
    env = {k: v for k, v in os.environ.items() if k not in ("KAFKA_OPTS", "JMX_PORT", "KAFKA_DEBUG")}
    env.update(KAFKA_LOG4J_OPTS=f"-Dlog4j2.configurationFile={config}", KAFKA_HEAP_OPTS="-Xmx256m", LOG_DIR=str(work_dir))
    proc = subprocess.Popen([str(kafka_bin("kafka-console-consumer.sh")), "--bootstrap-server", bootstrap, "--topic", topic,
                             "--from-beginning", "--max-messages", str(count), "--timeout-ms", "60000",
                             "--command-property", "fetch.max.wait.ms=200"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    lines: list[str] = []
    first_answer = threading.Event()

    def read_stderr() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if "sent a full fetch response" in line:
                first_answer.set()

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    try:
        first_answer.wait(90)
        for i in range(count):
            produce_one(i)
            time.sleep(gap)
        out, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    reader.join(10)
    text = "".join(lines)
    return {"returncode": proc.returncode, "records": [r for r in out.splitlines() if r], "created": [int(x) for x in _CREATED.findall(text)],
            "incremental": [int(x) for x in _INCREMENTAL.findall(text)], "stderr": text}
