"""Small things found on the way: ``dump-log`` (with and without ``--verify``) and
``kafka_sidecar.storage.verify`` on paths that hold nothing fail instead of saying "all OK", and
broker values Kafka accepts at start are accepted (a negative ``log.retention.ms`` means
unlimited retention). The rules for every broker config: tests/unit/test_broker_config_accept.py."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from tests.support import GOLDEN, SidecarProcess, sidecar_command


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*sidecar_command(), *args], capture_output=True, text=True, timeout=60)


def test_dump_log_verify_fails_on_a_missing_path_or_an_empty_dir(tmp_path: Path) -> None:
    missing = cli("dump-log", "--verify", "--files", str(tmp_path / "no-such-topic-0"))
    assert missing.returncode == 1
    assert missing.stdout == f"FAILED {tmp_path / 'no-such-topic-0'}\n  cannot read: No such file or directory\nverified 1 files: 1 with problems\n"
    (tmp_path / "empty-0").mkdir()
    empty = cli("dump-log", "--verify", "--files", str(tmp_path / "empty-0"))
    assert empty.returncode == 1
    assert empty.stdout == f"FAILED {tmp_path / 'empty-0'}\n  no log, index or snapshot files in this directory\nverified 1 files: 1 with problems\n"
    # one good partition directory does not hide a missing one next to it
    good = GOLDEN / "kafka-4.0.0-logdir" / "golden-0"
    mixed = cli("dump-log", "--verify", "--files", f"{good},{tmp_path / 'golden-9'}")
    assert mixed.returncode == 1 and f"FAILED {tmp_path / 'golden-9'}\n" in mixed.stdout
    assert mixed.stdout.endswith(" with problems\n") and f"OK {good / '00000000000000000000.log'}\n" in mixed.stdout
    assert cli("dump-log", "--verify", "--files", str(good)).returncode == 0
    # nothing of ours in what was named
    (tmp_path / "partition.metadata").write_text("version: 0\n")
    other = cli("dump-log", "--verify", "--files", str(tmp_path / "partition.metadata"))
    assert other.returncode == 1 and other.stderr.endswith(f"kafka-sidecar: error: no log, index or snapshot files in {tmp_path / 'partition.metadata'}\n")
    nothing = cli("dump-log", "--verify", "--files", ",")
    assert nothing.returncode == 1 and nothing.stderr.endswith("kafka-sidecar: error: no files in --files ','\n")


def test_dump_log_without_verify_fails_on_a_missing_path_or_an_empty_dir(tmp_path: Path) -> None:
    """As kafka-dump-log.sh, which prints "Dumping <file>" and exits 1 (NoSuchFileException)."""
    missing = cli("dump-log", "--files", str(tmp_path / "missing.log"))
    assert missing.returncode == 1 and missing.stdout == f"Dumping {tmp_path / 'missing.log'}\n"
    assert missing.stderr.endswith(f"kafka-sidecar: error: {tmp_path / 'missing.log'}: no such file\n")
    (tmp_path / "empty-0").mkdir()
    empty = cli("dump-log", "--files", str(tmp_path / "empty-0"))
    assert empty.returncode == 1 and empty.stdout == f"Dumping {tmp_path / 'empty-0'}\n"
    assert empty.stderr.endswith(f"kafka-sidecar: error: no log, index or snapshot files in {tmp_path / 'empty-0'}\n")
    index = cli("dump-log", "--files", str(tmp_path / "00000000000000000000.index"), "--verify-index-only")
    assert index.returncode == 1 and "no such file" in index.stderr
    assert cli("dump-log", "--files", ",").returncode == 1


def test_storage_verify_fails_on_a_missing_path_or_an_empty_dir(tmp_path: Path) -> None:
    """``python -m kafka_sidecar.storage.verify`` said "verified 0 segments: 0 problems" for an
    empty directory and died with a traceback on a missing one."""
    def verify(*paths: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "kafka_sidecar.storage.verify", *map(str, paths)],
                              capture_output=True, text=True, timeout=120)

    missing = verify(tmp_path / "nope-0")
    assert missing.returncode == 1 and missing.stderr == ""
    assert missing.stdout == f"{tmp_path / 'nope-0'}: no such file or directory\nverified 0 segments: 1 problems\n"
    (tmp_path / "empty").mkdir()
    empty = verify(tmp_path / "empty")
    assert empty.returncode == 1
    assert empty.stdout.startswith(f"{tmp_path / 'empty'}: no segments (<base offset>.log) or partition directories\n")
    fresh = tmp_path / "fresh"  # a data dir of a broker with no topics yet is fine
    fresh.mkdir()
    (fresh / "meta.properties").write_text("version=1\n")
    assert verify(fresh).returncode == 0
    good = verify(GOLDEN / "kafka-4.0.0-logdir" / "golden-0")
    assert good.returncode == 0, good.stdout


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
