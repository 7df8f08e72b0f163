"""Kafka's flusher and checkpoints, seen from a client and on disk: ``flush.ms`` falls back to
``log.flush.scheduler.interval.ms`` (KafkaConfig.logFlushIntervalMs) and the flusher fsyncs on
that interval; ``replication-offset-checkpoint`` holds every partition's high watermark as a
one-node Kafka writes it (periodically and at shutdown); the log-start-offset checkpoint has
its own interval (``log.flush.start.offset.checkpoint.interval.ms``)."""

from __future__ import annotations

import time
from pathlib import Path

from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic
from kafka_sidecar.storage.checkpoint import read_offsets
from kafka_sidecar.testing import EmbeddedBroker


def _wait(cond, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return False


def _create(b: EmbeddedBroker, topic: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers)
    try:
        admin.create_topics([NewTopic(topic, 2, 1)])
    finally:
        admin.close()


def _produce(b: EmbeddedBroker, topic: str, n: int) -> None:
    producer = KafkaProducer(bootstrap_servers=b.bootstrap_servers, acks="all")
    for i in range(n):
        producer.send(topic, f"v{i}".encode(), partition=i % 2)
    producer.flush(30)
    producer.close()


def _describe_flush_ms(b: EmbeddedBroker, topic: str) -> tuple[str, str]:
    _create(b, topic)
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers)
    try:
        described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all")
        entry = described["topic"][topic]["flush.ms"]
        return entry["value"], entry["config_source"]
    finally:
        admin.close()


def test_flush_ms_falls_back_to_the_flusher_interval_and_the_flusher_fsyncs() -> None:
    with EmbeddedBroker({"log.flush.scheduler.interval.ms": 300}) as b:
        value, source = _describe_flush_ms(b, "flushed")
        # Kafka's ConfigHelper drops synonyms before the topic config's own broker name
        # (log.flush.interval.ms, unset here): the value is the fallback, the source DEFAULT_CONFIG.
        assert (value, source) == ("300", "DEFAULT_CONFIG")
        _produce(b, "flushed", 10)
        logs = [b._broker.log_manager.get_log("flushed", p) for p in (0, 1)]
        assert _wait(lambda: all(lg.recovery_point == lg.log_end_offset == 5 for lg in logs), 5.0)


def test_without_a_flush_interval_nothing_is_fsynced_by_time() -> None:
    with EmbeddedBroker() as b:
        value, source = _describe_flush_ms(b, "unflushed")
        assert (value, source) == (str(2**63 - 1), "DEFAULT_CONFIG")
        _produce(b, "unflushed", 10)
        time.sleep(1.5)  # a second flusher tick has run
        lg = b._broker.log_manager.get_log("unflushed", 0)
        assert lg.recovery_point == 0 < lg.log_end_offset


def test_high_watermark_checkpoint_periodically_and_at_shutdown() -> None:
    b = EmbeddedBroker({"replica.high.watermark.checkpoint.interval.ms": 200}).start()
    data_dir: Path = b.data_dir
    path = data_dir / "replication-offset-checkpoint"
    try:
        _create(b, "hw")
        _produce(b, "hw", 7)
        assert _wait(lambda: read_offsets(path).get(("hw", 0)) == 4 and read_offsets(path).get(("hw", 1)) == 3)
        assert path.read_text().splitlines()[:1] == ["0"]  # Kafka's checkpoint version line
        _produce(b, "hw", 2)
    finally:
        b.stop(keep_data=True)
    offsets = read_offsets(path)
    assert offsets[("hw", 0)] == 5 and offsets[("hw", 1)] == 4
    assert len(path.read_text().splitlines()) == 2 + len(offsets)


def test_log_start_offset_checkpoint_has_its_own_interval() -> None:
    with EmbeddedBroker({"log.flush.start.offset.checkpoint.interval.ms": 200,
                         "log.flush.offset.checkpoint.interval.ms": 600000}) as b:
        start = b.data_dir / "log-start-offset-checkpoint"
        recovery = b.data_dir / "recovery-point-offset-checkpoint"
        assert _wait(lambda: start.exists())
        start.unlink()
        recovery.unlink(missing_ok=True)
        assert _wait(lambda: start.exists(), 3.0)
        assert not recovery.exists()  # its interval (10 minutes) has not come round
