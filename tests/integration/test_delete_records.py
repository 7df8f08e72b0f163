"""DeleteRecords (API 21) against kafka-sidecar, with real clients and Kafka's own tool.

Kafka 4.0.0's behaviour is the reference (``tests/data/kafka-4.0.0/delete-records``): the recorded
sequence is replayed on a topic built the same way, and the tools' outputs must equal the
recorded ones byte for byte. The seed 001 scenario (43,211 records in segments of 10,000,
``kafka-delete-records.sh`` to offset 40,000) runs with Kafka's tool and with
``kafka-sidecar delete-records``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import OffsetOutOfRangeError, PolicyViolationError, UnknownTopicOrPartitionError
from kafka_sidecar.protocol.records import Record, encode_batch

from tests.integration.retention_helpers import (
    EARLIEST,
    FAST_RETENTION,
    LATEST,
    Raw,
    consume,
    create_topic,
    files_of,
    live_bases,
    offsets,
    read_checkpoint,
    segment_files,
)
from tests.support import GOLDEN, kafka_bin, sidecar_command, wait_until

GOLDEN_DR = GOLDEN / "delete-records"
KAFKA_DELETE_RECORDS = kafka_bin("kafka-delete-records.sh")
OFFSET_OUT_OF_RANGE, UNKNOWN_TOPIC_OR_PARTITION, POLICY_VIOLATION = 1, 3, 44
# The golden topic `golden-del`: segment.bytes=16384, 40 batches of 5 records of 1000 bytes.
GOLDEN_SEGMENTS = [0, 15, 30, 45, 60, 75, 90, 105, 120, 135, 150, 165, 180, 195]
# Retention checks start late enough for a test to see the files DeleteRecords leaves.
LATE_RETENTION = {**FAST_RETENTION, "log.initial.task.delay.ms": "5000"}


def golden_value(i: int) -> bytes:
    return (b"%08d" % i) * 125


def make_golden_del(bootstrap: str, topic: str) -> None:
    """The golden `golden-del` topic: 200 records in 40 batches of 5 (one flush each)."""
    create_topic(bootstrap, topic, {"segment.bytes": "16384", "retention.ms": "-1"})
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=60_000, batch_size=1 << 20, acks="all")
    try:
        for b in range(40):
            for i in range(b * 5, b * 5 + 5):
                producer.send(topic, key=b"del-%d" % i, value=golden_value(i), timestamp_ms=1_700_000_000_000 + i, partition=0)
            producer.flush(timeout=10)
    finally:
        producer.close()


def make_golden_compact(bootstrap: str, topic: str) -> None:
    """The golden `golden-del-compact` topic: cleanup.policy=compact, 10 keyed records."""
    create_topic(bootstrap, topic, {"cleanup.policy": "compact"})
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        for i in range(10):
            producer.send(topic, key=b"c-%d" % (i % 3), value=b"v%d" % i, partition=0)
        producer.flush(timeout=10)
    finally:
        producer.close()


def kafka_tool_env(tmp_path: Path) -> dict[str, str]:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("java is not installed (Kafka's kafka-delete-records.sh needs Java 17)")
    if not KAFKA_DELETE_RECORDS.exists():
        pytest.skip(f"the Apache Kafka distribution is missing ({KAFKA_DELETE_RECORDS} not found)")
    # Tool logs go to the test's directory; a quicker JIT for a short-lived JVM.
    return {**os.environ, "LOG_DIR": str(tmp_path / "kafka-logs"), "KAFKA_JVM_PERFORMANCE_OPTS": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}


def run_tool(tool: str, bootstrap: str, offset_json: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    if tool == "kafka":
        cmd, env = [str(KAFKA_DELETE_RECORDS)], kafka_tool_env(tmp_path)
    else:
        cmd, env = [*sidecar_command(), "delete-records"], dict(os.environ)
    return subprocess.run(
        [*cmd, "--bootstrap-server", bootstrap, "--offset-json-file", str(offset_json)],
        capture_output=True, text=True, env=env, timeout=60,
    )


TOOLS = [pytest.param("kafka", id="kafka-delete-records.sh"), pytest.param("sidecar", id="kafka-sidecar-delete-records")]


# ----------------------------------------------------------- Kafka's recorded sequence


def test_golden_sequence(sidecar_factory, topic_name):
    """Replay tests/data/kafka-4.0.0/delete-records/steps.json (raw DeleteRecords v2, ListOffsets,
    Fetch v12) on topics built like Kafka's, then let retention run and restart."""
    started = time.monotonic()
    server = sidecar_factory(LATE_RETENTION)
    topic, compact = topic_name, f"{topic_name}-compact"
    names = {"golden-del": topic, "golden-del-compact": compact, "golden-no-such-topic": f"{topic_name}-none"}
    make_golden_del(server.bootstrap, topic)
    make_golden_compact(server.bootstrap, compact)
    pdir = server.data_dir / f"{topic}-0"
    steps = json.loads((GOLDEN_DR / "steps.json").read_text())
    checked = 0
    with Raw(server.bootstrap) as raw:
        for step in steps:
            label = step["step"]
            if label == "segments after produce (base offsets)":
                assert live_bases(pdir) == step["segs"] == GOLDEN_SEGMENTS
            elif label == "ListOffsets before" or label.startswith("final ListOffsets"):
                name = topic if label in ("ListOffsets before", "final ListOffsets golden-del") else compact
                assert raw.list_offset(name, 0, EARLIEST) == tuple(step["r"]["earliest"]), label
                assert raw.list_offset(name, 0, LATEST) == tuple(step["r"]["latest"]), label
            elif label.startswith("DeleteRecords v2"):
                name = names[step["topic"]]
                assert raw.delete_records(name, 0, step["offset"]) == (step["error_code"], step["low_watermark"]), label
                after = step["after_list_offsets"]
                assert raw.list_offset(name, 0, EARLIEST) == tuple(after["earliest"]), label
                assert raw.list_offset(name, 0, LATEST) == tuple(after["latest"]), label
                if step["files"] is not None:
                    # DeleteRecords moves the start only: every segment file is still there.
                    kafka_files = {f for f in step["files"] if f.endswith((".log", ".index", ".timeindex"))}
                    assert segment_files(server.data_dir / f"{name}-0") == kafka_files, label
            elif label.startswith("kafka-delete-records.sh"):
                case = label.removeprefix("kafka-delete-records.sh ")
                entry = json.loads((GOLDEN_DR / f"tool-{case}.offsets.json").read_text())["partitions"][0]
                code, low = raw.delete_records(names[entry["topic"]], 0, entry["offset"])
                last = step["stdout"].splitlines()[-1]
                if "low_watermark" in last:
                    assert (code, low) == (0, int(last.rsplit(" ", 1)[1])), label
                    assert raw.list_offset(topic, 0, EARLIEST) == tuple(step["after"]["earliest"])
                    assert raw.list_offset(topic, 0, LATEST) == tuple(step["after"]["latest"])
                elif "OffsetOutOfRangeException" in last:
                    assert (code, low) == (OFFSET_OUT_OF_RANGE, -1), label
                else:
                    assert "PolicyViolationException" in last
                    assert (code, low) == (POLICY_VIOLATION, -1), label
            elif label == "Fetch v12 below log start offset":
                p = raw.fetch(topic, 0, 3)
                got = {"error_code": p.error_code.value, "high_watermark": p.high_watermark, "log_start_offset": p.log_start_offset}
                assert got == {k: step[k] for k in got}, label
                assert p.last_stable_offset == -1
            else:
                assert label == "create_topics", label
                continue
            checked += 1
        assert checked == len(steps) - 1
        # Kafka's state at this point: start 200, all 14 segments still on disk.
        assert time.monotonic() - started < 5.0, "the first retention check came before the test could look"
        assert live_bases(pdir) == GOLDEN_SEGMENTS
        assert read_checkpoint(server.data_dir / "log-start-offset-checkpoint") == {(topic, 0): 200}

        # The next retention check deletes every segment wholly below 200: all but the last.
        wait_until(lambda: segment_files(pdir) == files_of(195), timeout=15, message="segments below 200 deleted")
        assert raw.list_offset(topic, 0, EARLIEST) == (0, 200)
        assert raw.list_offset(topic, 0, LATEST) == (0, 200)
        assert raw.fetch(topic, 0, 200).error_code.value == 0
        assert raw.fetch(topic, 0, 199).error_code.value == OFFSET_OUT_OF_RANGE
        assert raw.list_offset(compact, 0, EARLIEST) == (0, 0)
        assert raw.list_offset(compact, 0, LATEST) == (0, 10)
    assert read_checkpoint(server.data_dir / "log-start-offset-checkpoint") == {(topic, 0): 200}

    for how in ("restart", "kill -9"):
        if how == "restart":
            server.stop()
        else:
            server.kill()
        server.start()
        with Raw(server.bootstrap) as raw:
            assert raw.list_offset(topic, 0, EARLIEST) == (0, 200), how
            assert raw.list_offset(topic, 0, LATEST) == (0, 200), how
            assert raw.fetch(topic, 0, 195).error_code.value == OFFSET_OUT_OF_RANGE, how
            assert raw.list_offset(compact, 0, EARLIEST) == (0, 0), how
        assert segment_files(pdir) == files_of(195), how
        assert consume(server.bootstrap, topic, 200, timeout=1.0) == []


# --------------------------------------------------------------------- admin clients


def test_kafka_python_admin_delete_records(sidecar, topic_name):
    topic, compact = topic_name, f"{topic_name}-compact"
    make_golden_del(sidecar.bootstrap, topic)
    make_golden_compact(sidecar.bootstrap, compact)
    tp = TopicPartition(topic, 0)
    admin = KafkaAdminClient(bootstrap_servers=sidecar.bootstrap, request_timeout_ms=10_000)
    try:
        result = admin.delete_records({tp: 32}, timeout_ms=10_000)
        assert result[tp]["low_watermark"] == 32
        assert result[tp]["error_code"] == 0
        assert offsets(sidecar.bootstrap, topic) == (32, 200)
        assert read_checkpoint(sidecar.data_dir / "log-start-offset-checkpoint")[(topic, 0)] == 32

        # A consumer with auto.offset.reset=earliest and no position starts at the new start...
        got = consume(sidecar.bootstrap, topic, 200)
        assert [m.offset for m in got] == list(range(32, 200))
        assert [m.value for m in got] == [golden_value(i) for i in range(32, 200)]
        # ...and one positioned below it gets OFFSET_OUT_OF_RANGE and resets there.
        got = consume(sidecar.bootstrap, topic, 200, seek_to=5)
        assert [m.offset for m in got] == list(range(32, 200))

        # Lower than the start: nothing moves, the answer is the current start.
        assert admin.delete_records({tp: 10}, timeout_ms=10_000)[tp]["low_watermark"] == 32
        with pytest.raises(OffsetOutOfRangeError):
            admin.delete_records({tp: 201}, timeout_ms=10_000)
        assert offsets(sidecar.bootstrap, topic) == (32, 200)
        with pytest.raises(PolicyViolationError):
            admin.delete_records({TopicPartition(compact, 0): 5}, timeout_ms=10_000)
        assert offsets(sidecar.bootstrap, compact) == (0, 10)
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.delete_records({TopicPartition(f"{topic}-none", 0): 0}, timeout_ms=10_000, partition_leader_id=1)
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.delete_records({TopicPartition(topic, 7): 0}, timeout_ms=10_000, partition_leader_id=1)

        # -1 means the high watermark; then the partition reads as empty.
        assert admin.delete_records({tp: -1}, timeout_ms=10_000)[tp]["low_watermark"] == 200
        assert offsets(sidecar.bootstrap, topic) == (200, 200)
        assert read_checkpoint(sidecar.data_dir / "log-start-offset-checkpoint")[(topic, 0)] == 200
        assert consume(sidecar.bootstrap, topic, 200, timeout=1.0) == []
        # Equal to the high watermark is allowed (not out of range).
        assert admin.delete_records({tp: 200}, timeout_ms=10_000)[tp]["low_watermark"] == 200
    finally:
        admin.close()
    # Produce still works after the start reached the end.
    producer = KafkaProducer(bootstrap_servers=sidecar.bootstrap, acks="all")
    md = producer.send(topic, key=b"k", value=b"after", partition=0).get(timeout=10)
    producer.close()
    assert md.offset == 200
    got = consume(sidecar.bootstrap, topic, 201)
    assert [(m.offset, m.value) for m in got] == [(200, b"after")]


def test_confluent_admin_delete_records(sidecar, topic_name):
    topic, compact = topic_name, f"{topic_name}-compact"
    make_golden_del(sidecar.bootstrap, topic)
    make_golden_compact(sidecar.bootstrap, compact)
    admin = AdminClient({"bootstrap.servers": sidecar.bootstrap})

    def delete(t: str, partition: int, offset: int):
        futures = admin.delete_records([CkTopicPartition(t, partition, offset)], request_timeout=15, operation_timeout=10)
        (future,) = futures.values()
        return future.result(timeout=20)

    def error_of(t: str, partition: int, offset: int) -> int:
        with pytest.raises(KafkaException) as e:
            delete(t, partition, offset)
        return e.value.args[0].code()

    assert delete(topic, 0, 75).low_watermark == 75
    assert offsets(sidecar.bootstrap, topic) == (75, 200)
    assert error_of(topic, 0, 100_000) == KafkaError.OFFSET_OUT_OF_RANGE
    assert error_of(compact, 0, 5) == KafkaError.POLICY_VIOLATION
    assert offsets(sidecar.bootstrap, topic) == (75, 200)
    assert offsets(sidecar.bootstrap, compact) == (0, 10)

    # librdkafka consumer positioned below the start, auto.offset.reset=earliest: starts at 75.
    from confluent_kafka import Consumer

    consumer = Consumer({
        "bootstrap.servers": sidecar.bootstrap, "group.id": "retention-tests-unused",
        "enable.auto.commit": False, "enable.auto.offset.store": False, "auto.offset.reset": "earliest",
    })
    got: list[int] = []
    try:
        consumer.assign([CkTopicPartition(topic, 0, 3)])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and (not got or got[-1] < 199):
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append(msg.offset())
    finally:
        consumer.close()
    assert got == list(range(75, 200))

    assert delete(topic, 0, -1).low_watermark == 200  # OFFSET_END: the high watermark
    assert offsets(sidecar.bootstrap, topic) == (200, 200)
    assert read_checkpoint(sidecar.data_dir / "log-start-offset-checkpoint")[(topic, 0)] == 200


def test_raw_errors(sidecar, topic_name):
    topic, compact = topic_name, f"{topic_name}-compact"
    create_topic(sidecar.bootstrap, topic, {"retention.ms": "-1"})
    make_golden_compact(sidecar.bootstrap, compact)
    create_topic(sidecar.bootstrap, f"{topic}-both", {"cleanup.policy": "compact,delete"})
    producer = KafkaProducer(bootstrap_servers=sidecar.bootstrap, acks="all")
    for i in range(10):
        producer.send(topic, key=b"k%d" % i, value=b"v%d" % i, partition=0)
        producer.send(f"{topic}-both", key=b"k%d" % i, value=b"v%d" % i, partition=0)
    producer.flush(timeout=10)
    producer.close()
    with Raw(sidecar.bootstrap) as raw:
        assert raw.delete_records(topic, 0, 11) == (OFFSET_OUT_OF_RANGE, -1)
        assert raw.delete_records(topic, 0, -2) == (OFFSET_OUT_OF_RANGE, -1)  # negative, not -1
        assert raw.delete_records(compact, 0, 5) == (POLICY_VIOLATION, -1)
        assert raw.delete_records(compact, 0, -1) == (POLICY_VIOLATION, -1)
        assert raw.delete_records(f"{topic}-none", 0, 0) == (UNKNOWN_TOPIC_OR_PARTITION, -1)
        assert raw.delete_records(topic, 3, 0) == (UNKNOWN_TOPIC_OR_PARTITION, -1)
        # compact,delete includes delete: allowed.
        assert raw.delete_records(f"{topic}-both", 0, 4) == (0, 4)
        assert raw.delete_records(topic, 0, 10) == (0, 10)
        assert raw.delete_records(topic, 0, -1) == (0, 10)
        assert raw.list_offset(topic, 0, EARLIEST) == (0, 10)
        p = raw.fetch(topic, 0, 9)
        assert (p.error_code.value, p.high_watermark, p.last_stable_offset, p.log_start_offset) == (OFFSET_OUT_OF_RANGE, -1, -1, -1)
        p = raw.fetch(topic, 0, 10)
        assert (p.error_code.value, p.high_watermark, p.log_start_offset) == (0, 10, 10)


# ------------------------------------------------------------ durability and retention


def test_start_offset_survives_kill_and_restart_then_retention_deletes_below(sidecar_factory, topic_name):
    started = time.monotonic()
    server = sidecar_factory(LATE_RETENTION)
    topic = topic_name
    make_golden_del(server.bootstrap, topic)
    pdir = server.data_dir / f"{topic}-0"
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=10_000)
    tp = TopicPartition(topic, 0)
    assert admin.delete_records({tp: 32}, timeout_ms=10_000)[tp]["low_watermark"] == 32
    admin.close()
    # The start is checkpointed before the answer: a crash right now keeps it.
    assert read_checkpoint(server.data_dir / "log-start-offset-checkpoint") == {(topic, 0): 32}
    assert time.monotonic() - started < 5.0, "the first retention check came before the test could look"
    server.kill()
    assert live_bases(pdir) == GOLDEN_SEGMENTS
    restarted = time.monotonic()
    server.start()
    assert offsets(server.bootstrap, topic) == (32, 200)
    with Raw(server.bootstrap) as raw:
        assert raw.fetch(topic, 0, 31).error_code.value == OFFSET_OUT_OF_RANGE
        assert raw.fetch(topic, 0, 32).error_code.value == 0
    got = consume(server.bootstrap, topic, 200)
    assert [m.offset for m in got] == list(range(32, 200))
    # Files stay until the first retention check after start-up...
    assert time.monotonic() - restarted < 5.0, "the first retention check came before the test could look"
    assert live_bases(pdir) == GOLDEN_SEGMENTS
    # ...which deletes the segments wholly below 32 (0 and 15; 30 holds 30..44).
    wait_until(lambda: segment_files(pdir) == files_of(*GOLDEN_SEGMENTS[2:]), timeout=15, message="segments 0 and 15 deleted")
    assert offsets(server.bootstrap, topic) == (32, 200)
    assert read_checkpoint(server.data_dir / "log-start-offset-checkpoint") == {(topic, 0): 32}

    for how in ("restart", "kill -9"):
        if how == "restart":
            server.stop()
        else:
            server.kill()
        server.start()
        assert offsets(server.bootstrap, topic) == (32, 200), how
        assert live_bases(pdir) == GOLDEN_SEGMENTS[2:], how
        got = consume(server.bootstrap, topic, 200)
        assert [m.offset for m in got] == list(range(32, 200)), how
        assert [m.value for m in got] == [golden_value(i) for i in range(32, 200)], how


# -------------------------------------------------------------- the seed 001 scenario

SEED_RECORDS = 43_211
SEED_BATCH = 1000


def seed_value(i: int) -> bytes:
    return b"%010d" % i


@pytest.mark.parametrize("tool", TOOLS)
def test_seed_001_scenario(sidecar_factory, tmp_path, tool):
    """Seed 001: topic `test`, one partition, segments 0~9999, 10000~19999, 20000~29999,
    30000~39999 and 40000~43210 (active); kafka-delete-records.sh with offset 40000."""
    if tool == "kafka":
        kafka_tool_env(tmp_path)  # skips without Java or the distribution
    server = sidecar_factory(FAST_RETENTION)
    ts = int(time.time() * 1000)
    # Every batch holds 1000 records with the same timestamp: equal sizes, so a segment
    # holds exactly ten batches (librdkafka encodes records as encode_batch does).
    batch_size = len(encode_batch([Record(i, ts, None, seed_value(i)) for i in range(SEED_BATCH)]))
    create_topic(server.bootstrap, "test", {"segment.bytes": str(10 * batch_size + batch_size // 2)})
    producer = Producer({
        "bootstrap.servers": server.bootstrap, "linger.ms": 60_000, "batch.num.messages": SEED_BATCH,
        "batch.size": 10_000_000, "enable.idempotence": False, "acks": "all",
    })
    errors: list[object] = []

    def delivered(err, _msg) -> None:
        if err is not None:
            errors.append(err)

    for i in range(SEED_RECORDS):
        producer.produce("test", value=seed_value(i), partition=0, timestamp=ts, on_delivery=delivered)
        if i % SEED_BATCH == SEED_BATCH - 1:
            assert producer.flush(10) == 0
    assert producer.flush(10) == 0
    assert errors == []
    pdir = server.data_dir / "test-0"
    assert live_bases(pdir) == [0, 10_000, 20_000, 30_000, 40_000]
    assert offsets(server.bootstrap, "test") == (0, SEED_RECORDS)

    a_json = tmp_path / "a.json"
    a_json.write_text('{"partitions":[{"topic": "test", "partition": 0,"offset": 40000}],"version":1}')
    result = run_tool(tool, server.bootstrap, a_json, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Executing records delete operation\nRecords delete operation completed:\npartition: test-0\tlow_watermark: 40000\n"

    # The next retention check deletes A1..A4; the active segment A5 stays.
    wait_until(lambda: segment_files(pdir) == files_of(40_000), timeout=15, message="segments below 40000 deleted")
    assert offsets(server.bootstrap, "test") == (40_000, SEED_RECORDS)
    got = consume(server.bootstrap, "test", SEED_RECORDS)
    assert [m.offset for m in got] == list(range(40_000, SEED_RECORDS))
    assert [m.value for m in got] == [seed_value(i) for i in range(40_000, SEED_RECORDS)]

    # The same request again answers the same low watermark.
    again = run_tool("sidecar", server.bootstrap, a_json, tmp_path)
    assert again.stdout == result.stdout

    server.stop()
    # The start equals the first segment's base now: Kafka leaves it out of the checkpoint.
    assert read_checkpoint(server.data_dir / "log-start-offset-checkpoint") == {}
    server.start()
    assert segment_files(pdir) == files_of(40_000)
    assert offsets(server.bootstrap, "test") == (40_000, SEED_RECORDS)
    got = consume(server.bootstrap, "test", SEED_RECORDS)
    assert [m.offset for m in got] == list(range(40_000, SEED_RECORDS))


# ----------------------------------------------------------------- tool error outputs


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("case", ["beyond-hw", "compacted-topic"])
def test_tool_error_output_matches_kafka(sidecar, tmp_path, topic_name, tool, case):
    if tool == "kafka":
        kafka_tool_env(tmp_path)  # skips without Java or the distribution
    golden_json = json.loads((GOLDEN_DR / f"tool-error-{case}.offsets.json").read_text())
    (entry,) = golden_json["partitions"]
    if case == "beyond-hw":
        topic = topic_name
        make_golden_del(sidecar.bootstrap, topic)
    else:
        topic = f"{topic_name}-compact"
        make_golden_compact(sidecar.bootstrap, topic)
    offsets_file = tmp_path / "offsets.json"
    offsets_file.write_text(json.dumps({"partitions": [{**entry, "topic": topic}], "version": golden_json["version"]}))
    golden_out = (GOLDEN_DR / f"tool-error-{case}.stdout.txt").read_text()
    expected = golden_out.replace(f"partition: {entry['topic']}-0\t", f"partition: {topic}-0\t")
    assert expected != golden_out
    before = offsets(sidecar.bootstrap, topic)
    result = run_tool(tool, sidecar.bootstrap, offsets_file, tmp_path)
    # Kafka's tool exits 0 on partition errors; ours exits 1 so a script notices.
    assert result.returncode == (0 if tool == "kafka" else 1), result.stderr
    assert result.stdout == expected
    assert offsets(sidecar.bootstrap, topic) == before
