"""Log compaction over TCP, against what Apache Kafka 4.0.0 did (``golden/compaction``).

The golden scenario is replayed with the same clients and the same produce sequence
(kafka-python, 20000 records over 200 keys, 10 tombstones, a revived key, triggers
with far-future timestamps to roll the active segment, since ``segment.ms`` compares
record timestamps): after the first pass the log holds exactly Kafka's survivors at
Kafka's offsets, tombstones still there in a batch carrying a delete horizon
(attribute 0x40, horizon in baseTimestamp = clean time + delete.retention.ms); after
the horizon and another trigger the tombstones are gone. Kafka's own
``kafka-dump-log.sh`` reads our cleaned segments and indexes. Plus: keyless records
on a compacted topic are refused whole (INVALID_RECORD), and restarts keep the
compacted contents.

The cleaner runs every 200 ms (``log.cleaner.backoff.ms``), replaced segments are
removed 200 ms later (``log.segment.delete.delay.ms``).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import InvalidRecordError, KafkaError
from kafka_sidecar.protocol.records import Record, RecordBatch, decode_batches, encode_batch
from kafka_sidecar.storage import checkpoint

from tests.integration.test_bad_input import (
    RawClient,
    create_topic,
    fetch_once,
    list_offset,
    partition_results,
    produce_request,
)
from tests.support import GOLDEN, kafka_bin, wait_until

OVERRIDES = {"log.cleaner.backoff.ms": "200", "log.segment.delete.delay.ms": "200"}
GOLDEN_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.ms": "100",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "1000",
    "min.compaction.lag.ms": "0",
    "segment.bytes": "1048576",
}
TS0 = 1_700_000_000_000
N = 20_000
KEYS = 200
TOMBSTONE_KEYS = [f"ck-{i:03d}" for i in range(0, KEYS, 20)]  # ck-000, ck-020, ..., ck-180
DELETE_RETENTION_MS = 1000
INVALID_RECORD = 87
HORIZON_MASK = 0x40
DUMP_LOG = kafka_bin("kafka-dump-log.sh")
_needs_dump_log = pytest.mark.skipif(
    shutil.which("java") is None or not DUMP_LOG.exists(), reason="needs java and the reference kafka-dump-log.sh"
)

Rec = tuple[int, int, str, str | None]  # offset, timestamp, key, value


def golden(name: str) -> list[Rec]:
    out = []
    for line in (GOLDEN / "compaction" / name).read_text().splitlines():
        d = json.loads(line)
        out.append((d["offset"], d["timestamp"], d["key"], d["value"]))
    return out


def now_ms() -> int:
    return int(time.time() * 1000)


def as_rec(r: Record) -> Rec:
    return (r.offset, r.timestamp, r.key.decode(), None if r.value is None else r.value.decode())


def cleaner_offset(data_dir: Path, topic: str) -> int | None:
    return checkpoint.read_offsets(data_dir / "cleaner-offset-checkpoint").get((topic, 0))


def fetch_batches(client: RawClient, topic: str, start: int = 0, timeout: float = 10.0) -> list[RecordBatch]:
    """Every batch from ``start`` to the high watermark by raw Fetch v12, CRC-checked."""
    out: list[RecordBatch] = []
    offset = start
    deadline = time.monotonic() + timeout
    while True:
        p, raw = fetch_once(client, topic, 0, offset)
        assert p.error_code == 0, p.error_code
        for b in decode_batches(raw, verify_crc=True):
            if b.last_offset >= offset:
                out.append(b)
                offset = b.next_offset
        if offset >= p.high_watermark:
            return out
        assert time.monotonic() < deadline, f"fetch stalled at {offset}"


def records_of(batches: list[RecordBatch]) -> list[Rec]:
    return [as_rec(r) for b in batches for r in b.records]


def partition_dir(data_dir: Path, topic: str) -> Path:
    return data_dir / f"{topic}-0"


def segment_files(d: Path) -> list[Path]:
    return sorted(p for p in d.iterdir() if re.fullmatch(r"\d{20}\.(log|index|timeindex)", p.name))


# --------------------------------------------------------------------------- clients


def kp_produce(bootstrap: str, topic: str, items: list[tuple[str, str | None, int]]) -> list[int]:
    """kafka-python, as in the golden run (uncompressed, linger 50 ms, batch_size 65536)."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=50, batch_size=65536, request_timeout_ms=30_000)
    try:
        futures = [
            producer.send(topic, key=k.encode(), value=None if v is None else v.encode(), partition=0, timestamp_ms=ts)
            for k, v, ts in items
        ]
        producer.flush(timeout=60)
        return [f.get(timeout=30).offset for f in futures]
    finally:
        producer.close()


def kp_read(bootstrap: str, topic: str, last_offset: int, timeout: float = 20.0) -> list[Rec]:
    """kafka-python consumer from the earliest offset up to ``last_offset``."""
    tp = TopicPartition(topic, 0)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", request_timeout_ms=10_000)
    out: list[Rec] = []
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        deadline = time.monotonic() + timeout
        while (not out or out[-1][0] < last_offset) and time.monotonic() < deadline:
            for msgs in consumer.poll(timeout_ms=200).values():
                out += [(m.offset, m.timestamp, m.key.decode(), None if m.value is None else m.value.decode()) for m in msgs]
    finally:
        consumer.close()
    assert out and out[-1][0] == last_offset, f"kafka-python read up to {out[-1][0] if out else None}, not {last_offset}"
    return out


def ck_read(bootstrap: str, topic: str, last_offset: int, timeout: float = 20.0) -> list[Rec]:
    """confluent-kafka (librdkafka) consumer from the beginning up to ``last_offset``."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "compaction-tests-unused",
                         "enable.auto.commit": False, "enable.auto.offset.store": False})
    out: list[Rec] = []
    try:
        consumer.assign([CkTopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + timeout
        while (not out or out[-1][0] < last_offset) and time.monotonic() < deadline:
            for m in consumer.consume(1000, 0.2):
                assert m.error() is None, m.error()
                v = m.value()
                out.append((m.offset(), m.timestamp()[1], m.key().decode(), None if v is None else v.decode()))
    finally:
        consumer.close()
    assert out and out[-1][0] == last_offset, f"confluent-kafka read up to {out[-1][0] if out else None}, not {last_offset}"
    return out


# --------------------------------------------------------------------------- kafka-dump-log


def dump_log(cwd: Path, files: list[str], *flags: str) -> str:
    proc = subprocess.run([str(DUMP_LOG), "--files", ",".join(files), *flags], cwd=cwd,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout + proc.stderr


_DUMP_BATCH = re.compile(
    r"baseOffset: (\d+) lastOffset: (\d+) count: (\d+) .* deleteHorizonMs: (OptionalLong\[\d+\]|OptionalLong\.empty)"
    r" position: (\d+) CreateTime: (\d+) size: (\d+) magic: 2 compresscodec: (\w+) crc: (\d+) isvalid: (\w+)"
)
_DUMP_RECORD = re.compile(r"\| offset: (\d+) CreateTime: (\d+) keySize: (-?\d+) valueSize: (-?\d+) .* key: (\S*)(?: payload: (.*))?$")
_INDEX_PROBLEMS = re.compile(r"mismatch|out of order|exception|error|corrupt", re.IGNORECASE)


def check_dump_log(d: Path, horizon: int) -> None:
    """kafka-dump-log decodes our cleaned segments like we do (horizons included) and
    finds nothing wrong with their indexes."""
    logs = [p.name for p in segment_files(d) if p.suffix == ".log"]
    out = dump_log(d, logs, "--deep-iteration", "--print-data-log")
    ours = [b for name in logs for b in decode_batches((d / name).read_bytes())]
    lines = out.splitlines()
    dumped = [m.groups() for m in map(_DUMP_BATCH.search, lines) if m]
    assert len(dumped) == len(ours), out[-2000:]
    for g, b in zip(dumped, ours, strict=True):
        want_horizon = f"OptionalLong[{b.delete_horizon_ms}]" if b.has_delete_horizon else "OptionalLong.empty"
        assert (int(g[0]), int(g[1]), int(g[2]), g[3], int(g[5]), g[7], int(g[8]), g[9]) == (
            b.base_offset, b.last_offset, b.record_count, want_horizon, b.max_timestamp, "none", b.crc, "true")
    assert f"deleteHorizonMs: OptionalLong[{horizon}]" in out
    dumped_records = [m.groups() for m in map(_DUMP_RECORD.search, lines) if m]
    ours_records = [r for b in ours for r in b.records]
    assert [(int(g[0]), int(g[1]), g[4], int(g[3])) for g in dumped_records] == [
        (r.offset, r.timestamp, r.key.decode(), -1 if r.value is None else len(r.value)) for r in ours_records
    ]
    indexes = [p.name for p in segment_files(d) if p.suffix in (".index", ".timeindex")]
    out = dump_log(d, indexes, "--verify-index-only")
    assert not _INDEX_PROBLEMS.search(out), out
    # One "Dumping" line per file and nothing else (but Kafka's note on an index without entries).
    assert [line for line in out.splitlines() if not line.endswith(" is empty.")] == [f"Dumping {f}" for f in indexes]


# --------------------------------------------------------------------------- tests


def test_golden_compaction_scenario(sidecar_factory, tmp_path):
    server = sidecar_factory(overrides=OVERRIDES)
    data_dir = server.data_dir
    topic = "golden-compact"
    create_topic(server.port, topic, configs=GOLDEN_CONFIGS)
    first_pass_golden = golden("after-clean-first-pass.jsonl")
    after_golden = golden("after-clean.jsonl")

    items = [(f"ck-{i % KEYS:03d}", f"v-{i:05d}-" + "x" * (i % 7), TS0 + i) for i in range(N)]
    items += [(k, None, TS0 + N + j) for j, k in enumerate(TOMBSTONE_KEYS)]
    items += [("ck-000", "revived-after-tombstone", TS0 + N + 10)]
    assert kp_produce(server.bootstrap, topic, items) == list(range(N + 11))  # Kafka's offsets

    raw = RawClient(server.port, client_id="compaction-tests")
    try:
        t_trigger1 = now_ms()
        assert kp_produce(server.bootstrap, topic, [("ck-199", "trigger-1", TS0 + 1_000_000)]) == [N + 11]
        # First pass: cleaned up to the active segment (the trigger). Look at once, before
        # anything could touch the tombstones again.
        wait_until(lambda: cleaner_offset(data_dir, topic) == N + 11, timeout=30, interval=0.01,
                   message="the first cleaning pass (cleaner-offset-checkpoint 20011)")
        t_seen = now_ms()
        batches = fetch_batches(raw, topic)
        first_pass_dir = tmp_path / "first-pass"
        first_pass_dir.mkdir()
        for p in segment_files(partition_dir(data_dir, topic)):
            if not p.name.startswith(f"{N + 11:020d}"):
                shutil.copyfile(p, first_pass_dir / p.name)
    finally:
        raw.close()

    first_pass = records_of(batches)
    assert first_pass == first_pass_golden
    cleaned = [r for r in first_pass if r[0] < N + 11]
    assert len({r[2] for r in cleaned}) == len(cleaned) == KEYS  # exactly one record per key
    assert [r[0] for r in first_pass if r[3] is None] == list(range(N + 1, N + 10))
    # The tombstones' batches carry the delete horizon: clean time + delete.retention.ms.
    horizons = set()
    for b in batches:
        tombstones = [r for r in b.records if r.value is None]
        if tombstones:
            assert b.attributes & HORIZON_MASK, f"batch {b.base_offset} holds tombstones but no delete horizon"
            horizons.add(b.base_timestamp)
        elif b.has_delete_horizon:
            pytest.fail(f"batch {b.base_offset} has a delete horizon but no tombstone")
    (horizon,) = horizons
    assert t_trigger1 + DELETE_RETENTION_MS <= horizon <= t_seen + DELETE_RETENTION_MS

    # Past the horizon (as the golden run: 2.5 s), two more triggers: the second pass drops them.
    time.sleep(max(0.0, (t_seen + 2500 - now_ms()) / 1000))
    assert kp_produce(server.bootstrap, topic, [("ck-198", "trigger-2", TS0 + 2_000_000)]) == [N + 12]
    assert kp_produce(server.bootstrap, topic, [("ck-197", "trigger-3", TS0 + 3_000_000)]) == [N + 13]
    wait_until(lambda: cleaner_offset(data_dir, topic) == N + 13, timeout=30, interval=0.02,
               message="the second cleaning pass (cleaner-offset-checkpoint 20013)")
    assert ck_read(server.bootstrap, topic, N + 13) == after_golden
    assert kp_read(server.bootstrap, topic, N + 13) == after_golden
    raw = RawClient(server.port, client_id="compaction-tests")
    try:
        assert records_of(fetch_batches(raw, topic)) == after_golden  # no tombstone left anywhere
    finally:
        raw.close()
    assert (data_dir / "cleaner-offset-checkpoint").read_text() == f"0\n1\n{topic} 0 {N + 13}\n"

    # A clean restart, then a crash (kill -9): exactly the compacted contents, and the
    # cleaner, honouring its checkpoint, changes nothing.
    server.restart()
    assert kp_read(server.bootstrap, topic, N + 13) == after_golden
    server.kill()
    server.start()
    assert ck_read(server.bootstrap, topic, N + 13) == after_golden
    time.sleep(0.6)  # three cleaner backoffs
    assert kp_read(server.bootstrap, topic, N + 13) == after_golden
    assert cleaner_offset(data_dir, topic) == N + 13

    if shutil.which("java") is not None and DUMP_LOG.exists():
        check_dump_log(first_pass_dir, horizon)


@_needs_dump_log
def test_dump_log_reads_segments_cleaned_to_the_end(sidecar_factory, tmp_path):
    """A smaller run, stopped cleanly after the first pass (tombstones with a horizon):
    Kafka's tool reads every segment (gaps, horizons) and verifies every index."""
    server = sidecar_factory(overrides=OVERRIDES)
    topic = "dump-compact"
    create_topic(server.port, topic, configs=GOLDEN_CONFIGS)
    items = [(f"k-{i % 30:02d}", f"value-{i}" * (1 + i % 5), TS0 + i) for i in range(3000)]
    items += [(f"k-{i:02d}", None, TS0 + 3000 + i) for i in range(0, 30, 7)]
    kp_produce(server.bootstrap, topic, items)
    kp_produce(server.bootstrap, topic, [("k-00", "trigger", TS0 + 1_000_000)])
    end = len(items)
    wait_until(lambda: cleaner_offset(server.data_dir, topic) == end, timeout=30, interval=0.02,
               message="cleaning up to the trigger")
    server.stop()
    d = partition_dir(server.data_dir, topic)
    batches = [b for p in segment_files(d) if p.suffix == ".log" for b in decode_batches(p.read_bytes())]
    horizons = {b.delete_horizon_ms for b in batches if b.has_delete_horizon}
    assert horizons, "tombstones were cleaned once: a batch must carry a delete horizon"
    check_dump_log(d, max(horizons))


def cleaner_rounds(server: Any, topic: str) -> int:
    """How many cleanings of the partition the server has logged (one line per cleaning)."""
    return len(re.findall(rf"cleaned {re.escape(topic)}-0 offsets", server.log_text()))


def test_cleaner_goes_idle_once_tombstones_are_gone(sidecar_factory):
    """Tombstones sharing a batch with live records: the pass after the horizon drops the
    tombstones, the batch keeps its horizon attribute (as Kafka's does), and with nothing
    dirty left the cleaner stops: no more cleanings, segment files left alone."""
    server = sidecar_factory(overrides=OVERRIDES)
    topic = "idle-compact"
    create_topic(server.port, topic, configs=GOLDEN_CONFIGS)
    items = [(f"k-{i % 20:02d}", f"v{i}", TS0 + i) for i in range(200)]
    items += [(f"k-{i:02d}", None if i % 4 == 0 else f"last-{i}", TS0 + 200 + i) for i in range(20)]
    kp_produce(server.bootstrap, topic, items)
    kp_produce(server.bootstrap, topic, [("k-99", "trigger-1", TS0 + 1_000_000)])
    wait_until(lambda: cleaner_offset(server.data_dir, topic) == 220, timeout=30, interval=0.02, message="first pass")
    time.sleep(1.5)  # past the delete horizon
    kp_produce(server.bootstrap, topic, [("k-98", "trigger-2", TS0 + 2_000_000)])
    kp_produce(server.bootstrap, topic, [("k-97", "trigger-3", TS0 + 3_000_000)])
    wait_until(lambda: cleaner_offset(server.data_dir, topic) == 222, timeout=30, interval=0.02, message="second pass")
    raw = RawClient(server.port, client_id="compaction-tests")
    try:
        assert [r for r in records_of(fetch_batches(raw, topic)) if r[3] is None] == []
    finally:
        raw.close()
    time.sleep(0.5)  # let a round in progress finish
    rounds = cleaner_rounds(server, topic)
    d = partition_dir(server.data_dir, topic)
    files = {(p.name, p.stat().st_ino) for p in segment_files(d)}
    time.sleep(1.2)  # six cleaner backoffs
    assert cleaner_rounds(server, topic) == rounds, "the cleaner keeps cleaning a log with nothing dirty"
    assert {(p.name, p.stat().st_ino) for p in segment_files(d)} == files


def test_an_idle_log_keeps_its_expired_tombstones_until_the_next_real_cleaning(sidecar_factory):
    """As Kafka (tests/conformance/test_idle_tombstones.py): only dirty bytes make a log
    cleanable, so a tombstone past its delete horizon on a log that receives nothing stays
    fetchable (no cleaning runs); the cleaning that new dirt brings removes it."""
    server = sidecar_factory(overrides=OVERRIDES)
    topic = "idle-tombstones"
    create_topic(server.port, topic, configs=GOLDEN_CONFIGS)
    kp_produce(server.bootstrap, topic, [(f"k-{i}", f"v{i}", TS0 + i) for i in range(5)])  # 0-4
    kp_produce(server.bootstrap, topic, [("k-0", None, TS0 + 1000)])  # 5: tombstone
    kp_produce(server.bootstrap, topic, [("k-9", "trigger-1", TS0 + 2000)])  # 6, rolls 5 out
    wait_until(lambda: cleaner_offset(server.data_dir, topic) == 6, timeout=30, interval=0.02, message="first pass")
    raw = RawClient(server.port, client_id="compaction-tests")
    try:
        tombstone = (5, TS0 + 1000, "k-0", None)
        assert tombstone in records_of(fetch_batches(raw, topic))
        rounds = cleaner_rounds(server, topic)
        time.sleep(DELETE_RETENTION_MS / 1000 + 1.5)  # past the horizon, several cleaner backoffs
        assert tombstone in records_of(fetch_batches(raw, topic)), "an idle log lost its expired tombstone"
        assert cleaner_rounds(server, topic) == rounds
        kp_produce(server.bootstrap, topic, [("k-1", "new-dirt", TS0 + 3000)])  # 7, rolls 6 out
        kp_produce(server.bootstrap, topic, [("k-9", "trigger-2", TS0 + 4000)])  # 8, rolls 7 out
        wait_until(lambda: cleaner_offset(server.data_dir, topic) == 8, timeout=30, interval=0.02, message="second pass")
        assert [r[:3] for r in records_of(fetch_batches(raw, topic))] == [
            (2, TS0 + 2, "k-2"), (3, TS0 + 3, "k-3"), (4, TS0 + 4, "k-4"), (6, TS0 + 2000, "k-9"),
            (7, TS0 + 3000, "k-1"), (8, TS0 + 4000, "k-9")]
    finally:
        raw.close()


def test_compact_delete_retention_runs_in_the_cleaner_thread(sidecar_factory):
    """Kafka runs the retention of compacted logs in the cleaner thread (after each cleaning
    attempt, so it never races a cleaning of the same log), not in the retention task: an
    expired segment of a compact,delete topic goes within cleaner backoffs (200 ms here), long
    before the retention task's first check (log.initial.task.delay.ms, 30 s)."""
    server = sidecar_factory(overrides=OVERRIDES)
    topic = "compact-delete"
    create_topic(server.port, topic, configs={**GOLDEN_CONFIGS, "cleanup.policy": "compact,delete", "retention.ms": "60000"})
    started = time.monotonic()
    kp_produce(server.bootstrap, topic, [(f"k-{i}", f"old-{i}", TS0 + i) for i in range(3)])  # 0-2, long expired
    kp_produce(server.bootstrap, topic, [("k-9", "recent", now_ms())])  # 3, rolls 0-2 out
    raw = RawClient(server.port, client_id="compaction-tests")
    try:
        wait_until(lambda: list_offset(raw, topic, 0, -2) == 3, timeout=20, interval=0.05, message="expired segment deleted")
        assert time.monotonic() - started < 25, "deleted by the retention task, not the cleaner thread"
        assert records_of(fetch_batches(raw, topic, 3))[0][2:] == ("k-9", "recent")
    finally:
        raw.close()
    assert re.search(rf"{topic}-0: deleting 1 segment\(s\) \[0\] by retention.ms", server.log_text())


def test_keyless_records_on_a_compacted_topic_are_refused_whole(sidecar, topic_name):
    create_topic(sidecar.port, topic_name, configs={"cleanup.policy": "compact"})

    # confluent-kafka: one batch of keyed, keyless, keyed -> every record fails, none is written.
    reports: list[Any] = []
    producer = Producer({"bootstrap.servers": sidecar.bootstrap, "linger.ms": 500, "message.timeout.ms": 10_000})
    try:
        # The partition's leader known before the first produce(): otherwise the records wait in
        # librdkafka's unassigned queue, and on a busy machine the first one's linger can run out
        # before they move to the partition, which then sends them in separate batches (CI saw
        # [None, INVALID_RECORD, None]: three batches, only the keyless one refused).
        producer.list_topics(topic_name, timeout=10)
        for key in (b"a", None, b"b"):
            producer.produce(topic_name, key=key, value=b"v", partition=0, on_delivery=lambda err, msg: reports.append(err))
        assert producer.flush(15) == 0
    finally:
        producer.close()
    assert len(reports) == 3 and all(e is not None and e.code() == INVALID_RECORD for e in reports), reports

    # kafka-python (KIP-467): the keyless record fails with INVALID_RECORD, the keyed one
    # because it shared the batch, as Java's producer reports them from record_errors.
    kp = KafkaProducer(bootstrap_servers=sidecar.bootstrap, linger_ms=500)
    try:
        keyed, keyless = (kp.send(topic_name, key=k, value=b"v", partition=0) for k in (b"a", None))
        kp.flush(timeout=15)
        with pytest.raises(InvalidRecordError):
            keyless.get(timeout=10)
        with pytest.raises(KafkaError, match="part of a batch which had one more more invalid records"):
            keyed.get(timeout=10)
    finally:
        kp.close()

    # Raw Produce: error 87 naming the keyless record (batch index 1), nothing appended.
    client = RawClient(sidecar.port, client_id="compaction-tests")
    try:
        batch = encode_batch([Record(0, TS0, b"a", b"v"), Record(1, TS0 + 1, None, b"v"), Record(2, TS0 + 2, b"b", b"v")])
        (p,) = partition_results(client.request(produce_request(topic_name, {0: batch}))).values()
        assert p.error_code == INVALID_RECORD
        assert [e.batch_index for e in p.record_errors] == [1]
        assert p.record_errors[0].batch_index_error_message.startswith(
            "Compacted topic cannot accept message without key in topic partition")
        assert p.error_message
        assert list_offset(client, topic_name, 0, -1) == 0
        _, raw = fetch_once(client, topic_name, 0, 0)
        assert raw == b""
        # A keyed record then goes to offset 0: nothing was appended before.
        (p,) = partition_results(client.request(produce_request(topic_name, {0: encode_batch([Record(0, TS0, b"a", b"v")])}))).values()
        assert (p.error_code, p.base_offset) == (0, 0)
    finally:
        client.close()
