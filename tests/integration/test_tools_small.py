"""Small things found on the way: ``dump-log --verify`` on paths that hold nothing, and broker
values Kafka accepts at start (a negative ``log.retention.ms`` means unlimited retention)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from tests.support import SidecarProcess, sidecar_command


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*sidecar_command(), *args], capture_output=True, text=True, timeout=60)


def test_dump_log_verify_fails_on_a_missing_path_or_an_empty_dir(tmp_path: Path) -> None:
    missing = cli("dump-log", "--verify", "--files", str(tmp_path / "no-such-topic-0"))
    assert missing.returncode == 1
    assert missing.stdout == f"FAILED {tmp_path / 'no-such-topic-0'}\n  cannot read: No such file or directory\nverified 1 files: 1 with problems\n"
    (tmp_path / "empty-0").mkdir()
    empty = cli("dump-log", "--verify", "--files", str(tmp_path / "empty-0"))
    assert empty.returncode == 1 and empty.stderr.endswith(f"kafka-sidecar: error: no log, index or snapshot files in {tmp_path / 'empty-0'}\n")
    not_a_segment = cli("dump-log", "--files", str(tmp_path / "missing.log"))
    assert not_a_segment.returncode == 1 and "no such file" in not_a_segment.stderr


def test_negative_log_retention_ms_is_unlimited_as_in_kafka(tmp_path: Path) -> None:
    """Kafka starts with log.retention.ms=-5 (no lower bound at broker level) and keeps records
    forever; topics without their own retention.ms report -1."""
    shown = cli("config", "--show", "--override", "log.retention.ms=-5", "--only-set")
    assert shown.returncode == 0 and ["log.retention.ms", "-5", "--override"] in [line.split() for line in shown.stdout.splitlines()]
    server = SidecarProcess(tmp_path / "data", {"log.retention.ms": "-5", "log.retention.check.interval.ms": "200",
                                                "log.initial.task.delay.ms": "0"}).start()
    try:
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        admin.create_topics([NewTopic("forever", 1, 1)])["forever"].result(30)
        (described,) = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "forever")]).values()
        assert described.result(30)["retention.ms"].value == "-1"
        p = Producer({"bootstrap.servers": server.bootstrap})
        p.produce("forever", b"old", timestamp=1_000_000_000_000)  # 2001: far past any finite retention
        assert p.flush(30) == 0
        time.sleep(1.5)  # several retention checks
        low, high = _watermarks(server.bootstrap, "forever")
        assert (low, high) == (0, 1)
    finally:
        server.stop()


def _watermarks(bootstrap: str, topic: str) -> tuple[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "wm"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        c.close()
