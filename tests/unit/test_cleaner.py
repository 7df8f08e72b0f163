"""Log compaction (Kafka's LogCleaner) on real Logs in a temporary directory.

Every decision is driven by an explicit clock: ``now_ms`` for the choice of the log
(dirty ratio, ``min.compaction.lag.ms``, ``max.compaction.lag.ms``) and the same
instant for the cleaning itself (delete horizons), as Kafka's ``doClean(cleanable,
currentTime)`` does. The reference is Kafka 4.0's LogCleaner/LogCleanerManager
(seeds 000 and 002): only the latest record per key survives below the first
uncleanable offset, offsets are never renumbered, tombstones get a delete horizon
(batch attribute 0x40, horizon in baseTimestamp) on their first cleaning and go on
the first cleaning after it, and a crash anywhere in the ``.cleaned`` -> ``.swap``
-> rename protocol loses nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import struct
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from kafka_sidecar.protocol.compression import GZIP, NONE, ZSTD
from kafka_sidecar.protocol.record_batch import validate_batches
from kafka_sidecar.protocol.records import Record, RecordBatch, decode_batches, encode_batch
from kafka_sidecar.storage import checkpoint
from kafka_sidecar.storage.cleaner import (
    CLEANER_CHECKPOINT,
    Cleaner,
    LogCleaner,
    LogToClean,
    SkimpyOffsetMap,
)
from kafka_sidecar.storage.log import Log
from kafka_sidecar.storage.log_config import LogConfig
from kafka_sidecar.storage.log_manager import CleanerConfig, LogManager

T0 = 1_700_000_000_000  # record timestamps start here
MINUTE = 60_000
HOUR = 3_600_000
DAY = 24 * HOUR
NOW = T0 + 10 * DAY  # the controlled clock of the cleaner
DELTA_HORIZON_MASK = 0x40
TEMP_SUFFIXES = (".cleaned", ".swap", ".deleted")

# Compacted, no dirty-ratio threshold to speak of, small preallocated indexes.
BASE_CONFIG: dict[str, Any] = {
    "cleanup.policy": "compact",
    "min.cleanable.dirty.ratio": 0.01,
    "segment.index.bytes": 1 << 16,
}


# --------------------------------------------------------------------------- helpers


def make_log(root: Path, overrides: dict[str, Any] | None = None, topic: str = "t", partition: int = 0, **kw: Any) -> Log:
    return Log(root / f"{topic}-{partition}", topic, partition, LogConfig(None, {**BASE_CONFIG, **(overrides or {})}), **kw)


def append(lg: Log, kvs: Iterable[tuple[bytes | None, bytes | None]], *, ts: int | None = None, pid: int = -1,
           epoch: int = -1, seq: int = -1, codec: int = NONE) -> list[Record]:
    """One batch, one record per (key, value); record i has timestamp ``ts + i``
    (default ``T0 + offset``). Returns the records with their assigned offsets."""
    kvs = list(kvs)
    first = lg.log_end_offset
    base_ts = T0 + first if ts is None else ts
    recs = [Record(i, base_ts + i, k, v) for i, (k, v) in enumerate(kvs)]
    data = bytearray(encode_batch(recs, producer_id=pid, producer_epoch=epoch, base_sequence=seq, compression=codec))
    info = lg.append_as_leader(data, validate_batches(data), now_ms=base_ts)
    assert info.first_offset == first
    return [Record(first + i, r.timestamp, r.key, r.value) for i, r in enumerate(recs)]


def rec_tuple(r: Record) -> tuple[int, int, bytes | None, bytes | None]:
    return (r.offset, r.timestamp, r.key, r.value)


def read_all(lg: Log, max_bytes: int = 64 * 1024) -> tuple[list[tuple], list[RecordBatch]]:
    """Every record (offset, timestamp, key, value) and batch from the log start to the
    high watermark, through Log.read (the fetch path: indexes, then a scan)."""
    offset = lg.log_start_offset
    records: list[tuple] = []
    batches: list[RecordBatch] = []
    for _ in range(100_000):
        if offset >= lg.high_watermark:
            break
        sl = lg.read(offset, max_bytes, True)
        assert sl is not None, f"no data at {offset} < high watermark {lg.high_watermark}"
        decoded = decode_batches(sl.read())
        assert decoded, f"read at {offset} returned no complete batch"
        for b in decoded:
            batches.append(b)
            records += [rec_tuple(r) for r in b.records if r.offset >= offset]
        offset = decoded[-1].next_offset
    return records, batches


def disk_batches(lg: Log) -> list[RecordBatch]:
    """All batches of all segment files, CRC-checked."""
    out: list[RecordBatch] = []
    for seg in lg.segments:
        out += decode_batches(seg.read_batch_bytes(0, seg.size), verify_crc=True)
    return out


def latest_model(records: list[tuple], start: int, end: int) -> list[tuple]:
    """What Kafka keeps after cleaning [start, end) (tombstones not yet expired): a record
    below ``end`` stays unless a later record with its key lies in [start, end)."""
    last: dict[bytes, int] = {}
    for off, _ts, key, _value in records:
        if start <= off < end and key is not None:
            last[key] = off
    return [r for r in records if r[0] >= end or r[0] >= last.get(r[2], -1)]


def new_cleaner(root: Path, logs: list[Log], **kw: Any) -> LogCleaner:
    """A LogCleaner without threads: rounds are run by the test."""
    return LogCleaner(root, lambda: list(logs), enabled=False, **kw)


def cleaner_with_clock(lc: LogCleaner, now: int, check: Any = None) -> Cleaner:
    return Cleaner(SkimpyOffsetMap(lc.map_memory, lc.load_factor), check or lc.manager.check_aborted, now=lambda: now)


def drain_retired(lg: Log) -> None:
    """What LogManager.delete_due_segments does once file.delete.delay.ms has passed."""
    for seg in lg.take_retired_segments():
        seg.close()
        for p in seg.paths():
            p.unlink(missing_ok=True)


def clean(lc: LogCleaner, now: int, *, drain: bool = True) -> bool:
    """One cleaner round at ``now`` (selection and cleaning on the same clock)."""
    cleaned = lc.clean_one(cleaner_with_clock(lc, now), now_ms=now)
    if drain:
        for lg in lc.logs():
            drain_retired(lg)
    return cleaned


def force_clean(lc: LogCleaner, cleaner: Cleaner, now: int) -> bool:
    """One cleaning of the cleaner's only log whatever its dirty ratio, as Kafka's LogCleanerTest
    drives Cleaner.clean with a LogToClean it builds (selection leaves an idle log alone)."""
    (lg,) = lc.logs()
    first_dirty, uncleanable, _ = lc.manager.cleanable_offsets(lg, now)
    with lc.manager._lock:
        lc.manager.in_progress.add((lg.topic, lg.partition))
    end, _stats = cleaner.clean(LogToClean(lg, first_dirty, uncleanable, 0, 0))
    lc.manager.done_cleaning(lg, end)
    drain_retired(lg)
    return True


def cleaner_checkpoint(root: Path) -> dict[tuple[str, int], int]:
    return checkpoint.read_offsets(root / CLEANER_CHECKPOINT)


def file_bytes(seg: Any) -> bytes:
    return Path(seg.log_path).read_bytes()


def temp_files(d: Path) -> list[str]:
    return sorted(n for n in os.listdir(d) if n.endswith(TEMP_SUFFIXES))


def read_offset_index(path: Path, base: int) -> list[tuple[int, int]]:
    """(absolute offset, position) entries of an .index file, up to its zero padding."""
    data = path.read_bytes()
    out: list[tuple[int, int]] = []
    for rel, pos in struct.iter_unpack(">ii", data[: len(data) // 8 * 8]):
        if (not out and rel == 0 and pos == 0) or (out and base + rel <= out[-1][0]):
            break
        out.append((base + rel, pos))
    return out


def read_time_index(path: Path, base: int) -> list[tuple[int, int]]:
    """(timestamp, absolute offset) entries of a .timeindex file, up to its zero padding."""
    data = path.read_bytes()
    out: list[tuple[int, int]] = []
    for ts, rel in struct.iter_unpack(">qi", data[: len(data) // 12 * 12]):
        if (not out and ts == 0 and rel == 0) or (out and ts <= out[-1][0]):
            break
        out.append((ts, base + rel))
    return out


def assert_valid_indexes(lg: Log) -> None:
    """What kafka-dump-log --verify-index-only checks, on the files: every .index entry
    points at a batch whose last offset is the entry's offset, every .timeindex entry is
    the max timestamp so far and the last offset of the batch holding it; rolled
    segments end with their max timestamp."""
    for seg in lg.segments:
        raw = seg.read_batch_bytes(0, seg.size)
        batches = decode_batches(raw, verify_crc=True)
        by_pos: dict[int, RecordBatch] = {}
        pos = 0
        for b in batches:
            by_pos[pos] = b
            pos += b.size
        assert pos == seg.size, f"segment {seg.base_offset}: {seg.size - pos} trailing bytes"
        running: dict[int, int] = {}
        top = -1
        for b in batches:
            assert b.base_offset >= seg.base_offset
            top = max(top, b.max_timestamp)
            running[b.last_offset] = top
        for off, p in read_offset_index(seg.offset_index.path, seg.base_offset):
            assert p in by_pos, f"segment {seg.base_offset}: index entry {off} -> position {p} is not a batch start"
            assert by_pos[p].last_offset == off, f"segment {seg.base_offset}: index entry {off} -> batch ending at {by_pos[p].last_offset}"
        entries = read_time_index(seg.time_index.path, seg.base_offset)
        by_last = {b.last_offset: b for b in batches}
        for ts, off in entries:
            assert off in by_last, f"segment {seg.base_offset}: time index entry ({ts}, {off}) names no batch"
            assert by_last[off].max_timestamp == ts == running[off], f"segment {seg.base_offset}: time index entry ({ts}, {off})"
        if seg is not lg.active_segment and top >= 0:
            assert entries and entries[-1][0] == top, f"segment {seg.base_offset}: last time index entry {entries[-1:]} != max timestamp {top}"


def kv(i: int, value: bytes | None = b"v") -> tuple[bytes, bytes | None]:
    return (b"k%02d" % i, value)


# =========================================================================== retention of records


def test_only_latest_value_per_key_survives_with_offsets_preserved(tmp_path):
    lg = make_log(tmp_path)
    written: list[Record] = []
    for seg in range(4):
        for b in range(3):
            n = seg * 3 + b
            written += append(lg, [kv((n + j) % 5, b"v%d-%d" % (n, j)) for j in range(4)])
        lg.roll()
    active_base = lg.log_end_offset
    # The active segment: a newer k00 (must not be used: it is beyond the cleanable range).
    written += append(lg, [kv(0, b"in-active-segment"), kv(7, b"only-in-active")])
    active_before = file_bytes(lg.active_segment)
    before, _ = read_all(lg)
    assert before == [rec_tuple(r) for r in written]
    leo = lg.log_end_offset

    lc = new_cleaner(tmp_path, [lg])
    assert clean(lc, NOW)

    after, batches = read_all(lg)
    assert after == latest_model(before, 0, active_base)
    # One record per key below the active segment, and the older k00 is still there.
    cleaned = [r for r in after if r[0] < active_base]
    assert sorted(r[2] for r in cleaned) == sorted({r[2] for r in before if r[0] < active_base})
    assert any(r[2] == b"k00" for r in cleaned)
    # Offsets are kept (gaps), never renumbered; the log's bounds do not move.
    assert [r[0] for r in cleaned] != list(range(len(cleaned)))
    assert (lg.log_start_offset, lg.log_end_offset) == (0, leo)
    # The active segment is untouched, byte for byte.
    assert lg.active_segment.base_offset == active_base
    assert file_bytes(lg.active_segment) == active_before
    assert [s.base_offset for s in lg.segments] == [0, active_base]
    assert (tmp_path / CLEANER_CHECKPOINT).read_text() == f"0\n1\nt 0 {active_base}\n"
    assert all(b.base_offset <= b.last_offset for b in batches)
    assert_valid_indexes(lg)
    assert temp_files(lg.dir) == []


def test_a_log_with_only_an_active_segment_is_not_cleaned(tmp_path):
    lg = make_log(tmp_path)
    append(lg, [kv(1, b"a"), kv(1, b"b"), kv(1, b"c")])
    active_before = file_bytes(lg.active_segment)
    lc = new_cleaner(tmp_path, [lg])
    assert not clean(lc, NOW)
    assert file_bytes(lg.active_segment) == active_before
    assert len(read_all(lg)[0]) == 3
    assert not (tmp_path / CLEANER_CHECKPOINT).exists()


def test_min_compaction_lag_holds_back_young_segments(tmp_path):
    lg = make_log(tmp_path, {"min.compaction.lag.ms": HOUR})
    append(lg, [kv(0, b"a"), kv(1, b"a"), kv(0, b"b")], ts=NOW - 3 * HOUR)
    lg.roll()
    young = lg.log_end_offset
    append(lg, [kv(1, b"b"), kv(0, b"c"), kv(1, b"c")], ts=NOW - 10 * MINUTE)
    lg.roll()
    active = lg.log_end_offset
    append(lg, [kv(2, b"z")], ts=NOW)
    before, _ = read_all(lg)
    young_bytes = file_bytes(lg.segments[1])

    lc = new_cleaner(tmp_path, [lg])
    assert clean(lc, NOW)
    # First uncleanable offset = the young segment: only [0, young) was mapped and cleaned.
    after, _ = read_all(lg)
    assert after == latest_model(before, 0, young)
    assert [(r[2], r[3]) for r in after if r[0] < young] == [(b"k01", b"a"), (b"k00", b"b")]
    assert file_bytes(lg.segment_for(young)) == young_bytes
    assert cleaner_checkpoint(tmp_path) == {("t", 0): young}

    # Still young 40 minutes later: nothing cleanable.
    assert not clean(lc, NOW + 40 * MINUTE)
    assert read_all(lg)[0] == after
    # Once its largest timestamp is older than the lag, it is cleaned.
    assert clean(lc, NOW + 51 * MINUTE)
    assert read_all(lg)[0] == latest_model(before, 0, active)
    assert cleaner_checkpoint(tmp_path) == {("t", 0): active}


def _clean_section_then_small_dirty(tmp_path: Path, overrides: dict[str, Any], active_ts: int) -> tuple[Log, LogCleaner]:
    """Ten single-key segments and an active one (timestamp ``active_ts``), cleaned
    (ratio 1.0 > 0.9); the caller rolls and adds a little dirt."""
    lg = make_log(tmp_path, {"min.cleanable.dirty.ratio": 0.9, **overrides})
    for i in range(10):
        append(lg, [kv(i, b"x" * 200)], ts=T0 + i)
        lg.roll()
    append(lg, [kv(99, b"was-active")], ts=active_ts)
    lc = new_cleaner(tmp_path, [lg])
    assert clean(lc, T0 + 200)
    assert cleaner_checkpoint(tmp_path) == {("t", 0): 10}
    lg.roll()
    return lg, lc


def test_max_compaction_lag_forces_cleaning_below_the_min_ratio(tmp_path):
    lg, lc = _clean_section_then_small_dirty(tmp_path, {"max.compaction.lag.ms": HOUR}, NOW - 30 * MINUTE)
    dirty_start = lg.log_end_offset
    append(lg, [kv(3, b"new")], ts=NOW - 30 * MINUTE + 1)
    lg.roll()
    append(lg, [kv(98, b"active")], ts=NOW)
    before, _ = read_all(lg)
    # Dirty ratio far below 0.9, and the dirty data is only 30 minutes old: not due.
    assert not clean(lc, NOW)
    assert read_all(lg)[0] == before
    # 31 minutes later its first batch is older than max.compaction.lag.ms: cleaned anyway.
    assert clean(lc, NOW + 31 * MINUTE)
    after, _ = read_all(lg)
    assert after == latest_model(before, 0, lg.active_segment.base_offset)
    assert (3, T0 + 3, b"k03", b"x" * 200) not in after
    assert cleaner_checkpoint(tmp_path) == {("t", 0): lg.active_segment.base_offset}
    assert dirty_start in [r[0] for r in after]


def test_max_compaction_lag_uses_the_earliest_dirty_segment_timestamp(tmp_path):
    """Kafka's maxCompactionDelay: the minimum first-batch timestamp over every dirty
    non-active segment, not only the first one (CreateTime need not be monotonic)."""
    lg, lc = _clean_section_then_small_dirty(tmp_path, {"max.compaction.lag.ms": DAY}, NOW - 10 * MINUTE)
    append(lg, [kv(4, b"two-days-old")], ts=NOW - 2 * DAY)
    lg.roll()
    append(lg, [kv(97, b"active")], ts=NOW)
    before, _ = read_all(lg)
    assert clean(lc, NOW)
    assert read_all(lg)[0] == latest_model(before, 0, lg.active_segment.base_offset)


def _equal_segments_log(root: Path, topic: str, n: int, overrides: dict[str, Any] | None = None) -> Log:
    """``n`` segments of one identical-size batch each (one record, distinct key), then an active one."""
    lg = make_log(root, overrides, topic=topic)
    for i in range(n):
        append(lg, [kv(i, b"y" * 100)])
        lg.roll()
    append(lg, [kv(99, b"y" * 100)])
    sizes = {s.size for s in lg.segments}
    assert len(sizes) == 1, sizes
    return lg


def test_the_filthiest_log_is_cleaned_first_and_clean_enough_logs_are_skipped(tmp_path):
    logs = {name: _equal_segments_log(tmp_path, name, 10, {"min.cleanable.dirty.ratio": 0.5}) for name in "abc"}
    # First dirty offsets: a 7 (ratio 0.3), b 4 (0.6), c 1 (0.9).
    first_dirty = {("a", 0): 7, ("b", 0): 4, ("c", 0): 1}
    checkpoint.write_offsets(tmp_path / CLEANER_CHECKPOINT, first_dirty)
    a_files = {p.name: p.read_bytes() for p in logs["a"].dir.iterdir() if p.suffix == ".log"}
    lc = new_cleaner(tmp_path, list(logs.values()))

    assert clean(lc, NOW)
    assert lc.last_stats is not None and lc.last_stats.topic_partition == "c-0"
    assert cleaner_checkpoint(tmp_path) == {**first_dirty, ("c", 0): 10}
    assert clean(lc, NOW)
    assert lc.last_stats.topic_partition == "b-0"
    assert cleaner_checkpoint(tmp_path) == {**first_dirty, ("c", 0): 10, ("b", 0): 10}
    # a's ratio 0.3 < 0.5: never picked.
    assert not clean(lc, NOW)
    assert cleaner_checkpoint(tmp_path)[("a", 0)] == 7
    assert {p.name: p.read_bytes() for p in logs["a"].dir.iterdir() if p.suffix == ".log"} == a_files


def test_a_dirty_ratio_equal_to_the_minimum_is_not_enough(tmp_path):
    """Seed 002 / Kafka: ``cleanableRatio > minCleanableRatio`` (strictly)."""
    lg = _equal_segments_log(tmp_path, "t", 10, {"min.cleanable.dirty.ratio": 0.5})
    checkpoint.write_offsets(tmp_path / CLEANER_CHECKPOINT, {("t", 0): 5})  # 5 clean, 5 dirty: 0.5
    lc = new_cleaner(tmp_path, [lg])
    assert not clean(lc, NOW)
    assert cleaner_checkpoint(tmp_path) == {("t", 0): 5}
    lg.config = LogConfig(None, {**BASE_CONFIG, "min.cleanable.dirty.ratio": 0.49})
    assert clean(lc, NOW)
    assert cleaner_checkpoint(tmp_path) == {("t", 0): 10}


def test_cleaner_offset_checkpoint_is_written_and_honoured(tmp_path):
    lg = make_log(tmp_path)
    # [0, 6): duplicates of k01/k02 that a checkpoint at 6 declares clean.
    append(lg, [kv(1, b"a"), kv(1, b"b"), kv(2, b"a")])
    lg.roll()
    append(lg, [kv(2, b"b"), kv(3, b"a"), kv(3, b"b")])
    lg.roll()
    # [6, 12): dirty, with a newer k03 and duplicates of its own.
    append(lg, [kv(3, b"c"), kv(4, b"a"), kv(4, b"b")])
    lg.roll()
    append(lg, [kv(5, b"a"), kv(5, b"b"), kv(5, b"c")])
    lg.roll()
    append(lg, [kv(9, b"active")])
    before, _ = read_all(lg)
    checkpoint.write_offsets(tmp_path / CLEANER_CHECKPOINT, {("t", 0): 6})

    lc = new_cleaner(tmp_path, [lg])
    assert clean(lc, NOW)
    after, _ = read_all(lg)
    # Only keys of the dirty section [6, 12) are in the offset map: the k01/k02 duplicates
    # below 6 stay (they were declared clean), k03's older values go.
    assert after == latest_model(before, 6, 12)
    assert [r[3] for r in after if r[2] in (b"k01", b"k02")] == [b"a", b"b", b"a", b"b"]
    assert [r[3] for r in after if r[2] == b"k03"] == [b"c"]
    assert (tmp_path / CLEANER_CHECKPOINT).read_text() == "0\n1\nt 0 12\n"

    # A restarted cleaner reads the checkpoint: nothing is dirty, nothing is cleaned.
    lc2 = new_cleaner(tmp_path, [lg])
    assert not clean(lc2, NOW)
    assert read_all(lg)[0] == after

    # A second log: the checkpoint lists both, in Kafka's format.
    lg2 = make_log(tmp_path, topic="u", partition=3)
    append(lg2, [kv(1, b"a"), kv(1, b"b")])
    lg2.roll()
    append(lg2, [kv(2, b"active")])
    lc3 = new_cleaner(tmp_path, [lg, lg2])
    assert clean(lc3, NOW)
    text = (tmp_path / CLEANER_CHECKPOINT).read_text()
    lines = text.split("\n")
    assert lines[0] == "0" and lines[1] == "2" and lines[-1] == ""
    assert sorted(lines[2:-1]) == ["t 0 12", "u 3 2"]


def test_offset_map_overflow_cleans_a_prefix_and_continues_next_round(tmp_path):
    # 230 bytes of dedupe buffer: 9 slots of 24 bytes, 8 usable at load factor 0.9.
    # Each segment brings 4 new keys, the 4th as its last record: two segments fill the
    # map exactly, and Kafka stops at the next keyed record, the third segment's first.
    lg = make_log(tmp_path)
    bases = []
    for s in range(6):
        bases.append(lg.log_end_offset)
        keys = [4 * s + j for j in range(3)]
        append(lg, [kv(k, b"old") for k in keys])
        append(lg, [kv(k, b"new") for k in keys] + [kv(4 * s + 3, b"new")])
        lg.roll()
    active = lg.log_end_offset
    append(lg, [kv(99, b"active")])
    before, _ = read_all(lg)
    lc = new_cleaner(tmp_path, [lg], dedupe_buffer_size=230)

    # Round 1 maps two segments (8 keys): the third does not fit.
    tail_before = [file_bytes(s) for s in lg.segments if s.base_offset >= bases[2]]
    assert clean(lc, NOW)
    assert cleaner_checkpoint(tmp_path) == {("t", 0): bases[2]}
    after1, _ = read_all(lg)
    assert after1 == latest_model(before, 0, bases[2])
    assert [file_bytes(s) for s in lg.segments if s.base_offset >= bases[2]] == tail_before

    assert clean(lc, NOW)
    assert cleaner_checkpoint(tmp_path) == {("t", 0): bases[4]}
    assert clean(lc, NOW)
    assert cleaner_checkpoint(tmp_path) == {("t", 0): active}
    assert not clean(lc, NOW)
    assert read_all(lg)[0] == latest_model(before, 0, active)
    assert [r[3] for r in read_all(lg)[0]].count(b"old") == 0


def test_offset_map_never_holds_more_than_its_buffer(tmp_path, monkeypatch):
    """A dirty segment with more distinct keys than the map holds: Kafka stops mapping
    when the map is full (mid-segment), cleans up to the last mapped offset, and goes
    on from there next round. The map never exceeds its capacity."""
    lg = make_log(tmp_path)
    for rnd in range(2):
        for b in range(5):
            append(lg, [kv(4 * b + j, b"r%d" % rnd) for j in range(4)])  # 20 keys, twice
    lg.roll()
    active = lg.log_end_offset
    append(lg, [kv(99, b"active")])
    before, _ = read_all(lg)

    peak = 0
    real_build = Cleaner._build_offset_map

    def measuring_build(self: Cleaner, *args: Any) -> int:
        # The map only grows while it is built: its size afterwards is the round's peak.
        nonlocal peak
        end = real_build(self, *args)
        peak = max(peak, self.offset_map.size)
        return end

    monkeypatch.setattr(Cleaner, "_build_offset_map", measuring_build)
    lc = new_cleaner(tmp_path, [lg], dedupe_buffer_size=230)  # 8 usable entries
    rounds = 0
    for _ in range(20):
        if not clean(lc, NOW):
            break
        rounds += 1
    assert peak <= 8, f"the offset map held {peak} entries; its buffer holds 8"
    assert rounds >= 3
    assert read_all(lg)[0] == latest_model(before, 0, active)


def test_offset_map_keys_short_keys_by_themselves_and_long_ones_by_md5():
    omap = SkimpyOffsetMap(1 << 20)
    long_key = b"a key of more than sixteen bytes"
    digest_of_long = hashlib.md5(long_key).digest()  # a 16-byte key equal to another key's MD5
    keys = [b"", b"k", b"x" * 15, b"x" * 16, b"x" * 17, long_key, digest_of_long, digest_of_long[:15]]
    for i, key in enumerate(keys):
        omap.put(key, 100 + i)
    assert [omap.get(k) for k in keys] == [100 + i for i in range(len(keys))]
    assert omap.size == len(keys)
    assert omap.get(b"x" * 18) == -1
    assert omap.digest(b"x" * 15) == b"x" * 15
    assert omap.digest(b"x" * 16) == hashlib.md5(b"x" * 16).digest()
    omap.put(long_key, 7)
    assert omap.get(long_key) == 7 and omap.get(digest_of_long) == 106 and omap.size == len(keys)


@pytest.mark.parametrize("codec", [NONE, ZSTD], ids=["none", "zstd"])
def test_keys_of_every_length_are_deduplicated(tmp_path, codec):
    """Short keys (mapped as themselves) and keys of 16 bytes or more (mapped by MD5),
    including a key equal to another key's digest: only each key's latest record stays."""
    lg = make_log(tmp_path)
    long_key = b"L" * 40
    keys = [b"", b"s", b"x" * 15, b"x" * 16, b"y" * 17, long_key, hashlib.md5(long_key).digest(), b"z" * 1000]
    for rnd in range(3):
        for i in range(0, len(keys), 3):
            append(lg, [(k, b"r%d" % rnd) for k in keys[i : i + 3]], codec=codec)
        if rnd == 1:
            append(lg, [(keys[6], None)], codec=codec)  # a tombstone for the digest-like key
        lg.roll()
    active = lg.log_end_offset
    append(lg, [(long_key, b"active")])
    before, _ = read_all(lg)
    lc = new_cleaner(tmp_path, [lg])
    assert clean(lc, NOW)
    after, _ = read_all(lg)
    assert after == latest_model(before, 0, active)
    cleaned = [(r[2], r[3]) for r in after if r[0] < active]
    assert sorted(cleaned) == sorted((k, b"r2") for k in keys)
    assert lc.last_stats is not None and lc.last_stats.map_entries == len(keys)
    assert_valid_indexes(lg)


def test_segment_groups_respect_segment_bytes(tmp_path):
    lg = make_log(tmp_path)
    for i in range(5):
        append(lg, [kv(i, b"old" * 30), kv(i, b"new" * 30)])
        lg.roll()
    append(lg, [kv(99, b"active")])
    size = lg.segments[0].size
    assert {s.size for s in lg.segments[:-1]} == {size}
    before, _ = read_all(lg)
    # Kafka groups by the sizes before cleaning: 2 x size fits exactly, 3 do not.
    lg.config = LogConfig(None, {**BASE_CONFIG, "segment.bytes": 2 * size})
    lc = new_cleaner(tmp_path, [lg])
    assert clean(lc, NOW)
    assert [s.base_offset for s in lg.segments] == [0, 4, 8, 10]
    assert all(s.size <= 2 * size for s in lg.segments)
    assert read_all(lg)[0] == latest_model(before, 0, 10)
    assert_valid_indexes(lg)


def test_segment_groups_respect_the_index_size(tmp_path):
    # 24-byte indexes: a rolled segment's time index holds one 12-byte entry, so two fit.
    lg = make_log(tmp_path, {"segment.index.bytes": 24})
    for i in range(5):
        append(lg, [kv(i, b"old"), kv(i, b"new")])
        lg.roll()
    append(lg, [kv(99, b"active")])
    assert all(s.time_index.size_in_bytes == 12 for s in lg.segments[:-1])
    before, _ = read_all(lg)
    lc = new_cleaner(tmp_path, [lg])
    assert clean(lc, NOW)
    assert [s.base_offset for s in lg.segments] == [0, 4, 8, 10]
    assert read_all(lg)[0] == latest_model(before, 0, 10)
    assert_valid_indexes(lg)


# =========================================================================== tombstones and batches


def _batch_holding(batches: list[RecordBatch], offset: int) -> RecordBatch:
    (b,) = [b for b in batches if b.base_offset <= offset <= b.last_offset]
    return b


def test_tombstones_get_a_delete_horizon_then_go_after_it(tmp_path):
    lg = make_log(tmp_path, {"delete.retention.ms": 1000})
    append(lg, [kv(1, b"a"), kv(2, b"a"), kv(3, b"a")])  # 0-2
    lg.roll()
    append(lg, [kv(1, None), kv(2, b"b")])  # 3: tombstone k01, 4
    lg.roll()
    untouched = append(lg, [kv(5, b"a")])  # 5: a batch without tombstones
    lg.roll()
    append(lg, [kv(3, None)])  # 6: tombstone k03 ...
    lg.roll()
    append(lg, [kv(3, b"revived")])  # 7: ... superseded
    lg.roll()
    append(lg, [kv(9, b"active")])  # 8
    original = {b.base_offset: b for b in disk_batches(lg)}
    lc = new_cleaner(tmp_path, [lg])

    c1 = NOW
    assert clean(lc, c1)
    records, batches = read_all(lg)
    assert records == [
        (3, T0 + 3, b"k01", None), (4, T0 + 4, b"k02", b"b"), (5, T0 + 5, b"k05", b"a"),
        (7, T0 + 7, b"k03", b"revived"), (8, T0 + 8, b"k09", b"active"),
    ]
    tomb = _batch_holding(batches, 3)
    assert tomb.attributes & DELTA_HORIZON_MASK
    assert tomb.base_timestamp == tomb.delete_horizon_ms == c1 + 1000
    assert tomb.max_timestamp == original[3].max_timestamp
    assert (tomb.base_offset, tomb.last_offset, tomb.record_count) == (3, 4, 2)
    # Record timestamps are exact: deltas are relative to the horizon.
    assert [r.timestamp for r in tomb.records] == [T0 + 3, T0 + 4]
    plain = _batch_holding(batches, untouched[0].offset)
    assert not plain.attributes & DELTA_HORIZON_MASK
    assert plain.crc == original[5].crc
    assert not _batch_holding(batches, 7).attributes & DELTA_HORIZON_MASK
    assert lg.latest_delete_horizon == c1 + 1000

    # New dirt, cleaned before the horizon: the tombstone and its horizon stay.
    lg.roll()
    append(lg, [kv(9, b"again")])  # 9
    lg.roll()
    append(lg, [kv(8, b"active-2")])  # 10
    assert clean(lc, c1 + 999)
    records, batches = read_all(lg)
    assert (3, T0 + 3, b"k01", None) in records
    assert _batch_holding(batches, 3).base_timestamp == c1 + 1000

    # New dirt, cleaned at the horizon: the tombstone goes. Its batch keeps the horizon
    # it was given (Kafka rewrites it with the batch's existing deleteHorizonMs).
    lg.roll()
    append(lg, [kv(8, b"again")])  # 11
    lg.roll()
    append(lg, [kv(7, b"active-3")])  # 12
    assert clean(lc, c1 + 1000)
    records, batches = read_all(lg)
    assert [r for r in records if r[3] is None] == []
    assert [r[:3] for r in records if r[0] < 9] == [(4, T0 + 4, b"k02"), (5, T0 + 5, b"k05"), (7, T0 + 7, b"k03")]
    b = _batch_holding(batches, 4)
    assert (b.base_offset, b.last_offset, b.record_count) == (3, 4, 1)
    assert b.delete_horizon_ms == c1 + 1000
    assert [r.timestamp for r in b.records] == [T0 + 4]
    assert_valid_indexes(lg)


def test_a_log_whose_tombstones_are_gone_is_not_cleaned_again(tmp_path):
    """After the pass that drops the tombstones, the batch that held them keeps its
    horizon attribute (as in Kafka) but holds no tombstone: with no new dirt the log has
    nothing to clean, and the cleaner must stay idle instead of rewriting it every round."""
    lg = make_log(tmp_path, {"delete.retention.ms": 1000})
    append(lg, [kv(1, b"a")])
    lg.roll()
    append(lg, [kv(2, b"b"), kv(1, None)])  # a live record and a tombstone in one batch
    lg.roll()
    append(lg, [kv(8, b"active")])
    lc = new_cleaner(tmp_path, [lg])
    assert clean(lc, NOW)
    lg.roll()
    append(lg, [kv(7, b"new-dirt")], ts=NOW)  # a later pass, past the horizon
    assert clean(lc, NOW + 2000)
    records, batches = read_all(lg)
    assert [r for r in records if r[3] is None] == []
    assert _batch_holding(batches, 1).delete_horizon_ms == NOW + 1000
    files = _dir_contents(lg.dir)
    for i in range(3):
        assert not clean(lc, NOW + 3000 + i), f"idle round {i} cleaned the log again"
    assert _dir_contents(lg.dir) == files


def test_an_idle_log_keeps_expired_tombstones_until_its_next_real_cleaning(tmp_path):
    """Kafka's grabFilthiestCompactedLog picks a log for its dirty bytes only: tombstones whose
    delete horizon has passed stay (and are fetched) until new dirt makes the log cleanable,
    and then they go in that cleaning."""
    lg = make_log(tmp_path, {"delete.retention.ms": 1000})
    append(lg, [kv(1, b"a"), kv(2, b"a")])
    lg.roll()
    append(lg, [kv(1, None)])  # tombstone of k01
    lg.roll()
    append(lg, [kv(9, b"active")])
    lc = new_cleaner(tmp_path, [lg])
    assert clean(lc, NOW)
    assert (2, T0 + 2, b"k01", None) in read_all(lg)[0]
    files = _dir_contents(lg.dir)
    for later in (NOW + 1000, NOW + 2 * DAY):  # at and long past the horizon
        assert not clean(lc, later)
        assert (2, T0 + 2, b"k01", None) in read_all(lg)[0]
    assert _dir_contents(lg.dir) == files
    assert lc.max_dirty_percent == 0
    lg.roll()
    append(lg, [kv(3, b"new-dirt")], ts=NOW)
    lg.roll()
    append(lg, [kv(9, b"active-2")], ts=NOW)
    assert clean(lc, NOW + 2 * DAY)
    assert [r for r in read_all(lg)[0] if r[3] is None] == []


def test_clean_one_now_ms_is_the_clock_of_the_whole_round(tmp_path):
    """Kafka's doClean(cleanable, currentTime): the horizon is the round's time plus
    delete.retention.ms, the same clock that chose the log."""
    lg = make_log(tmp_path, {"delete.retention.ms": 1000})
    append(lg, [kv(1, b"a"), kv(1, None)])
    lg.roll()
    append(lg, [kv(9, b"active")])
    lc = new_cleaner(tmp_path, [lg])
    assert lc.clean_one(now_ms=NOW)
    (tomb,) = [b for b in disk_batches(lg) if b.base_offset == 0]
    assert tomb.delete_horizon_ms == NOW + 1000


@pytest.mark.parametrize("codec", [GZIP, ZSTD])
def test_rewritten_batches_keep_producer_fields_and_codec(tmp_path, codec):
    lg = make_log(tmp_path)
    a = append(lg, [kv(1, b"a"), kv(2, b"a"), kv(3, b"a")], pid=7, epoch=3, seq=0, codec=codec)  # 0-2
    b = append(lg, [kv(4, b"a"), kv(5, b"a")], pid=7, epoch=3, seq=3, codec=codec)  # 3-4: pid 7's last batch
    c = append(lg, [kv(6, b"a"), kv(7, b"a")], pid=8, epoch=0, seq=0, codec=codec)  # 5-6: not pid 8's last
    append(lg, [kv(6, b"b"), kv(8, b"a")], pid=8, epoch=0, seq=2, codec=codec)  # 7-8: pid 8's last
    lg.roll()
    # Supersede: k01, k02 (batch a keeps only k03), k04, k05 (all of b), k06, k07 (all of c).
    append(lg, [kv(1, b"z"), kv(2, b"z"), kv(4, b"z"), kv(5, b"z"), kv(7, b"z")])  # 9-13, no producer id
    lg.roll()
    append(lg, [kv(99, b"active")])  # 14
    original = {bt.base_offset: bt for bt in disk_batches(lg)}
    lc = new_cleaner(tmp_path, [lg])
    assert clean(lc, NOW)
    got = {bt.base_offset: bt for bt in disk_batches(lg)}

    ra = got[a[0].offset]
    oa = original[a[0].offset]
    assert [r.key for r in ra.records] == [b"k03"]
    assert (ra.last_offset_delta, ra.producer_id, ra.producer_epoch, ra.base_sequence, ra.compression) == (
        oa.last_offset_delta, 7, 3, 0, codec)
    assert ra.partition_leader_epoch == oa.partition_leader_epoch
    assert [r.timestamp for r in ra.records] == [a[2].timestamp]

    # pid 7's last batch lost every record: kept EMPTY (Kafka's RETAIN_EMPTY), same offsets
    # and sequence, so the producer's state survives a rebuild from the log.
    rb = got[b[0].offset]
    ob = original[b[0].offset]
    assert rb.record_count == 0 and rb.records == []
    assert (rb.base_offset, rb.last_offset, rb.producer_id, rb.producer_epoch, rb.base_sequence) == (3, 4, 7, 3, 3)
    assert rb.max_timestamp == ob.max_timestamp
    # pid 8's earlier batch lost every record and is not its last: dropped.
    assert c[0].offset not in got
    assert [r.key for r in got[7].records] == [b"k06", b"k08"]
    assert got[7].base_sequence == 2 and got[7].producer_id == 8

    # Rebuild producer state from the log alone (no snapshots): pid 7 continues at seq 5.
    lg.close()
    for p in lg.dir.glob("*.snapshot"):
        p.unlink()
    lg2 = make_log(tmp_path, recovery_point=lg.log_end_offset)
    out = append(lg2, [kv(1, b"next")], pid=7, epoch=3, seq=5)
    assert out[0].offset == 15
    lg2.close()


def test_compact_delete_applies_retention_and_compaction(tmp_path):
    lg = make_log(tmp_path, {"cleanup.policy": "compact,delete", "retention.ms": DAY})
    append(lg, [kv(0, b"a"), kv(1, b"a"), kv(2, b"a")], ts=NOW - 5 * DAY)  # 0-2
    lg.roll()
    append(lg, [kv(0, b"b")], ts=NOW - 4 * DAY)  # 3
    lg.roll()
    start = lg.log_end_offset
    append(lg, [kv(1, b"c"), kv(1, b"d")], ts=NOW - HOUR)  # 4-5
    lg.roll()
    append(lg, [kv(3, b"e")], ts=NOW - HOUR)  # 6
    lg.roll()
    active = lg.log_end_offset
    append(lg, [kv(4, b"f")], ts=NOW)  # 7
    # A cleaner checkpoint below the log start that retention is about to set.
    checkpoint.write_offsets(tmp_path / CLEANER_CHECKPOINT, {("t", 0): 1})
    lc = new_cleaner(tmp_path, [lg])

    removed = lg.delete_old_segments(NOW)
    assert [s.base_offset for s in removed] == [0, 3]
    for seg in removed:
        seg.close()
    assert lg.log_start_offset == start
    assert clean(lc, NOW)
    records, _ = read_all(lg)
    assert [(r[0], r[2], r[3]) for r in records] == [(5, b"k01", b"d"), (6, b"k03", b"e"), (7, b"k04", b"f")]
    assert cleaner_checkpoint(tmp_path) == {("t", 0): active}


# =========================================================================== LogManager


def test_log_manager_cleaner_retires_replaced_segments_and_survives_restart(tmp_path):
    data = tmp_path / "data"
    lm = LogManager(data, cleaner_config=CleanerConfig(enabled=False))
    lm.startup()
    lm.create_topic("ct", 1, {**BASE_CONFIG, "file.delete.delay.ms": 1000})
    lg = lm.get_log("ct", 0)
    for i in range(3):
        append(lg, [kv(1, b"v%d" % i), kv(2, b"v%d" % i)])
        lg.roll()
    append(lg, [kv(3, b"active")])
    before, _ = read_all(lg)
    assert lm.cleaner is not None
    assert lm.cleaner.clean_one(cleaner_with_clock(lm.cleaner, NOW), now_ms=NOW)
    cleaned, _ = read_all(lg)
    assert cleaned == latest_model(before, 0, 6)
    # The replaced segments wait as .deleted for file.delete.delay.ms.
    assert sorted(p.name for p in lg.dir.glob("*.log.deleted")) == [f"{b:020d}.log.deleted" for b in (0, 2, 4)]
    now = int(time.time() * 1000)
    assert lm.delete_due_segments(now) == 0
    assert lm.delete_due_segments(now + 1000) == 3
    assert temp_files(lg.dir) == []
    lm.shutdown()

    lm2 = LogManager(data, cleaner_config=CleanerConfig(enabled=False))
    lm2.startup()
    try:
        lg2 = lm2.get_log("ct", 0)
        assert read_all(lg2)[0] == cleaned
        assert lm2.cleaner is not None
        assert not lm2.cleaner.clean_one(cleaner_with_clock(lm2.cleaner, NOW), now_ms=NOW)  # checkpoint honoured
        assert_valid_indexes(lg2)
    finally:
        lm2.shutdown()


# =========================================================================== crash safety


CRASH_CONFIG = {"index.interval.bytes": 64, "delete.retention.ms": 1000}


def _crash_log(root: Path, groups: int) -> Log:
    """Four rolled segments of three batches (with tombstones, and a key never updated at
    the end of each segment, so every cleaned group ends at its last offset), then an
    active segment."""
    lg = make_log(root, CRASH_CONFIG)
    n = 0
    for s in range(4):
        for b in range(3):
            kvs = []
            for _j in range(4):
                kvs.append((b"k%d" % (n % 5), None if n % 7 == 3 else b"value-%04d" % n))
                n += 1
            if b == 2:
                kvs[-1] = (b"tail-%d" % s, b"never-updated")
            append(lg, kvs)
        lg.roll()
    append(lg, [(b"k1", b"in-active")])
    if groups == 2:
        size = max(s.size for s in lg.segments[:-1])
        lg.config = LogConfig(None, {**BASE_CONFIG, **CRASH_CONFIG, "segment.bytes": 2 * size + 10})
    return lg


@pytest.fixture(scope="module", params=[1, 2], ids=["one-group", "two-groups"])
def crash_states(request, tmp_path_factory):
    """Cleans a log while copying its directory before every rename the cleaner makes
    (the disk as a crash at that instant leaves it) and once at the end. Each state is
    (dir, groups that may be swapped in, groups that must be)."""
    root = tmp_path_factory.mktemp(f"crash-{request.param}")
    lg = _crash_log(root / "live", request.param)
    before, before_batches = read_all(lg)
    lc = new_cleaner(root / "live", [lg])
    states: list[tuple[Path, int, int]] = []
    may = must = 0
    real_rename = os.rename

    def snapshot() -> None:
        d = root / "states" / f"{len(states):02d}" / lg.dir.name
        shutil.copytree(lg.dir, d)
        states.append((d, may, must))

    def crashing_rename(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        nonlocal may, must
        if Path(src).parent == lg.dir:
            snapshot()
        real_rename(src, dst, *args, **kwargs)
        if str(src).endswith(".log.cleaned"):
            may += 1  # a .log.swap exists: Kafka may complete this group's swap
        if str(dst).endswith(".log.deleted"):
            must = may  # an old segment is gone: the swap must be completed

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(os, "rename", crashing_rename)
        assert clean(lc, NOW, drain=False)
    snapshot()
    after, after_batches = read_all(lg)
    bases = [s.base_offset for s in lg.segments[:-1]]
    assert len(bases) == request.param
    # A half-written .cleaned file (crash while the cleaner writes it).
    first = states[0][0]
    torn = root / "states" / "torn" / lg.dir.name
    shutil.copytree(first, torn)
    (cleaned_log,) = torn.glob("*.log.cleaned")
    with open(cleaned_log, "r+b") as f:
        f.truncate(cleaned_log.stat().st_size // 2)
    states.append((torn, 0, 0))
    assert len(states) >= 8
    yield {
        "states": states, "before": before, "after": after, "bases": bases, "leo": lg.log_end_offset,
        "before_batches": before_batches, "after_batches": after_batches, "config": lg.config,
    }
    drain_retired(lg)
    lg.close()


def _reopen(state: Path, tmp: Path, data: dict[str, Any]) -> Log:
    d = tmp / state.parent.name / state.name
    shutil.copytree(state, d)
    return Log(d, "t", 0, data["config"], recovery_point=data["leo"], clean_shutdown=False)


def _expected(data: dict[str, Any], swapped: int) -> list[tuple]:
    """The log with the first ``swapped`` groups cleaned and the rest as before."""
    bases = data["bases"]
    if swapped == 0:
        return data["before"]
    if swapped >= len(bases):
        return data["after"]
    boundary = bases[swapped]
    return [r for r in data["after"] if r[0] < boundary] + [r for r in data["before"] if r[0] >= boundary]


def _header(b: RecordBatch) -> tuple:
    return (b.base_offset, b.last_offset, b.attributes, b.base_timestamp, b.max_timestamp, b.record_count)


def test_crash_at_any_step_of_a_swap_loses_and_duplicates_nothing(crash_states, tmp_path):
    data = crash_states
    problems = []
    for state, may, must in data["states"]:
        lg = _reopen(state, tmp_path, data)
        try:
            records, batches = read_all(lg)
            offsets = [r[0] for r in records]
            if offsets != sorted(set(offsets)):
                problems.append(f"{state.parent.name}: duplicated or unordered offsets")
            allowed = {m: _expected(data, m) for m in range(must, may + 1)}
            if records not in allowed.values():
                lost = sorted(set(data["after"]) - set(records))
                extra = sorted(set(records) - set(data["before"]))
                problems.append(
                    f"{state.parent.name} (swapped: {must}..{may}): read back {len(records)} records, "
                    f"none of the allowed states; lost {lost[:3]}, unknown {extra[:3]}"
                )
            if records == data["after"]:
                assert [_header(b) for b in batches] == [_header(b) for b in data["after_batches"]]
            if lg.log_end_offset != data["leo"]:
                problems.append(f"{state.parent.name}: log end offset {lg.log_end_offset} != {data['leo']}")
        finally:
            lg.close()
    assert not problems, "\n".join(problems)


def test_crash_at_any_step_of_a_swap_leaves_valid_indexes(crash_states, tmp_path):
    data = crash_states
    for state, _may, _must in data["states"]:
        lg = _reopen(state, tmp_path, data)
        try:
            assert_valid_indexes(lg)
            # Every batch is found at its own offsets through the indexes.
            for b in read_all(lg)[1]:
                sl = lg.read(b.last_offset, 1, True)
                assert sl is not None and decode_batches(sl.read())[0].base_offset == b.base_offset
        finally:
            lg.close()


def test_crash_recovery_leaves_no_temporary_files(crash_states, tmp_path):
    """Kafka's LogLoader deletes .cleaned and .deleted files and renames every .swap file."""
    data = crash_states
    leftovers = {}
    for state, _may, _must in data["states"]:
        lg = _reopen(state, tmp_path, data)
        lg.close()
        left = temp_files(lg.dir)
        if left:
            swaps = [n for n in temp_files(state) if n.endswith(".swap")]
            leftovers[f"state {state.parent.name} (.swap files before load: {swaps})"] = left
    assert not leftovers, "left after load:\n" + "\n".join(f"{k}: {v}" for k, v in leftovers.items())


def test_cleaning_after_crash_recovery_converges(crash_states, tmp_path):
    data = crash_states
    for state, _may, _must in data["states"][:: max(1, len(data["states"]) // 6)]:
        lg = _reopen(state, tmp_path, data)
        try:
            lc = new_cleaner(lg.dir.parent, [lg])
            clean(lc, NOW)
            records, _ = read_all(lg)
            assert records == data["after"], state.parent.name
            assert_valid_indexes(lg)
        finally:
            lg.close()


# =========================================================================== abort and pause


def _abortable_log(root: Path) -> Log:
    lg = make_log(root)
    for i in range(3):
        append(lg, [kv(1, b"v%d" % i), kv(2, b"v%d" % i)])
        lg.roll()
    append(lg, [kv(3, b"active")])
    return lg


def _dir_contents(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.suffix in (".log", ".index", ".timeindex") or p.name.endswith(TEMP_SUFFIXES)}


def _blocked_round(lc: LogCleaner, lg: Log, phase: str) -> tuple[threading.Thread, threading.Event, threading.Event, list[Any]]:
    """Runs a round in a thread that stops at a check for abortion: the first one
    ("map", while building the offset map) or the one right after the .swap files were
    written ("swap"). Returns (thread, reached, proceed, result)."""
    reached, proceed = threading.Event(), threading.Event()
    result: list[Any] = []

    def check(log: Log) -> None:
        at_swap = any(p.name.endswith(".log.swap") for p in log.dir.iterdir())
        if not reached.is_set() and (phase == "map" or at_swap):
            reached.set()
            assert proceed.wait(10)
        lc.manager.check_aborted(log)

    def run() -> None:
        try:
            result.append(lc.clean_one(cleaner_with_clock(lc, NOW, check), now_ms=NOW))
        except BaseException as e:  # reported to the test
            result.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    assert reached.wait(10), "the round never reached the abort point"
    return t, reached, proceed, result


def _wait_aborted(lc: LogCleaner, tp: tuple[str, int]) -> None:
    cond = lc.manager._lock  # notified when an abort is asked for
    with cond:
        assert cond.wait_for(lambda: tp in lc.manager.aborted, 10), "abort_and_pause did not mark the log aborted"


@pytest.mark.parametrize("phase", ["map", "swap"])
def test_abort_and_pause_stops_a_cleaning_in_progress(tmp_path, phase):
    lg = _abortable_log(tmp_path)
    before = _dir_contents(lg.dir)
    records_before, _ = read_all(lg)
    lc = new_cleaner(tmp_path, [lg])
    t, _reached, proceed, result = _blocked_round(lc, lg, phase)
    aborter = threading.Thread(target=lc.manager.abort_and_pause, args=("t", 0), daemon=True)
    aborter.start()
    _wait_aborted(lc, ("t", 0))
    assert aborter.is_alive(), "abort_and_pause must wait for the round in progress"
    proceed.set()
    t.join(10)
    aborter.join(10)
    assert not t.is_alive() and not aborter.is_alive()
    assert result == [False]
    # Nothing changed: no files swapped in or left behind, no checkpoint.
    assert _dir_contents(lg.dir) == before
    assert read_all(lg)[0] == records_before
    assert not (tmp_path / CLEANER_CHECKPOINT).exists()
    # Paused: never picked; resumed: cleaned.
    assert not clean(lc, NOW)
    lc.manager.resume("t", 0)
    assert clean(lc, NOW)
    assert read_all(lg)[0] == latest_model(records_before, 0, 6)


def test_deleting_a_topic_aborts_its_cleaning(tmp_path):
    data = tmp_path / "data"
    lm = LogManager(data, cleaner_config=CleanerConfig(enabled=False))
    lm.startup()
    try:
        lm.create_topic("gone", 1, dict(BASE_CONFIG))
        lg = lm.get_log("gone", 0)
        for i in range(3):
            append(lg, [kv(1, b"v%d" % i)])
            lg.roll()
        append(lg, [kv(3, b"active")])
        lc = lm.cleaner
        assert lc is not None
        t, _reached, proceed, result = _blocked_round(lc, lg, "swap")
        renamed: list[Path] = []
        deleter = threading.Thread(target=lambda: renamed.extend(lm.delete_topic("gone")), daemon=True)
        deleter.start()
        _wait_aborted(lc, ("gone", 0))
        proceed.set()
        t.join(10)
        deleter.join(10)
        assert not t.is_alive() and not deleter.is_alive()
        assert result == [False]
        assert len(renamed) == 1 and renamed[0].name.endswith("-delete")
        assert temp_files(renamed[0]) == []
        assert ("gone", 0) not in cleaner_checkpoint(data)
        assert ("gone", 0) not in lc.manager.in_progress and ("gone", 0) not in lc.manager.paused
        assert not lc.clean_one(cleaner_with_clock(lc, NOW), now_ms=NOW)
        lm.remove_dirs(renamed)
    finally:
        with contextlib.suppress(Exception):
            lm.shutdown()


# =========================================================================== byte identity


def _golden_log(root: Path) -> Log:
    """A deterministic multi-MB compacted log: short and long keys, tombstones, three codecs,
    idempotent producers, committed and aborted transactions, 1 MiB segments."""
    import random

    rnd = random.Random(20261126)
    lg = make_log(root, {"segment.bytes": 1 << 20, "segment.index.bytes": 1 << 14})
    codecs = [NONE, GZIP, ZSTD]
    seqs: dict[int, int] = {}
    n = 0
    while lg.size_in_bytes < 5_000_000:
        kind = rnd.random()
        size = rnd.randint(1, 40)
        kvs = []
        for _ in range(size):
            k = rnd.randrange(3000)
            key = b"k%d" % k if k % 3 else b"a-longer-key-of-more-than-16-bytes-%06d" % k
            value = None if rnd.random() < 0.03 else rnd.randbytes(rnd.randint(10, 600))
            kvs.append((key, value))
        codec = codecs[n % 3]
        first = lg.log_end_offset
        ts = T0 + first
        if kind < 0.15:
            pid = 7 + n % 2
            seq = seqs.get(pid, 0)
            recs = [Record(i, ts + i, k, v) for i, (k, v) in enumerate(kvs)]
            data = bytearray(encode_batch(recs, producer_id=pid, producer_epoch=0, base_sequence=seq, compression=codec,
                                          is_transactional=True))
            lg.append_as_leader(data, validate_batches(data), now_ms=ts)
            seqs[pid] = seq + len(recs)
            lg.append_transaction_marker(pid, 0, 0, rnd.random() < 0.5, now_ms=ts + len(recs))
        elif kind < 0.3:
            pid = 20 + n % 3
            seq = seqs.get(pid, 0)
            append(lg, kvs, pid=pid, epoch=1, seq=seq, codec=codec)
            seqs[pid] = seq + len(kvs)
        else:
            append(lg, kvs, codec=codec)
        n += 1
    lg.roll()
    append(lg, [kv(1, b"active")])
    return lg


def _dir_digest(lg: Log, root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(lg.dir.iterdir()):
        if p.suffix in (".log", ".index", ".timeindex", ".txnindex"):
            h.update(p.name.encode())
            h.update(p.read_bytes())
    h.update((root / CLEANER_CHECKPOINT).read_bytes())
    return h.hexdigest()


# sha256 of the cleaned files (and checkpoint) as the cleaner before the streaming rewrite
# (at commit 52762bf) produced them on _golden_log's input.
GOLDEN_DEFAULT = (
    "60ed642bcccab0f23e7d6aaac7069edd4c0d694de65fd51a7c7699ab2f88b334",
    "abd8c8d3bd4534c06ca30bfbcd25ed584a4a7850e346e2b6736707e3d9d010c2",
)
GOLDEN_SMALL_MAP = "b820f2706f55e86ccf3b4196f56b49ff75ee678504478b5ff6dd42d0a6b0285e"


def test_cleaning_is_byte_identical_to_the_reference_cleaner(tmp_path):
    lg = _golden_log(tmp_path)
    lc = new_cleaner(tmp_path, [lg])
    assert clean(lc, NOW)
    first = _dir_digest(lg, tmp_path)
    # Nothing dirty: Kafka's selection would not clean it again (see
    # test_an_idle_log_keeps_expired_tombstones_until_its_next_real_cleaning), so the second
    # pass is forced. Tombstones and markers past their horizon go.
    assert force_clean(lc, cleaner_with_clock(lc, NOW + 2 * DAY), NOW + 2 * DAY)
    second = _dir_digest(lg, tmp_path)
    assert (first, second) == GOLDEN_DEFAULT
    assert_valid_indexes(lg)


def test_cleaning_with_a_small_offset_map_is_byte_identical_to_the_reference_cleaner(tmp_path):
    lg = _golden_log(tmp_path)
    lc = new_cleaner(tmp_path, [lg], dedupe_buffer_size=24 * 1000)
    rounds = 0
    while clean(lc, NOW):
        rounds += 1
    assert rounds > 3
    assert _dir_digest(lg, tmp_path) == GOLDEN_SMALL_MAP


def clean_configured(lc: LogCleaner, now: int, *, drain: bool = True) -> bool:
    """``clean`` with the LogCleaner's own per-thread Cleaner (its I/O buffer and throttler)."""
    cleaned = lc.clean_one(lc.new_cleaner(now=lambda: now), now_ms=now)
    if drain:
        for lg in lc.logs():
            drain_retired(lg)
    return cleaned


@pytest.mark.parametrize("io_buffer_size", [4096, 65536], ids=["4k-grown-for-big-batches", "64k"])
def test_streaming_through_small_io_buffers_is_byte_identical(tmp_path, io_buffer_size):
    """log.cleaner.io.buffer.size (half of it reads, half writes): batches larger than the
    read buffer grow it; the cleaned files are the reference cleaner's, byte for byte, and no
    read covers a whole segment."""
    lg = _golden_log(tmp_path)
    largest_segment = max(s.size for s in lg.segments)
    lc = new_cleaner(tmp_path, [lg], io_buffer_size=io_buffer_size)
    assert lc.io_buffer_size == io_buffer_size // 2
    c1 = lc.new_cleaner(now=lambda: NOW)
    assert lc.clean_one(c1, now_ms=NOW)
    drain_retired(lg)
    first = _dir_digest(lg, tmp_path)
    c2 = lc.new_cleaner(now=lambda: NOW + 2 * DAY)
    assert force_clean(lc, c2, NOW + 2 * DAY)  # nothing dirty: forced, as in the test above
    assert (first, _dir_digest(lg, tmp_path)) == GOLDEN_DEFAULT
    biggest_batch = max(b.size for b in disk_batches(lg))
    assert c1.max_read_size <= max(io_buffer_size // 2, 2 * biggest_batch) < largest_segment
    assert_valid_indexes(lg)


def test_offset_map_memory_is_its_hash_array():
    """24 bytes a slot, fixed at creation: no Python object per key (tracemalloc sees no
    growth with the entries), at most slots x load factor entries."""
    import tracemalloc

    memory = 24 * 10_000
    omap = SkimpyOffsetMap(memory, 0.9)
    assert omap.capacity == 10_000 and omap.slots == 9000
    assert omap.allocated_bytes == 24 * omap.capacity <= memory
    keys = [b"key-%d" % i for i in range(4500)] + [b"a-key-longer-than-sixteen-bytes-%d" % i for i in range(4500)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i, key in enumerate(keys):
            omap.put(key, i)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 4096, f"{grown} bytes of Python objects for {len(keys)} entries"
    assert omap.size == 9000 and omap.full
    with pytest.raises(OverflowError):
        omap.put(b"one-more", 1)
    omap.put(keys[17], 12345)  # an update of a present key still fits
    assert omap.get(keys[17]) == 12345 and omap.get(keys[-1]) == len(keys) - 1 and omap.get(b"absent") == -1
    assert omap.utilization == pytest.approx(0.9)
    omap.clear()
    assert omap.size == 0 and omap.get(keys[0]) == -1 and omap.allocated_bytes == 24 * omap.capacity


def test_offset_map_capacity_rule_is_kafkas():
    # Kafka: slots = memory / 24, full at slots x load factor.
    assert SkimpyOffsetMap(134217728, 0.9).slots == int(134217728 // 24 * 0.9)
    assert SkimpyOffsetMap(230, 0.9).slots == 8
    assert SkimpyOffsetMap(24 * 100, 1.0).slots == 99  # one slot always stays free (probing ends)


def test_an_abort_is_noticed_at_the_next_read_buffer(tmp_path):
    """The abort check runs per read buffer, not per segment: aborting while the first
    segment is being mapped stops the round within one buffer."""
    lg = _golden_log(tmp_path)
    before = _dir_contents(lg.dir)
    lc = new_cleaner(tmp_path, [lg], io_buffer_size=8192)
    calls = 0

    def check(log: Log) -> None:
        nonlocal calls
        calls += 1
        if calls == 5:
            lc.manager.aborted.add((log.topic, log.partition))
        lc.manager.check_aborted(log)

    cleaner = Cleaner(SkimpyOffsetMap(lc.map_memory), check, now=lambda: NOW, io_buffer_size=lc.io_buffer_size)
    assert not lc.clean_one(cleaner, now_ms=NOW)
    assert calls == 5  # the 5th check (4th buffer of the first segment) raised
    assert cleaner.max_read_size <= 8192 * 4
    assert _dir_contents(lg.dir) == before
    assert not (tmp_path / CLEANER_CHECKPOINT).exists()


def test_abort_and_pause_returns_fast_during_a_real_cleaning(tmp_path):
    lg = _golden_log(tmp_path)
    lc = new_cleaner(tmp_path, [lg], io_buffer_size=65536, max_io_bytes_per_second=2_000_000)  # ~5 s of cleaning
    lc.throttler.check_interval_ms = 20
    result: list[Any] = []
    throttled = threading.Event()  # set as the cleaning (in progress) starts a throttle sleep
    throttle = lc.throttler.maybe_throttle

    def noting_throttle(observed: float, sleep: Any = None) -> None:
        inner = sleep or lc.throttler._sleep

        def noted(seconds: float) -> None:
            throttled.set()
            inner(seconds)
        throttle(observed, noted)

    lc.throttler.maybe_throttle = noting_throttle
    t = threading.Thread(target=lambda: result.append(clean_configured(lc, NOW, drain=False)), daemon=True)
    t.start()
    assert throttled.wait(10) and ("t", 0) in lc.manager.in_progress
    t0 = time.monotonic()
    lc.manager.abort_and_pause("t", 0)
    waited = time.monotonic() - t0
    t.join(10)
    assert result == [False]
    assert waited < 0.5, f"abort_and_pause waited {waited:.2f} s"
    lc.manager.resume("t", 0)


def test_throttler_keeps_the_average_rate(tmp_path):
    from kafka_sidecar.storage.throttler import Throttler

    now = [0.0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    th = Throttler(1000.0, 300, clock=lambda: now[0], sleep=sleep)
    for _ in range(100):
        now[0] += 0.01
        th.maybe_throttle(100)  # 10 000 B/s offered
    assert 100 * 100 / now[0] == pytest.approx(1000.0, rel=0.1)
    assert slept and th.throttled_ms > 0
    unlimited = Throttler(1.7976931348623157e308)
    assert not unlimited.enabled
    unlimited.maybe_throttle(10**12)


def test_log_cleaner_io_max_bytes_per_second_throttles_a_cleaning(tmp_path):
    lg = make_log(tmp_path, {"segment.bytes": 1 << 20})
    for b in range(600):
        append(lg, [kv(b * 10 + j % 10, b"x" * 1000) for j in range(10)])
    lg.roll()
    append(lg, [kv(1, b"active")])
    rate = 20_000_000
    lc = new_cleaner(tmp_path, [lg], io_buffer_size=65536, max_io_bytes_per_second=rate)
    # Kafka checks the rate every 300 ms; this cleaning is shorter than that unthrottled.
    lc.throttler.check_interval_ms = 20
    t0 = time.monotonic()
    assert clean_configured(lc, NOW)
    elapsed = time.monotonic() - t0
    stats = lc.last_stats
    assert stats is not None
    io_bytes = 2 * stats.bytes_read + stats.bytes_written  # read twice (map, then copy), written once
    # Unthrottled, this is ~50 MB/s; the bytes of the last, unfinished period are never slept
    # for (up to 20 ms of unthrottled I/O, a large share of this small log), so they are left out.
    throttled_bytes = io_bytes - lc.throttler.period_bytes
    assert throttled_bytes > io_bytes / 2
    assert throttled_bytes / elapsed <= rate * 1.1, f"{throttled_bytes / elapsed:.0f} B/s with a {rate} B/s limit"
    assert lc.throttler.throttled_ms > 0


def _corrupt_middle(seg: Any) -> None:
    with open(seg.log_path, "r+b") as f:
        f.seek(seg.size // 2)
        f.write(b"\xff" * 64)


def test_a_failing_log_is_marked_uncleanable_and_the_others_are_cleaned(tmp_path, caplog):
    bad = make_log(tmp_path, topic="bad")
    good = make_log(tmp_path, topic="good")
    for lg, n in ((bad, 6), (good, 3)):
        for i in range(n):
            append(lg, [kv(1, b"v%d" % i), kv(2, b"v%d" % i)])
            lg.roll()
        append(lg, [kv(3, b"active")])
    big = bad.segments[0]
    _corrupt_middle(big)  # a garbage batch: decoding raises
    lc = new_cleaner(tmp_path, [bad, good])
    with caplog.at_level("WARNING", logger="kafka_sidecar.storage.cleaner_manager"):
        assert not clean(lc, NOW)  # the dirtiest (bad) log raised
        assert lc.uncleanable_partitions_count == 1 and ("bad", 0) in lc.manager.uncleanable
        assert clean(lc, NOW)  # the other log is cleaned
        assert cleaner_checkpoint(tmp_path) == {("good", 0): good.segments[-1].base_offset}
        for _ in range(3):
            assert not clean(lc, NOW)  # bad is skipped, never raised again
    warnings = [r for r in caplog.records if "uncleanable" in r.getMessage()]
    assert len(warnings) == 1 and "bad-0" in warnings[0].getMessage()
    assert lc.uncleanable_bytes > 0
    assert ("bad", 0) not in lc.manager.in_progress
    # A restart (a new cleaner) retries it, as Kafka's in-memory set is lost.
    lc2 = new_cleaner(tmp_path, [bad, good])
    assert not clean(lc2, NOW)
    assert lc2.uncleanable_partitions_count == 1


def test_cleaner_gauges(tmp_path):
    lg = _abortable_log(tmp_path)
    lc = new_cleaner(tmp_path, [lg], dedupe_buffer_size=24 * 100)
    assert lc.max_buffer_utilization_percent == 0 and lc.uncleanable_partitions_count == 0
    assert clean(lc, NOW)
    assert lc.max_buffer_utilization_percent == 2  # 2 keys in 100 slots
    assert lc.max_dirty_percent == 100  # nothing was clean before this round
    assert 0 <= lc.time_since_last_run_ms < 5000
    assert lc.max_clean_time_secs == 0
    assert 0 < lc.cleaner_recopy_percent < 100
    assert lc.dead_thread_count == 0


def test_log_cleaner_threads_split_the_buffers_and_run(tmp_path):
    lc = LogCleaner(tmp_path, list, threads=3, dedupe_buffer_size=3 << 20, io_buffer_size=3 * 2 * 4096, backoff_ms=10)
    assert lc.map_memory == 1 << 20 and lc.io_buffer_size == 4096
    lc.start()
    try:
        # This cleaner's own threads (another test's cleaner may still be winding down).
        ours = [t for t in threading.enumerate() if t in lc._threads]
        assert sorted(t.name for t in ours) == [f"kafka-log-cleaner-thread-{i}" for i in range(3)]
        assert lc.dead_thread_count == 0
    finally:
        lc.stop()


def test_switching_a_topic_from_compact_to_delete_aborts_its_cleaning(tmp_path):
    data = tmp_path / "data"
    lm = LogManager(data, cleaner_config=CleanerConfig(enabled=False))
    lm.startup()
    try:
        lm.create_topic("c", 1, dict(BASE_CONFIG))
        lg = lm.get_log("c", 0)
        for i in range(3):
            append(lg, [kv(1, b"v%d" % i)])
            lg.roll()
        append(lg, [kv(3, b"active")])
        lc = lm.cleaner
        assert lc is not None
        t, _reached, proceed, result = _blocked_round(lc, lg, "map")
        alter = threading.Thread(target=lambda: lm.alter_topic_configs("c", {**BASE_CONFIG, "cleanup.policy": "delete"}), daemon=True)
        alter.start()
        _wait_aborted(lc, ("c", 0))
        proceed.set()
        t.join(10)
        alter.join(10)
        assert not t.is_alive() and not alter.is_alive()
        assert result == [False]
        assert ("c", 0) not in lc.manager.paused  # aborted, not paused (Kafka's abortCleaning)
        assert not lc.clean_one(cleaner_with_clock(lc, NOW), now_ms=NOW)  # no longer compacted
    finally:
        with contextlib.suppress(Exception):
            lm.shutdown()


def test_a_crash_while_writing_a_cleaned_segment_loses_nothing(tmp_path):
    """Failpoint ``cleaner.clean.after_buffer_write``: SIGKILL after a read buffer's batches
    went to the ``.cleaned`` segment. The reopened log drops the partial ``.cleaned`` files,
    holds what it held, and the next cleaning writes the reference cleaner's bytes."""
    import signal
    import subprocess
    import sys

    lg = _golden_log(tmp_path)
    records_before, _ = read_all(lg)
    lg.close()
    script = (
        "import sys; sys.path.insert(0, 'tests/unit'); from pathlib import Path; import test_cleaner as t\n"
        f"root = Path({str(tmp_path)!r}); lg = t.make_log(root, {{'segment.bytes': 1 << 20, 'segment.index.bytes': 1 << 14}})\n"
        "lc = t.new_cleaner(root, [lg], io_buffer_size=65536); lc.clean_one(lc.new_cleaner(now=lambda: t.NOW), now_ms=t.NOW)\n"
    )
    env = {**os.environ, "KAFKA_SIDECAR_CRASH_AT": "cleaner.clean.after_buffer_write:3"}
    proc = subprocess.run([sys.executable, "-c", script], env=env, cwd=Path(__file__).parents[2], capture_output=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    assert any(p.name.endswith(".cleaned") for p in (tmp_path / "t-0").iterdir())
    lg = make_log(tmp_path, {"segment.bytes": 1 << 20, "segment.index.bytes": 1 << 14})
    assert temp_files(lg.dir) == []
    assert read_all(lg)[0] == records_before
    lc = new_cleaner(tmp_path, [lg])
    assert clean(lc, NOW)
    # The same log closed and reopened without a crash, then cleaned: the same bytes.
    ref_root = tmp_path / "ref"
    _golden_log(ref_root).close()
    ref = make_log(ref_root, {"segment.bytes": 1 << 20, "segment.index.bytes": 1 << 14})
    assert clean(new_cleaner(ref_root, [ref]), NOW)
    assert _dir_digest(lg, tmp_path) == _dir_digest(ref, ref_root)


# --------------------------------------------------------------------------- retention coordinated with cleaning


def _expired_compact_delete_log(root: Path, topic: str = "t") -> Log:
    """compact,delete with retention.ms=1 day: segments 0 and 3 expired, 4 and the active one not."""
    lg = make_log(root, {"cleanup.policy": "compact,delete", "retention.ms": DAY}, topic=topic)
    append(lg, [kv(0, b"a"), kv(1, b"a"), kv(2, b"a")], ts=NOW - 5 * DAY)  # 0-2
    lg.roll()
    append(lg, [kv(0, b"b")], ts=NOW - 4 * DAY)  # 3
    lg.roll()
    append(lg, [kv(1, b"c")], ts=NOW - HOUR)  # 4
    lg.roll()
    append(lg, [kv(4, b"f")], ts=NOW)  # 5
    return lg


def test_compacted_logs_retention_runs_in_the_cleaner_not_during_their_cleaning(tmp_path):
    """Kafka's deletableLogs/doneDeleting: the cleaner thread deletes from compacted logs, never
    from one it is cleaning (in progress), and reports the removed segments to its owner."""
    lg = _expired_compact_delete_log(tmp_path)
    reported: list[tuple[str, list[int], int]] = []
    lc = LogCleaner(tmp_path, lambda: [lg], enabled=False,
                    on_segments_deleted=lambda log_, segs, now: reported.append((log_.topic, [s.base_offset for s in segs], now)))
    ltc = lc.manager.grab_filthiest_log([lg], NOW)  # a cleaning in progress
    assert ltc is not None
    assert lc.delete_old_segments(NOW) == 0
    assert [s.base_offset for s in lg.segments] == [0, 3, 4, 5] and reported == []
    lc.manager.done_cleaning(lg, None)
    assert lc.delete_old_segments(NOW) == 2
    assert reported == [("t", [0, 3], NOW)]
    assert [s.base_offset for s in lg.segments] == [4, 5] and lg.log_start_offset == 4
    assert ("t", 0) not in lc.manager.in_progress
    # The retention task leaves compacted logs alone.
    with lc.retention_logs([lg]) as deletable:
        assert deletable == []


def test_retention_task_pauses_cleaning_of_the_logs_it_deletes_from(tmp_path):
    """Kafka's pauseCleaningForNonCompactedPartitions: a log the retention task holds is not
    picked by the cleaner even if it turns compacted meanwhile; it is once the task is done."""
    lg = make_log(tmp_path, {"cleanup.policy": "delete"})
    append(lg, [kv(1, b"a"), kv(2, b"a")])
    lg.roll()
    append(lg, [kv(1, b"b")])
    lg.roll()
    append(lg, [kv(9, b"active")])
    lc = LogCleaner(tmp_path, lambda: [lg], threads=1)  # threads, not started: the coordinating cleaner
    with lc.retention_logs([lg]) as deletable:
        assert deletable == [lg]
        lg.config = LogConfig(None, dict(BASE_CONFIG))  # switched to compact during the pass
        assert lc.manager.grab_filthiest_log([lg], NOW) is None
        assert lc.manager.deletable_logs([lg]) == []
    ltc = lc.manager.grab_filthiest_log([lg], NOW)
    assert ltc is not None and ltc.log is lg
    lc.manager.done_cleaning(lg, None)


def test_an_uncleanable_log_failing_retention_does_not_stop_the_others(tmp_path):
    bad = _expired_compact_delete_log(tmp_path, "bad")
    good = _expired_compact_delete_log(tmp_path, "good")

    def broken(now_ms: int) -> list[Any]:
        raise OSError("disk gone")

    bad.delete_old_segments = broken  # type: ignore[method-assign]
    lc = new_cleaner(tmp_path, [bad, good])
    assert lc.delete_old_segments(NOW) == 2
    assert lc.manager.uncleanable == {("bad", 0)}
    assert [s.base_offset for s in good.segments] == [4, 5]
    assert not lc.manager.in_progress
    for s in good.take_retired_segments():
        s.close()


def test_log_manager_retention_task_leaves_compacted_logs_to_the_cleaner(tmp_path):
    """LogManager.cleanup_logs deletes from non-compacted logs only (Kafka's cleanupLogs); the
    cleaner thread's pass schedules the compacted log's segments for file.delete.delay.ms."""
    lm = LogManager(tmp_path / "data", cleaner_config=CleanerConfig(enabled=False))
    lm.startup()
    try:
        base = {"segment.bytes": 1 << 20, "retention.ms": DAY, "file.delete.delay.ms": 0}
        lm.create_topic("cd", 1, {**base, "cleanup.policy": "compact,delete"})
        lm.create_topic("d", 1, {**base, "cleanup.policy": "delete"})
        for name in ("cd", "d"):
            lg = lm.get_log(name, 0)
            assert lg is not None
            append(lg, [kv(1, b"old")], ts=NOW - 5 * DAY)
            lg.roll()
            append(lg, [kv(2, b"new")], ts=NOW)
        assert lm.cleanup_logs(NOW) == 1
        cd, d = lm.get_log("cd", 0), lm.get_log("d", 0)
        assert cd is not None and d is not None
        assert d.log_start_offset == 1 and cd.log_start_offset == 0
        assert lm.cleaner is not None
        assert lm.cleaner.delete_old_segments(NOW) == 1
        assert cd.log_start_offset == 1
        assert any(p.name.endswith(".deleted") for p in cd.dir.iterdir())
        assert lm.delete_due_segments(NOW) == 1
        assert not any(p.name.endswith(".deleted") for p in cd.dir.iterdir())
    finally:
        lm.shutdown()
