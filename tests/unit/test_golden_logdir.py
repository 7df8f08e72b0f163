"""Apache Kafka 4.0.0's own log dir (golden data): we load it, and we write the same bytes.

(a) LogManager loads a copy of ``kafka-4.0.0-logdir``: records, watermarks, log start
    offsets, compacted contents, ids, all as Kafka left them.
(b) Replaying golden-0's batches as a client would have sent them through a fresh Log
    gives .log/.index/.timeindex files identical to Kafka's, byte for byte.
(c) Kafka's ``kafka-dump-log.sh`` verifies the indexes we wrote and decodes our .log
    exactly as it decodes Kafka's.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import stat
import struct
import subprocess
from pathlib import Path

import pytest
from kafka_sidecar.protocol.compression import CODEC_NAMES, GZIP, LZ4, NONE, SNAPPY, ZSTD
from kafka_sidecar.protocol.record_batch import iter_headers, validate_batches
from kafka_sidecar.protocol.records import Record, decode_batches, encode_batch
from kafka_sidecar.storage import checkpoint
from kafka_sidecar.storage.log import Log, OffsetOutOfRangeError
from kafka_sidecar.storage.log_config import TOPIC_CONFIGS, LogConfig
from kafka_sidecar.storage.log_manager import LogManager
from kafka_sidecar.storage.metadata_files import parse_kafka_uuid

from tests.support import GOLDEN, kafka_bin

LOGDIR = GOLDEN / "kafka-4.0.0-logdir"
DUMP_LOG_DIR = GOLDEN / "dump-log"
DUMP_LOG = kafka_bin("kafka-dump-log.sh")

if not LOGDIR.is_dir():
    pytest.skip(f"golden data not present at {LOGDIR}", allow_module_level=True)

GOLDEN_SEGMENTS = (0, 158, 267)
GOLDEN_CONFIG = {"segment.bytes": 1048576, "message.timestamp.type": "CreateTime", "retention.ms": -1}


def _name(base: int, suffix: str) -> str:
    return f"{base:020d}{suffix}"


def copy_logdir(dst: Path) -> Path:
    """A writable copy of the read-only golden log dir."""
    shutil.copytree(LOGDIR, dst, copy_function=shutil.copyfile)
    for root, dirs, files in os.walk(dst):
        for n in dirs + files:
            p = Path(root) / n
            p.chmod(p.stat().st_mode | stat.S_IWUSR | stat.S_IRUSR | (stat.S_IXUSR if p.is_dir() else 0))
    dst.chmod(dst.stat().st_mode | stat.S_IWUSR)
    return dst


def read_all(lg: Log, max_bytes: int = 256 * 1024) -> tuple[list[Record], list[tuple[int, int, int]]]:
    """Records from the log start to the high watermark via Log.read; also (base, last, codec) per batch."""
    offset = lg.log_start_offset
    records: list[Record] = []
    batches: list[tuple[int, int, int]] = []
    while offset < lg.high_watermark:
        sl = lg.read(offset, max_bytes, True)
        assert sl is not None, f"no data at {offset} < high watermark {lg.high_watermark}"
        decoded = decode_batches(sl.read())
        assert decoded, f"read at {offset} returned no complete batch"
        for b in decoded:
            batches.append((b.base_offset, b.last_offset, b.compression))
            records += [r for r in b.records if r.offset >= offset]
        offset = decoded[-1].next_offset
    return records, batches


def _matches(expected, actual: bytes | None) -> bool:
    """records.jsonl encodes bytes as base64, null, or {len, sha256} when long."""
    if expected is None:
        return actual is None
    if actual is None:
        return False
    if isinstance(expected, dict):
        return len(actual) == expected["len"] and hashlib.sha256(actual).hexdigest() == expected["sha256"]
    return base64.b64decode(expected) == actual


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    """LogManager over a copy of Kafka's log dir (no topic configs known: defaults)."""
    d = copy_logdir(tmp_path_factory.mktemp("golden") / "logdir")
    lm = LogManager(d)
    lm.startup()
    yield lm
    lm.shutdown()


# =========================================================================== (a) loading


def test_loader_discovers_topics_ids_and_cluster(loaded):
    lm = loaded
    assert lm.cluster_id == "R29sZGVuS2Fma2FDbHVzdA"
    assert lm.directory_id == "SjIfzyoY47CIVvxtsKYAiw"
    assert lm.had_clean_shutdown is True
    assert set(lm.metadata.topics) == {
        "golden", "golden-del", "golden-compact", "golden-del-compact",
        "meta-auto-confluent", "meta-auto-kp", "meta-existing", "meta-noauto-confluent", "meta-raw-auto",
    }
    assert "__cluster_metadata" not in lm.metadata.topics
    assert lm.metadata.topics["meta-existing"].partitions == 2
    for name, info in lm.metadata.topics.items():
        for p in range(info.partitions):
            text = (LOGDIR / f"{name}-{p}" / "partition.metadata").read_text()
            m = re.fullmatch(r"version: 0\ntopic_id: ([A-Za-z0-9_-]{22})", text)
            assert m, text
            assert info.topic_id == parse_kafka_uuid(m.group(1)), name
    assert str(lm.metadata.topics["golden"].topic_id) == str(parse_kafka_uuid("WljT3XPsSOiDpRJ-ZQrsOw"))


def test_unknown_topic_configs_fall_back_to_defaults(loaded):
    lg = loaded.get_log("golden", 0)
    for name in ("segment.bytes", "retention.ms", "cleanup.policy", "message.timestamp.type", "index.interval.bytes"):
        assert lg.config.values[name] == TOPIC_CONFIGS[name].default, name


def test_golden_0_yields_exactly_records_jsonl(loaded):
    lg = loaded.get_log("golden", 0)
    assert [s.base_offset for s in lg.segments] == list(GOLDEN_SEGMENTS)
    assert (lg.log_start_offset, lg.log_end_offset, lg.high_watermark) == (0, 322, 322)
    expected = [json.loads(line) for line in (GOLDEN / "produce-fetch" / "records.jsonl").read_text().splitlines()]
    records, batches = read_all(lg)
    assert len(records) == len(expected) == 322
    assert len(batches) == 37
    wire_codecs = _produce_request_codecs()
    assert len(wire_codecs) == 37
    batch_of = {}
    for i, (base, last, codec) in enumerate(batches):
        for o in range(base, last + 1):
            batch_of[o] = (i, CODEC_NAMES[codec])
    for exp, rec in zip(expected, records, strict=True):
        where = f"offset {exp['offset']}"
        assert rec.offset == exp["offset"], where
        assert rec.timestamp == exp["timestamp"], where
        assert _matches(exp["key"], rec.key), where
        assert _matches(exp["value"], rec.value), where
        assert len(rec.headers) == len(exp["headers"]), where
        for (ek, ev), (k, v) in zip(exp["headers"], rec.headers, strict=True):
            assert k == ek and _matches(ev, v), where
        batch_index, codec = batch_of[rec.offset]
        assert batch_index == exp["batch"], where
        # records.jsonl's "compression" is the producer's setting; kafka-python sent batch 21
        # (snappy, incompressible) uncompressed, so compare with the codec on the wire.
        assert codec == wire_codecs[batch_index], where
    assert records[315].timestamp == 1700010000000
    assert {c for _, _, c in batches} == {NONE, GZIP, SNAPPY, LZ4, ZSTD}


def _produce_request_codecs() -> list[str]:
    """The codec of each batch in the recorded Produce requests, in order."""
    codecs: list[str] = []

    def walk(o):
        if isinstance(o, dict):
            for b in o.get("batches", []) if isinstance(o.get("batches"), list) else []:
                if isinstance(b, dict) and "compression" in b:
                    codecs.append(b["compression"])
            for v in o.values():
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)

    for line in (GOLDEN / "produce-fetch" / "frames.jsonl").read_text().splitlines():
        frame = json.loads(line)
        if frame["api_name"] == "produce" and frame["dir"] == "request":
            walk(frame["decoded"])
    return codecs


def test_golden_0_reads_like_kafka_fetch(loaded):
    lg = loaded.get_log("golden", 0)
    sl = lg.read(3, 1, True)  # mid-batch, tiny limit: the whole batch from its base offset
    assert (sl.position, sl.size) == (0, 305)
    assert decode_batches(sl.read())[0].base_offset == 0
    sl = lg.read(158, 1, True)
    assert sl.path.name == _name(158, ".log") and sl.position == 0
    sl = lg.read(320, 1, True)
    assert (sl.path.name, sl.position, sl.size) == (_name(267, ".log"), 301229, 237)
    assert lg.read(322, 1000, True) is None
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(323, 1000, True)
    # The largest timestamp is offset 315's, in the batch ending at 316 (ListOffsets -3).
    last = lg.segments[-1]
    assert (last.max_timestamp_so_far, last.offset_of_max_timestamp) == (1700010000000, 316)


def test_golden_del_0_starts_at_the_checkpointed_log_start_offset(loaded):
    lg = loaded.get_log("golden-del", 0)
    # All 14 segments are still on disk; log-start-offset-checkpoint says 200.
    assert [s.base_offset for s in lg.segments] == list(range(0, 200, 15))
    assert (lg.log_start_offset, lg.log_end_offset, lg.high_watermark) == (200, 200, 200)
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(120, 1000, True)
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(199, 1000, True)
    assert lg.read(200, 1000, True) is None


def test_golden_compact_0_contents(loaded):
    lg = loaded.get_log("golden-compact", 0)
    assert [s.base_offset for s in lg.segments] == [0, 20013]
    assert (lg.log_start_offset, lg.log_end_offset) == (0, 20014)
    expected = [json.loads(line) for line in (GOLDEN / "compaction" / "after-clean.jsonl").read_text().splitlines()]
    records, batches = read_all(lg)
    got = [
        {"offset": r.offset, "timestamp": r.timestamp, "key": r.key.decode(),
         "value": None if r.value is None else r.value.decode()}
        for r in records
    ]
    assert got == expected
    assert batches[0][:2] == (17660, 20010)  # the cleaned batch keeps its offset range


def test_golden_del_compact_and_empty_topics(loaded):
    lg = loaded.get_log("golden-del-compact", 0)
    assert lg.log_end_offset == 10
    records, _ = read_all(lg)
    assert [r.offset for r in records] == list(range(10))
    assert [(r.key, r.value) for r in records] == [(b"c-%d" % (i % 3), b"v%d" % i) for i in range(10)]
    for topic, partition in [("meta-existing", 0), ("meta-existing", 1), ("meta-raw-auto", 0)]:
        lg = loaded.get_log(topic, partition)
        assert (lg.log_start_offset, lg.log_end_offset) == (0, 0)
        assert lg.read(0, 1000, True) is None


def test_load_and_clean_shutdown_keep_kafka_files_and_checkpoints(tmp_path):
    d = copy_logdir(tmp_path / "logdir")
    lm = LogManager(d)
    lm.startup()
    assert not (d / ".kafka_cleanshutdown").exists()
    lm.shutdown()
    # Kafka's clean segments are left exactly as Kafka wrote them.
    for part in ("golden-0", "golden-del-0", "golden-compact-0"):
        for f in sorted((LOGDIR / part).iterdir()):
            if f.suffix in (".log", ".index", ".timeindex"):
                assert (d / part / f.name).read_bytes() == f.read_bytes(), f"{part}/{f.name} changed"
    assert checkpoint.read_offsets(d / "log-start-offset-checkpoint") == {("golden-del", 0): 200}
    rp = checkpoint.read_offsets(d / "recovery-point-offset-checkpoint")
    assert rp[("golden", 0)] == 322 and rp[("golden-del", 0)] == 200 and rp[("golden-compact", 0)] == 20014
    assert json.loads((d / ".kafka_cleanshutdown").read_text())["version"] == 0
    # And a second start sees the same thing.
    lm = LogManager(d)
    lm.startup()
    try:
        lg = lm.get_log("golden-del", 0)
        assert (lg.log_start_offset, lg.log_end_offset) == (200, 200)
        assert lm.get_log("golden", 0).log_end_offset == 322
    finally:
        lm.shutdown()


# =========================================================================== (b) byte for byte


def client_batches() -> list[bytearray]:
    """golden-0's batches in order, reset to what the producer sent (CRC does not cover these)."""
    out = []
    for base in GOLDEN_SEGMENTS:
        data = (LOGDIR / "golden-0" / _name(base, ".log")).read_bytes()
        for pos, h in iter_headers(data):
            b = bytearray(data[pos : pos + h.size])
            struct.pack_into(">q", b, 0, 0)  # baseOffset
            struct.pack_into(">i", b, 12, -1)  # partitionLeaderEpoch
            out.append(b)
    return out


@pytest.fixture(scope="module")
def replayed(tmp_path_factory) -> Path:
    """golden-0 rewritten by our Log: one produce per batch, then a clean close."""
    d = tmp_path_factory.mktemp("replay") / "golden-0"
    lg = Log(d, "golden", 0, LogConfig(None, GOLDEN_CONFIG))
    try:
        batches = client_batches()
        assert len(batches) == 37
        for b in batches:
            lg.append_as_leader(b, validate_batches(b))
        assert lg.log_end_offset == 322
    finally:
        lg.close()
    return d


def test_replayed_segments_are_kafkas(replayed):
    ours = sorted(p.name for p in replayed.iterdir() if p.suffix in (".log", ".index", ".timeindex"))
    kafkas = sorted(p.name for p in (LOGDIR / "golden-0").iterdir() if p.suffix in (".log", ".index", ".timeindex"))
    assert ours == kafkas
    assert sorted({int(p.split(".")[0]) for p in ours}) == list(GOLDEN_SEGMENTS)


@pytest.mark.parametrize("suffix", [".log", ".index", ".timeindex"])
@pytest.mark.parametrize("base", GOLDEN_SEGMENTS)
def test_replayed_files_byte_for_byte(replayed, base, suffix):
    ours = (replayed / _name(base, suffix)).read_bytes()
    kafka = (LOGDIR / "golden-0" / _name(base, suffix)).read_bytes()
    assert len(ours) == len(kafka)
    if suffix == ".log":
        ours_h = [(p, h.base_offset, h.size, h.crc) for p, h in iter_headers(ours)]
        kafka_h = [(p, h.base_offset, h.size, h.crc) for p, h in iter_headers(kafka)]
        assert ours_h == kafka_h
    elif suffix == ".index":
        assert list(struct.iter_unpack(">ii", ours)) == list(struct.iter_unpack(">ii", kafka))
    else:
        assert list(struct.iter_unpack(">qi", ours)) == list(struct.iter_unpack(">qi", kafka))
    assert ours == kafka


# =========================================================================== (c) kafka-dump-log

_needs_dump_log = pytest.mark.skipif(
    shutil.which("java") is None or not DUMP_LOG.exists(),
    reason="needs java and the reference kafka-dump-log.sh",
)


def dump_log(cwd: Path, files: list[str], *flags: str) -> str:
    proc = subprocess.run(
        [str(DUMP_LOG), "--files", ",".join(files), *flags],
        cwd=cwd, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout + proc.stderr


_PROBLEMS = re.compile(r"mismatch|out of order|non-consecutive|exception|error|corrupt", re.IGNORECASE)


@_needs_dump_log
def test_dump_log_verifies_our_indexes(replayed):
    files = [_name(b, s) for b in GOLDEN_SEGMENTS for s in (".index", ".timeindex")]
    out = dump_log(replayed, files, "--verify-index-only")
    assert not _PROBLEMS.search(out), out
    expected = "".join(
        (DUMP_LOG_DIR / f"golden-0_{f}.verify-index-only.txt").read_text() for f in files
    )
    assert out == expected


_BATCH_FIELDS = re.compile(r"baseOffset: (\d+) lastOffset: (\d+) count: (\d+) .* position: (\d+) CreateTime: (\d+) size: (\d+) magic: 2 compresscodec: (\w+) crc: (\d+) isvalid: (\w+)")


@_needs_dump_log
def test_dump_log_decodes_our_log_like_kafkas(replayed, tmp_path):
    files = [_name(b, ".log") for b in GOLDEN_SEGMENTS]
    out = dump_log(replayed, files, "--deep-iteration", "--print-data-log")
    captured = "".join(
        (DUMP_LOG_DIR / f"golden-0_{f}.print-data-log.deep-iteration.txt").read_text() for f in files
    )
    ours_batches = [m.groups() for m in map(_BATCH_FIELDS.match, out.splitlines()) if m]
    kafka_batches = [m.groups() for m in map(_BATCH_FIELDS.match, captured.splitlines()) if m]
    assert len(kafka_batches) == 37
    assert ours_batches == kafka_batches
    assert all(b[-1] == "true" for b in ours_batches)
    # Everything else too: the same tool on Kafka's own segments (copied to a dir of the same
    # shape; the reference's tool may print more than 4.0.0's captured dump did).
    kafka_dir = tmp_path / "kafka" / "golden-0"
    kafka_dir.mkdir(parents=True)
    for f in files:
        shutil.copyfile(LOGDIR / "golden-0" / f, kafka_dir / f)
    flags = ["--deep-iteration", "--print-data-log"]
    ours, kafka = dump_log_parts(replayed, files, *flags), dump_log_parts(kafka_dir, files, *flags)
    assert ours[0].replace(str(replayed), "<dir>") == kafka[0].replace(str(kafka_dir), "<dir>")
    # stderr: the tool's reports of offset gaps, per file in a hash map's order (of the paths).
    assert sorted(_gap_reports(ours[1].replace(str(replayed), "<dir>"))) == sorted(_gap_reports(kafka[1].replace(str(kafka_dir), "<dir>")))


def dump_log_parts(cwd: Path, files: list[str], *flags: str) -> tuple[str, str]:
    proc = subprocess.run([str(DUMP_LOG), "--files", ",".join(files), *flags], cwd=cwd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, proc.stderr


def _gap_reports(stderr: str) -> list[str]:
    """Blocks of "Non-consecutive offsets in <file>" and their indented lines."""
    blocks: list[str] = []
    for line in stderr.splitlines():
        if line.startswith(" ") and blocks:
            blocks[-1] += "\n" + line
        else:
            blocks.append(line)
    return blocks


def _varied_log(d: Path) -> None:
    """A log of our own: every codec, multi-batch produces, small index interval, rolls,
    out-of-order timestamps, then a clean close."""
    lg = Log(d, "varied", 0, LogConfig(None, {"segment.bytes": 20000, "index.interval.bytes": 700}))
    codecs = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
    ts = 1_700_000_000_000
    try:
        for i in range(60):
            n = 1 + i % 7
            stamps = [ts + 37 * i + (-5000 if (i + j) % 11 == 0 else 3 * j) for j in range(n)]
            records = [Record(j, stamps[j], b"k%d" % j, os.urandom(50 + 40 * (i % 5))) for j in range(n)]
            batch = encode_batch(records, compression=codecs[i % 5])
            buf = bytearray(batch * (1 + i % 3))  # 1-3 batches per produce
            lg.append_as_leader(buf, validate_batches(buf))
        assert len(lg.segments) >= 3
    finally:
        lg.close()


@_needs_dump_log
def test_dump_log_verifies_indexes_of_a_varied_log(tmp_path):
    d = tmp_path / "varied-0"
    _varied_log(d)
    files = sorted(p.name for p in d.iterdir() if p.suffix in (".index", ".timeindex"))
    out = dump_log(d, files, "--verify-index-only")
    assert not _PROBLEMS.search(out), out
    assert out.splitlines() == [f"Dumping {f}" for f in files]
