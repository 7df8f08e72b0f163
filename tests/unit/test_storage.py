"""Storage engine unit tests (no sockets): indexes, segments, Log, checkpoints, LogManager.

Expected behaviour is Apache Kafka's (storage/src/main/java/.../internals/log/):
OffsetIndex/TimeIndex, LogSegment.append/read/recover/shouldRoll, UnifiedLog roll
rules, OffsetCheckpointFile, PartitionMetadataFile, CleanShutdownFileHandler.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from kafka_sidecar.protocol.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD
from kafka_sidecar.protocol.record_batch import iter_headers, validate_batches
from kafka_sidecar.protocol.records import Record, decode_batches, encode_batch
from kafka_sidecar.storage import checkpoint
from kafka_sidecar.storage.index import OffsetIndex, TimeIndex
from kafka_sidecar.storage.log import Log, OffsetOutOfRangeError
from kafka_sidecar.storage.log_config import LogConfig
from kafka_sidecar.storage.log_manager import (
    CLEAN_SHUTDOWN_FILE,
    DataDirError,
    LogManager,
)
from kafka_sidecar.storage.metadata_files import parse_kafka_uuid

TS0 = 1_700_000_000_000
INDEX_ENTRY = struct.Struct(">ii")
TIME_ENTRY = struct.Struct(">qi")


# --------------------------------------------------------------------------- helpers


def batch(n: int = 1, ts: int = TS0, *, value_size: int = 10, ts_step: int = 0, compression: int = NONE,
          timestamps: list[int] | None = None) -> bytes:
    """One client-style batch (baseOffset 0, partitionLeaderEpoch -1) of ``n`` records."""
    tss = timestamps if timestamps is not None else [ts + i * ts_step for i in range(n)]
    return encode_batch(
        [Record(i, tss[i], b"key-%d" % i, b"v" * value_size) for i in range(n)],
        compression=compression,
    )


def append(lg: Log, *batches: bytes, now_ms: int | None = None):
    """One produce request holding ``batches``: append_as_leader(bytearray, validate_batches)."""
    buf = bytearray(b"".join(batches))
    return lg.append_as_leader(buf, validate_batches(buf), now_ms=now_ms)


def new_log(path: Path, **overrides) -> Log:
    configs = {k.replace("_", "."): v for k, v in overrides.items()}
    return Log(path, "t", 0, LogConfig(None, configs))


def config(**overrides) -> LogConfig:
    return LogConfig(None, {k.replace("_", "."): v for k, v in overrides.items()})


def seg_name(base: int, suffix: str) -> str:
    return f"{base:020d}{suffix}"


def read_index_file(path: Path) -> list[tuple[int, int]]:
    return list(INDEX_ENTRY.iter_unpack(path.read_bytes()))


def read_time_index_file(path: Path) -> list[tuple[int, int]]:
    return list(TIME_ENTRY.iter_unpack(path.read_bytes()))


def file_headers(path: Path):
    return [h for _, h in iter_headers(path.read_bytes())]


def read_all(lg: Log, start: int | None = None) -> list[Record]:
    """Every record from ``start`` (default log start) to the high watermark, through Log.read."""
    offset = lg.log_start_offset if start is None else start
    out: list[Record] = []
    while offset < lg.high_watermark:
        sl = lg.read(offset, 64 * 1024, True)
        assert sl is not None, f"no data at offset {offset} below the high watermark {lg.high_watermark}"
        batches = decode_batches(sl.read())
        assert batches, f"read at {offset} returned no complete batch"
        for b in batches:
            out += [r for r in b.records if r.offset >= offset]
        offset = batches[-1].next_offset
    return out


def segment_files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.suffix in (".log", ".index", ".timeindex")}


# =========================================================================== OffsetIndex


def test_offset_index_append_lookup_and_file_format(tmp_path):
    idx = OffsetIndex(tmp_path / "00000000000000000100.index", 100, 80, writable=True)
    try:
        # Preallocated to segment.index.bytes (rounded down to whole entries).
        assert os.path.getsize(idx.path) == 80
        assert idx.entries == 0 and idx.max_entries == 10
        assert idx.lookup(150) == (100, 0)  # empty: (base offset, 0)
        for off, pos in [(105, 4200), (110, 8500), (120, 13000)]:
            idx.append(off, pos)
        assert idx.entries == 3 and idx.last_offset == 120
        assert idx.lookup(99) == (100, 0)  # below the first entry
        assert idx.lookup(104) == (100, 0)
        assert idx.lookup(105) == (105, 4200)
        assert idx.lookup(109) == (105, 4200)
        assert idx.lookup(110) == (110, 8500)
        assert idx.lookup(10**9) == (120, 13000)
        # int32 offset relative to the base, int32 position, big-endian; rest preallocated zeros.
        raw = idx.path.read_bytes()
        assert raw[:24] == INDEX_ENTRY.pack(5, 4200) + INDEX_ENTRY.pack(10, 8500) + INDEX_ENTRY.pack(20, 13000)
        assert raw[24:] == b"\0" * 56
        with pytest.raises(ValueError):
            idx.append(120, 20000)  # not larger than the last offset
        with pytest.raises(ValueError):
            idx.append(119, 20000)
    finally:
        idx.close()


def test_offset_index_full_and_trim(tmp_path):
    idx = OffsetIndex(tmp_path / "00000000000000000000.index", 0, 27, writable=True)  # 27 // 8 = 3 entries
    try:
        assert os.path.getsize(idx.path) == 24
        idx.append(1, 100)
        idx.append(2, 200)
        assert not idx.is_full
        idx.append(3, 300)
        assert idx.is_full
        idx.trim()
        assert os.path.getsize(idx.path) == 24
    finally:
        idx.close()
    idx = OffsetIndex(tmp_path / "00000000000000000010.index", 10, 800, writable=True)
    try:
        idx.append(12, 5000)
        idx.trim()
        assert idx.path.read_bytes() == INDEX_ENTRY.pack(2, 5000)
    finally:
        idx.close()


def test_offset_index_truncate_to(tmp_path):
    idx = OffsetIndex(tmp_path / "00000000000000000000.index", 0, 800, writable=True)
    try:
        for i in range(1, 6):
            idx.append(i * 10, i * 1000)
        idx.truncate_to(35)  # removes entries with offset >= 35
        assert idx.keys == [10, 20, 30] and idx.values == [1000, 2000, 3000]
        idx.truncate_to(30)  # exact match is removed too
        assert idx.keys == [10, 20]
        idx.truncate_to(1000)  # nothing above
        assert idx.keys == [10, 20]
        assert idx.lookup(35) == (20, 2000)
        idx.append(25, 2500)  # appending continues after the kept entries
        assert read_index_file(idx.path)[:4] == [(10, 1000), (20, 2000), (25, 2500), (0, 0)]
        idx.truncate_to(0)
        assert idx.entries == 0 and idx.lookup(25) == (0, 0)
    finally:
        idx.close()


@pytest.mark.parametrize("writable", [True, False])
def test_offset_index_reload(tmp_path, writable):
    path = tmp_path / "00000000000000000500.index"
    idx = OffsetIndex(path, 500, 1024, writable=True)
    for off, pos in [(510, 4100), (530, 8300), (531, 12400)]:
        idx.append(off, pos)
    idx.close()  # not trimmed: a preallocated file with a zero tail, as after a crash
    assert os.path.getsize(path) == 1024
    idx = OffsetIndex(path, 500, 1024, writable=writable)
    try:
        assert idx.entries == 3
        assert list(zip(idx.keys, idx.values, strict=True)) == [(510, 4100), (530, 8300), (531, 12400)]
        assert idx.lookup(520) == (510, 4100)
        if writable:
            idx.append(540, 16500)
            assert read_index_file(path)[:5] == [(10, 4100), (30, 8300), (31, 12400), (40, 16500), (0, 0)]
    finally:
        idx.close()
    # A trimmed file reloads the same.
    idx = OffsetIndex(path, 500, 1024, writable=True)
    idx.trim()
    n = idx.entries
    idx.close()
    assert os.path.getsize(path) == n * 8
    idx = OffsetIndex(path, 500, 1024, writable=False)
    try:
        assert idx.entries == n and idx.keys[:3] == [510, 530, 531]
    finally:
        idx.close()


def test_offset_index_reload_after_truncate_does_not_resurrect_entries(tmp_path):
    path = tmp_path / "00000000000000000000.index"
    idx = OffsetIndex(path, 0, 800, writable=True)
    for i in range(1, 6):
        idx.append(i, i * 5000)
    idx.truncate_to(3)
    idx.close()
    idx = OffsetIndex(path, 0, 800, writable=True)
    try:
        assert idx.keys == [1, 2]
    finally:
        idx.close()


def test_offset_index_reload_fully_zero_preallocated_file(tmp_path):
    path = tmp_path / "00000000000000000000.index"
    OffsetIndex(path, 0, 800, writable=True).close()
    assert path.read_bytes() == b"\0" * 800
    idx = OffsetIndex(path, 0, 800, writable=True)
    try:
        assert idx.entries == 0 and idx.lookup(10) == (0, 0)
    finally:
        idx.close()


# =========================================================================== TimeIndex


def test_time_index_maybe_append_lookup_and_file_format(tmp_path):
    idx = TimeIndex(tmp_path / "00000000000000000100.timeindex", 100, 120, writable=True)
    try:
        assert os.path.getsize(idx.path) == 120 and idx.max_entries == 10
        assert idx.last_entry == (-1, 100)
        assert idx.lookup(TS0) == (-1, 100)
        idx.maybe_append(TS0 + 10, 105)
        idx.maybe_append(TS0 + 10, 107)  # same timestamp: no entry
        idx.maybe_append(TS0 + 30, 110)
        idx.maybe_append(TS0 + 50, 120)
        assert list(zip(idx.keys, idx.values, strict=True)) == [(TS0 + 10, 105), (TS0 + 30, 110), (TS0 + 50, 120)]
        assert idx.last_entry == (TS0 + 50, 120)
        assert idx.lookup(TS0) == (-1, 100)  # below the first: (NO_TIMESTAMP, base offset)
        assert idx.lookup(TS0 + 10) == (TS0 + 10, 105)
        assert idx.lookup(TS0 + 29) == (TS0 + 10, 105)
        assert idx.lookup(TS0 + 10**6) == (TS0 + 50, 120)
        raw = idx.path.read_bytes()
        # int64 timestamp, int32 offset relative to the base.
        assert raw[:36] == TIME_ENTRY.pack(TS0 + 10, 5) + TIME_ENTRY.pack(TS0 + 30, 10) + TIME_ENTRY.pack(TS0 + 50, 20)
        assert raw[36:] == b"\0" * 84
        with pytest.raises(ValueError):
            idx.maybe_append(TS0 + 60, 119)  # offset below the last entry's
    finally:
        idx.close()


def test_time_index_full_trim_and_truncate(tmp_path):
    idx = TimeIndex(tmp_path / "00000000000000000000.timeindex", 0, 30, writable=True)  # 30 // 12 = 2
    try:
        assert os.path.getsize(idx.path) == 24
        idx.maybe_append(TS0, 1)
        idx.maybe_append(TS0 + 1, 2)
        assert idx.is_full
        with pytest.raises(ValueError):
            idx.maybe_append(TS0 + 2, 3)
        # Kafka's final entry on roll/close skips the full check.
        idx.maybe_append(TS0 + 2, 3, skip_full_check=True)
        assert idx.entries == 3
        idx.trim()
        assert read_time_index_file(idx.path) == [(TS0, 1), (TS0 + 1, 2), (TS0 + 2, 3)]
        idx.truncate_to(2)  # entries whose offset >= 2 go
        assert idx.keys == [TS0] and idx.values == [1]
    finally:
        idx.close()


@pytest.mark.parametrize("writable", [True, False])
def test_time_index_reload_untrimmed_preallocated(tmp_path, writable):
    path = tmp_path / "00000000000000000050.timeindex"
    idx = TimeIndex(path, 50, 1200, writable=True)
    idx.maybe_append(TS0 + 5, 55)
    idx.maybe_append(TS0 + 9, 60)
    idx.close()
    assert os.path.getsize(path) == 1200  # zero tail
    idx = TimeIndex(path, 50, 1200, writable=writable)
    try:
        assert list(zip(idx.keys, idx.values, strict=True)) == [(TS0 + 5, 55), (TS0 + 9, 60)]
        assert idx.last_entry == (TS0 + 9, 60)
        if writable:
            idx.maybe_append(TS0 + 20, 70)
            assert read_time_index_file(path)[:4] == [(TS0 + 5, 5), (TS0 + 9, 10), (TS0 + 20, 20), (0, 0)]
    finally:
        idx.close()


# =========================================================================== LogSegment index rule


def test_index_entry_only_after_more_than_index_interval_bytes(tmp_path):
    size = len(batch())
    # Exactly index.interval.bytes since the last entry is not enough: Kafka uses '>'.
    lg = new_log(tmp_path / "t-0", index_interval_bytes=size)
    try:
        for _ in range(7):
            append(lg, batch())
        seg = lg.active_segment
        # bytes since last entry before batch i: 0, s, 2s(>s: entry, reset), s, 2s(entry), s, 2s(entry)
        assert seg.offset_index.keys == [2, 4, 6]
        assert seg.offset_index.values == [2 * size, 4 * size, 6 * size]
        assert seg.time_index.keys == [TS0]  # all batches share one timestamp: one time entry
        assert seg.time_index.values == [0]  # offset of the first batch holding the max timestamp
        assert read_index_file(seg.offset_index.path)[:4] == [(2, 2 * size), (4, 4 * size), (6, 6 * size), (0, 0)]
    finally:
        lg.close()


def test_index_entry_is_batch_last_offset_and_batch_position(tmp_path):
    small = batch(3, ts_step=1)
    big = batch(4, value_size=3000, ts_step=1)  # > 4096 bytes
    lg = new_log(tmp_path / "t-0")  # index.interval.bytes 4096
    try:
        append(lg, small)  # offsets 0-2 at 0
        append(lg, big)  # 3-6 at len(small): only len(small) bytes before, no entry
        append(lg, small)  # 7-9 after > 4096 bytes: entry (9, position of this batch)
        append(lg, small)  # 10-12: no entry (only len(small) since the last)
        seg = lg.active_segment
        assert seg.offset_index.keys == [9]
        assert seg.offset_index.values == [len(small) + len(big)]
        headers = file_headers(seg.log_path)
        assert [h.base_offset for h in headers] == [0, 3, 7, 10]
        # The entry points at the start of the batch whose last offset it names.
        pos, h = seg.translate_offset(9)
        assert (pos, h.base_offset, h.last_offset) == (len(small) + len(big), 7, 9)
    finally:
        lg.close()


def test_index_rule_applies_per_batch_within_one_produce(tmp_path):
    size = len(batch())
    lg = new_log(tmp_path / "t-0", index_interval_bytes=0)
    try:
        append(lg, batch(), batch(), batch(), batch())  # one produce, four batches
        seg = lg.active_segment
        assert seg.offset_index.keys == [1, 2, 3]
        assert seg.offset_index.values == [size, 2 * size, 3 * size]
    finally:
        lg.close()


def test_time_index_entry_is_max_timestamp_so_far_and_its_batch(tmp_path):
    lg = new_log(tmp_path / "t-0", index_interval_bytes=0)
    try:
        for ts in (TS0 + 100, TS0 + 300, TS0 + 200, TS0 + 400, TS0 + 50):
            append(lg, batch(2, ts))  # offsets 0-1, 2-3, 4-5, 6-7, 8-9
        seg = lg.active_segment
        assert seg.offset_index.keys == [3, 5, 7, 9]
        # Entries at batches 2..5: max so far 300@3, 300 (no new entry), 400@7, 400 (none).
        assert list(zip(seg.time_index.keys, seg.time_index.values, strict=True)) == [(TS0 + 300, 3), (TS0 + 400, 7)]
        assert (seg.max_timestamp_so_far, seg.offset_of_max_timestamp) == (TS0 + 400, 7)
    finally:
        lg.close()


# =========================================================================== Log: append and roll


def test_append_assigns_offsets(tmp_path):
    lg = new_log(tmp_path / "t-0")
    try:
        assert (lg.log_start_offset, lg.log_end_offset, lg.high_watermark) == (0, 0, 0)
        info = append(lg, batch(3))
        assert (info.first_offset, info.last_offset, info.log_append_time) == (0, 2, -1)
        info = append(lg, batch(1), batch(5, compression=GZIP))
        assert (info.first_offset, info.last_offset) == (3, 8)
        info = append(lg, batch(2, compression=ZSTD))
        assert (info.first_offset, info.last_offset) == (9, 10)
        assert lg.log_end_offset == lg.high_watermark == 11
        raw = lg.active_segment.log_path.read_bytes()
        headers = validate_batches(raw)  # CRCs still valid: baseOffset/epoch are not covered
        assert [(h.base_offset, h.last_offset, h.record_count) for h in headers] == [
            (0, 2, 3), (3, 3, 1), (4, 8, 5), (9, 10, 2)
        ]
        assert {h.partition_leader_epoch for h in headers} == {0}
        assert [r.offset for r in read_all(lg)] == list(range(11))
    finally:
        lg.close()


def test_roll_on_segment_bytes(tmp_path):
    size = len(batch())
    lg = new_log(tmp_path / "t-0", segment_bytes=2 * size, index_interval_bytes=0)
    try:
        for _ in range(5):
            append(lg, batch())
        # size > segment.bytes - messagesSize rolls: two batches fit exactly, the third rolls.
        assert [s.base_offset for s in lg.segments] == [0, 2, 4]
        names = sorted(p.name for p in (tmp_path / "t-0").iterdir() if p.suffix in (".log", ".index", ".timeindex"))
        assert names == sorted(seg_name(b, s) for b in (0, 2, 4) for s in (".log", ".index", ".timeindex"))
        for b in (0, 2):
            assert os.path.getsize(tmp_path / "t-0" / seg_name(b, ".log")) == 2 * size
            # Rolled segments: indexes trimmed to their entries.
            assert read_index_file(tmp_path / "t-0" / seg_name(b, ".index")) == [(1, size)]
            # (max timestamp so far, offset of the first batch holding it), relative
            assert read_time_index_file(tmp_path / "t-0" / seg_name(b, ".timeindex")) == [(TS0, 0)]
        # The active segment's indexes are preallocated to segment.index.bytes.
        assert os.path.getsize(tmp_path / "t-0" / seg_name(4, ".index")) == 10485760
        assert os.path.getsize(tmp_path / "t-0" / seg_name(4, ".timeindex")) == 10485760 // 12 * 12
        assert [r.offset for r in read_all(lg)] == list(range(5))
    finally:
        lg.close()


def test_roll_on_segment_bytes_for_a_multi_batch_produce(tmp_path):
    size = len(batch())
    lg = new_log(tmp_path / "t-0", segment_bytes=3 * size)
    try:
        append(lg, batch(), batch())
        append(lg, batch(), batch())  # 2s + 2s > 3s: the whole produce goes to a new segment
        assert [s.base_offset for s in lg.segments] == [0, 2]
        assert [s.size for s in lg.segments] == [2 * size, 2 * size]
    finally:
        lg.close()


def test_segment_jitter_larger_than_segment_ms_does_not_roll_every_append(tmp_path):
    """Kafka draws each segment's jitter below min(segment.jitter.ms, segment.ms): with a jitter
    far larger than segment.ms, appends close together stay in one segment (they rolled every
    time when the jitter was taken modulo segment.jitter.ms alone)."""
    lg = new_log(tmp_path / "t-0", segment_ms=60_000, segment_jitter_ms=10_000_000)
    try:
        for i in range(4):
            append(lg, batch(1, TS0 + i), now_ms=TS0 + i)
        assert [s.base_offset for s in lg.segments] == [0]
        jitter = lg._roll_jitter()
        assert 0 <= jitter < 60_000 and lg._roll_jitter() == jitter  # one draw per segment
        append(lg, batch(1, TS0 + 60_001), now_ms=TS0 + 60_001)  # past segment.ms: rolls whatever the jitter
        assert [s.base_offset for s in lg.segments] == [0, 4]
    finally:
        lg.close()


def test_compacted_topics_roll_at_max_compaction_lag(tmp_path):
    """Kafka's LogConfig.maxSegmentMs: a compacted topic's active segment rolls after
    min(segment.ms, max.compaction.lag.ms), so its records become cleanable in time; a delete
    topic ignores max.compaction.lag.ms."""
    for policy, expected in (("compact", [0, 2]), ("delete", [0])):
        lg = new_log(tmp_path / f"{policy}-0", cleanup_policy=policy, max_compaction_lag_ms=3000)
        try:
            append(lg, batch(1, TS0), now_ms=TS0)
            append(lg, batch(1, TS0 + 3000), now_ms=TS0 + 3000)  # waited exactly the lag: no roll
            append(lg, batch(1, TS0 + 3001), now_ms=TS0 + 3001)
            assert [s.base_offset for s in lg.segments] == expected, policy
        finally:
            lg.close()


def test_roll_on_segment_ms_compares_record_timestamps(tmp_path):
    far_future = TS0 + 365 * 86_400_000  # wall clock: irrelevant when records have timestamps
    lg = new_log(tmp_path / "t-0", segment_ms=1000)
    try:
        append(lg, batch(1, TS0), now_ms=far_future)
        append(lg, batch(1, TS0 + 500), now_ms=far_future)
        append(lg, batch(1, TS0 + 1000), now_ms=far_future)  # waited exactly segment.ms: no roll
        assert [s.base_offset for s in lg.segments] == [0]
        append(lg, batch(1, TS0 + 1001), now_ms=far_future)  # > segment.ms since the first batch
        assert [s.base_offset for s in lg.segments] == [0, 3]
        # The new segment measures from its own first batch.
        append(lg, batch(1, TS0 + 2001), now_ms=far_future)
        assert [s.base_offset for s in lg.segments] == [0, 3]
        append(lg, batch(1, TS0 + 2002), now_ms=far_future)
        assert [s.base_offset for s in lg.segments] == [0, 3, 5]
        # Old timestamps never roll (waited time is negative).
        append(lg, batch(1, TS0 - 10**9), now_ms=far_future)
        assert [s.base_offset for s in lg.segments] == [0, 3, 5]
    finally:
        lg.close()


def test_roll_when_offset_index_full(tmp_path):
    # segment.index.bytes 24: offset index holds 3 entries, time index 2.
    lg = new_log(tmp_path / "t-0", index_interval_bytes=0, segment_index_bytes=24)
    try:
        for _ in range(10):
            append(lg, batch(1, TS0))  # same timestamp: the time index never fills
        # Entries at batches 1, 2, 3 fill the offset index; batch 4 rolls.
        assert [s.base_offset for s in lg.segments] == [0, 4, 8]
        first = lg.segments[0]
        assert first.offset_index.keys == [1, 2, 3]
        assert os.path.getsize(first.offset_index.path) == 24
        assert [r.offset for r in read_all(lg)] == list(range(10))
    finally:
        lg.close()


def test_roll_when_time_index_full(tmp_path):
    lg = new_log(tmp_path / "t-0", index_interval_bytes=0, segment_index_bytes=24)
    try:
        for i in range(9):
            append(lg, batch(1, TS0 + i))  # increasing timestamps: a time entry with each offset entry
        # Entries at batches 1 and 2 fill the time index (2 entries); batch 3 rolls.
        assert [s.base_offset for s in lg.segments] == [0, 3, 6]
        assert lg.segments[0].time_index.keys == [TS0 + 1, TS0 + 2]
    finally:
        lg.close()


# =========================================================================== Log: read


@pytest.fixture
def three_batches(tmp_path):
    """Offsets 0-9 (10 records), 10-14, 15-19 in one segment."""
    lg = new_log(tmp_path / "t-0")
    b1, b2, b3 = batch(10, ts_step=1), batch(5, value_size=500), batch(5, compression=LZ4)
    for b in (b1, b2, b3):
        append(lg, b)
    yield lg, [len(b1), len(b2), len(b3)]
    lg.close()


def test_read_first_batch_whole_even_if_larger_than_max_bytes(three_batches):
    lg, sizes = three_batches
    sl = lg.read(0, 1, True)
    assert (sl.position, sl.size) == (0, sizes[0])
    batches = decode_batches(sl.read())
    assert [(b.base_offset, b.last_offset) for b in batches] == [(0, 9)]
    sl = lg.read(10, 0, True)
    assert (sl.position, sl.size) == (sizes[0], sizes[1])


def test_read_without_min_one_message_respects_max_bytes(three_batches):
    lg, sizes = three_batches
    sl = lg.read(0, 7, False)  # Kafka's LogSegment.read: min(maxPosition - start, maxSize)
    assert sl is not None and (sl.position, sl.size) == (0, 7)
    empty = lg.read(0, 0, False)
    assert empty is None or empty.size == 0


def test_read_mid_batch_returns_whole_batch_from_its_base_offset(three_batches):
    lg, sizes = three_batches
    for offset in (3, 9):
        sl = lg.read(offset, 1, True)
        assert (sl.position, sl.size) == (0, sizes[0])
        assert decode_batches(sl.read())[0].base_offset == 0
    sl = lg.read(17, 10**6, True)
    assert sl.position == sizes[0] + sizes[1]
    assert decode_batches(sl.read())[0].base_offset == 15


def test_read_max_bytes_may_end_inside_a_batch(three_batches):
    lg, sizes = three_batches
    sl = lg.read(0, sizes[0] + 10, True)
    assert (sl.position, sl.size) == (0, sizes[0] + 10)
    assert [b.base_offset for b in decode_batches(sl.read())] == [0]  # partial trailing batch dropped
    sl = lg.read(0, 10**6, True)
    assert sl.size == sum(sizes)


def test_read_out_of_range_and_at_log_end(three_batches):
    lg, _ = three_batches
    assert lg.log_end_offset == 20
    assert lg.read(20, 1000, True) is None  # at the log end: empty, no error
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(21, 1000, True)
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(-1, 1000, True)
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(10**12, 1000, True)


def test_read_below_log_start_offset_is_out_of_range(tmp_path):
    lg = new_log(tmp_path / "t-0")
    try:
        for _ in range(4):
            append(lg, batch(5))
        lg.close()
        lg = Log(tmp_path / "t-0", "t", 0, config(), log_start_offset=12)
        assert lg.log_start_offset == 12
        with pytest.raises(OffsetOutOfRangeError):
            lg.read(11, 1000, True)
        sl = lg.read(12, 1, True)  # mid-batch: whole batch from its base offset 10
        assert decode_batches(sl.read())[0].base_offset == 10
    finally:
        lg.close()


def test_read_across_segments(tmp_path):
    size = len(batch(2))
    lg = new_log(tmp_path / "t-0", segment_bytes=2 * size)
    try:
        for _ in range(5):
            append(lg, batch(2))
        assert [s.base_offset for s in lg.segments] == [0, 4, 8]
        for offset, base, seg_base in [(0, 0, 0), (3, 2, 0), (4, 4, 4), (7, 6, 4), (8, 8, 8), (9, 8, 8)]:
            sl = lg.read(offset, 1, True)
            assert sl.path.name == seg_name(seg_base, ".log")
            assert decode_batches(sl.read())[0].base_offset == base
        # A read never crosses a segment boundary.
        sl = lg.read(0, 10**6, True)
        assert sl.size == 2 * size
        assert [r.offset for r in read_all(lg)] == list(range(10))
    finally:
        lg.close()


# =========================================================================== clean reopen


def test_clean_close_and_reopen(tmp_path):
    d = tmp_path / "t-0"
    lg = new_log(d, segment_bytes=3000, index_interval_bytes=300)
    batches = [batch(3, TS0 + 10 * i, value_size=100) for i in range(20)]
    for b in batches:
        append(lg, b)
    segs = [s.base_offset for s in lg.segments]
    end = lg.log_end_offset
    entries = [(s.offset_index.keys[:], s.time_index.keys[:]) for s in lg.segments[:-1]]
    lg.close()
    # Clean close: the active segment's indexes trimmed too, with Kafka's final time entry.
    active = lg.segments[-1]
    assert os.path.getsize(active.offset_index.path) == 8 * len(active.offset_index.keys)
    assert read_time_index_file(active.time_index.path)[-1] == (TS0 + 190, end - 1 - active.base_offset)
    lg = Log(d, "t", 0, lg.config, recovery_point=end)
    try:
        assert [s.base_offset for s in lg.segments] == segs
        assert lg.log_end_offset == end
        assert [(s.offset_index.keys, s.time_index.keys) for s in lg.segments[:-1]] == entries
        assert [r.offset for r in read_all(lg)] == list(range(end))
        info = append(lg, batch(2, TS0 + 500))
        assert (info.first_offset, info.last_offset) == (end, end + 1)
        last = lg.segments[-1]
        assert (last.max_timestamp_so_far, last.offset_of_max_timestamp) == (TS0 + 500, end + 1)
    finally:
        lg.close()


# =========================================================================== recovery


def _crash_copy(src: Path, dst: Path) -> None:
    """The files as they are on disk while ``src``'s Log is still open (an unclean stop)."""
    shutil.copytree(src, dst)


def _recovery_batches() -> list[bytes]:
    codecs = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
    return [
        batch(4, TS0 + 100 * i, value_size=150, ts_step=3, compression=codecs[i % 5])
        for i in range(24)
    ]


RECOVERY_CONFIG = {"segment.bytes": 4000, "index.interval.bytes": 500}


def _write(d: Path, batches: list[bytes], *, flush_before_last: int | None = None) -> Log:
    lg = Log(d, "t", 0, LogConfig(None, RECOVERY_CONFIG))
    for i, b in enumerate(batches):
        if flush_before_last is not None and i == len(batches) - flush_before_last:
            lg.flush()
        append(lg, b)
    return lg


def _clean_reference(d: Path, batches: list[bytes]) -> dict[str, bytes]:
    lg = _write(d, batches)
    lg.close()
    return segment_files(d)


def _tear(path: Path, cut: str, batch_size: int) -> None:
    size = os.path.getsize(path)
    start = size - batch_size
    if cut == "half":
        os.truncate(path, start + batch_size // 2)
    elif cut == "inside-header":
        os.truncate(path, start + 20)
    elif cut == "zero-tail":
        os.truncate(path, start)
        with open(path, "ab") as f:
            f.write(b"\0" * batch_size)
    elif cut == "flip-byte":
        with open(path, "r+b") as f:
            f.seek(start + batch_size - 7)  # inside the records: covered by the CRC
            b = f.read(1)
            f.seek(start + batch_size - 7)
            f.write(bytes([b[0] ^ 0x5A]))
    else:
        raise AssertionError(cut)


@pytest.mark.parametrize("cut", ["half", "inside-header", "zero-tail", "flip-byte"])
def test_recovery_drops_torn_or_corrupt_tail_batch(tmp_path, cut):
    batches = _recovery_batches()
    live = _write(tmp_path / "live" / "t-0", batches, flush_before_last=2)
    recovery_point = live.recovery_point
    # The recovery point (last flush) is in the active segment, which holds more than the torn batch.
    assert live.active_segment.base_offset <= recovery_point < live.log_end_offset
    assert live.active_segment.base_offset < live.log_end_offset - 4
    crash = tmp_path / "crash" / "t-0"
    _crash_copy(live.dir, crash)
    live.close(trim=False)
    active_log = sorted(crash.glob("*.log"))[-1]
    _tear(active_log, cut, len(batches[-1]))

    expected = _clean_reference(tmp_path / "ref" / "t-0", batches[:-1])
    expected_end = 4 * (len(batches) - 1)

    lg = Log(crash, "t", 0, LogConfig(None, RECOVERY_CONFIG), recovery_point=recovery_point, clean_shutdown=False)
    try:
        assert lg.log_end_offset == expected_end
        records = read_all(lg)
        assert [r.offset for r in records] == list(range(expected_end))
        # Every earlier batch kept byte for byte (the offsets were assigned by the live log).
        assert validate_batches(active_log.read_bytes())
    finally:
        lg.close()
    assert segment_files(crash) == expected

    lg = Log(crash, "t", 0, LogConfig(None, RECOVERY_CONFIG), recovery_point=expected_end)
    try:
        info = append(lg, batches[-1])
        assert (info.first_offset, info.last_offset) == (expected_end, expected_end + 3)
        assert [r.offset for r in read_all(lg)] == list(range(expected_end + 4))
    finally:
        lg.close()


def test_recovery_of_a_single_segment_log_with_untrimmed_indexes(tmp_path):
    batches = [batch(2, TS0 + i, value_size=300) for i in range(12)]
    live = Log(tmp_path / "live" / "t-0", "t", 0, config(index_interval_bytes=600))
    for b in batches:
        append(live, b)
    crash = tmp_path / "crash" / "t-0"
    _crash_copy(live.dir, crash)
    live.close(trim=False)
    assert os.path.getsize(crash / seg_name(0, ".index")) == 10485760  # never trimmed
    _tear(crash / seg_name(0, ".log"), "half", len(batches[-1]))

    ref = Log(tmp_path / "ref" / "t-0", "t", 0, config(index_interval_bytes=600))
    for b in batches[:-1]:
        append(ref, b)
    ref_entries = (ref.active_segment.offset_index.keys[:], ref.active_segment.offset_index.values[:])
    ref.close()

    lg = Log(crash, "t", 0, config(index_interval_bytes=600), recovery_point=0, clean_shutdown=False)
    try:
        assert lg.log_end_offset == 22
        seg = lg.active_segment
        assert (seg.offset_index.keys, seg.offset_index.values) == ref_entries
        assert [r.offset for r in read_all(lg)] == list(range(22))
    finally:
        lg.close()
    assert segment_files(crash) == segment_files(ref.dir)


def _four_batch_segments_indexed_at_the_third() -> dict[str, int]:
    """Segments of 4 equal batches; one index entry each, at the third batch (positions
    0, s, 2s > 1.5s: entry, 3s - 2s = s: none), so the last batch is never indexed."""
    size = len(batch(3, value_size=100))
    return {"segment.bytes": 4 * size, "index.interval.bytes": size + size // 2}


def test_recovery_rebuilds_inactive_segment_time_index_like_a_clean_roll(tmp_path):
    """Recovery from offset 0 (never flushed) rebuilds every segment's indexes.

    Kafka's LogSegment.recover ends with ``timeIndex.maybeAppend(maxTimestampSoFar,
    offsetOfMaxTimestampSoFar, true)`` then trims, so a recovered segment's .timeindex
    equals the one a clean roll wrote (onBecomeInactiveSegment appends the same entry).
    Here every segment's largest timestamp is in its last, unindexed batch, so only
    that final entry records it.
    """
    cfg = _four_batch_segments_indexed_at_the_third()
    batches = [batch(3, TS0 + 10 * i, value_size=100) for i in range(20)]
    live = Log(tmp_path / "live" / "t-0", "t", 0, LogConfig(None, cfg))
    for b in batches:
        append(live, b)
    assert len(live.segments) >= 3
    crash = tmp_path / "crash" / "t-0"
    _crash_copy(live.dir, crash)
    live.close(trim=False)
    _tear(sorted(crash.glob("*.log"))[-1], "half", len(batches[-1]))

    ref = Log(tmp_path / "ref" / "t-0", "t", 0, LogConfig(None, cfg))
    for b in batches[:-1]:
        append(ref, b)
    ref.close()

    lg = Log(crash, "t", 0, LogConfig(None, cfg), recovery_point=0, clean_shutdown=False)
    lg.close()
    got, want = segment_files(crash), segment_files(ref.dir)
    assert sorted(got) == sorted(want)
    mismatched = {
        name: (read_time_index_file(crash / name), read_time_index_file(ref.dir / name))
        for name in want if name.endswith(".timeindex") and got[name] != want[name]
    }
    assert not mismatched, f"recovered .timeindex differs from a clean write (got, want): {mismatched}"
    assert got == want


def test_largest_timestamps_survive_recovery_and_restart(tmp_path):
    """What the rebuilt .timeindex feeds: after recovery and a clean restart each segment's
    largest timestamp (retention.ms, ListOffsets -3 and by-timestamp) is the real one."""
    cfg = _four_batch_segments_indexed_at_the_third()
    batches = [batch(3, TS0 + 10 * i, value_size=100) for i in range(20)]
    live = Log(tmp_path / "live" / "t-0", "t", 0, LogConfig(None, cfg))
    for b in batches:
        append(live, b)
    crash = tmp_path / "crash" / "t-0"
    _crash_copy(live.dir, crash)
    live.close(trim=False)
    lg = Log(crash, "t", 0, LogConfig(None, cfg), recovery_point=0, clean_shutdown=False)
    end = lg.log_end_offset
    lg.close()
    lg = Log(crash, "t", 0, LogConfig(None, cfg), recovery_point=end)
    try:
        assert end == 60
        # Segment i holds batches 4i..4i+3 (offsets 12i..12i+11); its largest timestamp is
        # batch 4i+3's, TS0 + 10 * (4i + 3), at offset 12i + 11.
        assert [(s.base_offset, s.largest_timestamp(), s.offset_of_max_timestamp) for s in lg.segments[:-1]] == [
            (12 * i, TS0 + 10 * (4 * i + 3), 12 * i + 11) for i in range(4)
        ]
        # ListOffsets by timestamp: the first batch with max timestamp >= TS0 + 30 is offsets 9-11,
        # and its first record with a timestamp >= TS0 + 30 is offset 9 (records of a batch share
        # its timestamp here).
        ts, offset, epoch = lg.fetch_offset_by_timestamp(TS0 + 30)
        assert (ts, offset) == (TS0 + 30, 9)
    finally:
        lg.close()


def test_missing_indexes_of_an_inactive_segment_are_rebuilt_like_kafka(tmp_path):
    cfg = _four_batch_segments_indexed_at_the_third()
    d = tmp_path / "t-0"
    lg = Log(d, "t", 0, LogConfig(None, cfg))
    for i in range(10):
        append(lg, batch(3, TS0 + 10 * i, value_size=100))
    lg.close()
    before = segment_files(d)
    (d / seg_name(0, ".index")).unlink()
    (d / seg_name(0, ".timeindex")).unlink()
    lg = Log(d, "t", 0, LogConfig(None, cfg), recovery_point=lg.log_end_offset)
    lg.close()
    assert segment_files(d) == before


# =========================================================================== checkpoints


def test_checkpoint_write_format_and_round_trip(tmp_path):
    path = tmp_path / "recovery-point-offset-checkpoint"
    offsets = {("golden", 0): 322, ("my.topic-x", 12): 0, ("a_b", 3): 2**40}
    checkpoint.write_offsets(path, offsets)
    assert path.read_bytes() == b"0\n3\ngolden 0 322\nmy.topic-x 12 0\na_b 3 1099511627776\n"
    assert checkpoint.read_offsets(path) == offsets
    assert not (tmp_path / "recovery-point-offset-checkpoint.tmp").exists()
    checkpoint.write_offsets(path, {})
    assert path.read_bytes() == b"0\n0\n"
    assert checkpoint.read_offsets(path) == {}


def test_checkpoint_reads_kafka_written_files():
    logdir = Path(__file__).resolve().parents[1] / "data" / "kafka-4.0.0" / "kafka-4.0.0-logdir"
    if not logdir.is_dir():
        pytest.skip(f"golden data not present at {logdir}")
    rp = checkpoint.read_offsets(logdir / "recovery-point-offset-checkpoint")
    assert len(rp) == 10 and rp[("golden", 0)] == 322 and rp[("golden-compact", 0)] == 20014
    assert checkpoint.read_offsets(logdir / "log-start-offset-checkpoint") == {("golden-del", 0): 200}
    assert checkpoint.read_offsets(logdir / "cleaner-offset-checkpoint") == {("golden-compact", 0): 20013}


def test_checkpoint_write_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "log-start-offset-checkpoint"
    checkpoint.write_offsets(path, {("t", 0): 5})
    old = path.read_bytes()
    synced: list[int] = []
    real_fsync = os.fsync

    def fsync(fd):
        synced.append(fd)
        real_fsync(fd)

    def failing_replace(src, dst):
        raise OSError("simulated crash before rename")

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError):
        checkpoint.write_offsets(path, {("t", 0): 99, ("u", 1): 7})
    assert synced, "the tmp file must be fsynced before the rename"
    assert path.read_bytes() == old  # the visible file is the old one, whole
    # A failed write (disk full, read-only) leaves no half-written .tmp behind.
    assert not (tmp_path / "log-start-offset-checkpoint.tmp").exists()
    monkeypatch.undo()
    # A stale .tmp left by a crash is overwritten by the next write.
    (tmp_path / "log-start-offset-checkpoint.tmp").write_bytes(b"0\n5\ntorn")
    checkpoint.write_offsets(path, {("t", 0): 100})
    assert path.read_bytes() == b"0\n1\nt 0 100\n"
    assert not (tmp_path / "log-start-offset-checkpoint.tmp").exists()


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"1\n1\nt 0 5\n",  # unknown version
        b"0\n2\nt 0 5\n",  # fewer entries than the count
        b"0\nx\nt 0 5\n",  # bad count
        b"0\n1\nt 0 five\n",  # bad offset
        b"0\n1\nt zero 5\n",  # bad partition
        b"0\n1\nt 0\n",  # missing field
        b"0\n1\nt 0 5 extra\n",
        b"\xff\xfe garbage",
    ],
)
def test_malformed_checkpoint_is_ignored(tmp_path, content):
    path = tmp_path / "recovery-point-offset-checkpoint"
    path.write_bytes(content)
    assert checkpoint.read_offsets(path) == {}


def test_missing_checkpoint_is_empty(tmp_path):
    assert checkpoint.read_offsets(tmp_path / "nope") == {}


# =========================================================================== LogManager

_PARTITION_METADATA = re.compile(r"version: 0\ntopic_id: ([A-Za-z0-9_-]{22})")


def _props(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            k, _, v = line.partition("=")
            out[k] = v
    return out


@pytest.fixture
def manager_dir(tmp_path):
    return tmp_path / "data"


def _started(d: Path) -> LogManager:
    lm = LogManager(d)
    lm.startup()
    return lm


def test_log_manager_creates_topic_dirs_and_metadata(manager_dir):
    lm = _started(manager_dir)
    try:
        info = lm.create_topic("orders", 3, {"segment.bytes": 1048576})
        for p in range(3):
            d = manager_dir / f"orders-{p}"
            assert d.is_dir()
            text = (d / "partition.metadata").read_text()
            m = _PARTITION_METADATA.fullmatch(text)
            assert m, f"partition.metadata is {text!r}"
            assert parse_kafka_uuid(m.group(1)) == info.topic_id
            assert not m.group(1).startswith("-")
            assert {p.name for p in d.iterdir()} >= {seg_name(0, ".log"), seg_name(0, ".index"), seg_name(0, ".timeindex")}
            lg = lm.get_log("orders", p)
            assert lg is not None and lg.config.segment_bytes == 1048576
            assert lg.log_end_offset == 0
        props = _props(manager_dir / "meta.properties")
        assert props["version"] == "1" and props["node.id"] == "1"
        assert re.fullmatch(r"[A-Za-z0-9_-]{22}", props["cluster.id"])
        assert re.fullmatch(r"[A-Za-z0-9_-]{22}", props["directory.id"])
        assert props["cluster.id"] == lm.cluster_id
        with pytest.raises(FileExistsError):
            lm.create_topic("orders", 1)
    finally:
        lm.shutdown()


def test_log_manager_restart_keeps_ids_data_and_writes_clean_shutdown_marker(manager_dir):
    lm = _started(manager_dir)
    assert lm.had_clean_shutdown is False
    a = lm.create_topic("a", 2)
    b = lm.create_topic("b.b", 1)
    append(lm.get_log("a", 1), batch(3), batch(2))
    cluster_id, directory_id = lm.cluster_id, lm.directory_id
    assert not (manager_dir / CLEAN_SHUTDOWN_FILE).exists()
    lm.shutdown()

    marker = manager_dir / CLEAN_SHUTDOWN_FILE
    assert marker.exists()
    content = json.loads(marker.read_text())
    assert content["version"] == 0 and isinstance(content["brokerEpoch"], int)
    assert checkpoint.read_offsets(manager_dir / "recovery-point-offset-checkpoint") == {
        ("a", 0): 0, ("a", 1): 5, ("b.b", 0): 0
    }

    lm = _started(manager_dir)
    try:
        assert lm.had_clean_shutdown is True
        assert not marker.exists(), "the clean shutdown marker is removed at start-up"
        assert (lm.cluster_id, lm.directory_id) == (cluster_id, directory_id)
        assert lm.metadata.topics["a"].topic_id == a.topic_id and lm.metadata.topics["b.b"].topic_id == b.topic_id
        assert lm.metadata.topics["a"].partitions == 2
        lg = lm.get_log("a", 1)
        assert lg.log_end_offset == 5
        assert [r.offset for r in read_all(lg)] == list(range(5))
    finally:
        lm.shutdown()


_CHILD = """
import os, sys
from pathlib import Path
from kafka_sidecar.protocol.record_batch import validate_batches
from kafka_sidecar.protocol.records import Record, encode_batch
from kafka_sidecar.storage.log_manager import LogManager

lm = LogManager(Path(sys.argv[1]))
lm.startup()
if sys.argv[2] == "crash":
    lm.create_topic("t", 1)
    for n in (3, 4):
        b = bytearray(encode_batch([Record(i, 1700000000000, b"k", b"v" * 10) for i in range(n)]))
        lm.get_log("t", 0).append_as_leader(b, validate_batches(b))
    os._exit(0)  # process death: no flush, no checkpoints, no marker
print("locked", flush=True)
sys.stdin.readline()
lm.shutdown()
"""


def _child(d: Path, mode: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", _CHILD, str(d), mode], text=True, **kw)


def test_log_manager_unclean_restart_recovers_torn_tail(manager_dir):
    assert _child(manager_dir, "crash").wait(60) == 0
    assert not (manager_dir / CLEAN_SHUTDOWN_FILE).exists()
    log_file = manager_dir / "t-0" / seg_name(0, ".log")
    assert [h.base_offset for h in file_headers(log_file)] == [0, 3]
    os.truncate(log_file, os.path.getsize(log_file) - len(batch(4)) // 2)

    lm = _started(manager_dir)
    try:
        assert lm.had_clean_shutdown is False
        lg = lm.get_log("t", 0)
        assert lg.log_end_offset == 3
        assert [r.offset for r in read_all(lg)] == [0, 1, 2]
        info = append(lg, batch(1))
        assert info.first_offset == 3
    finally:
        lm.shutdown()


def test_log_manager_data_dir_lock_between_processes(manager_dir):
    child = _child(manager_dir, "hold", stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert child.stdout.readline().strip() == "locked"
        with pytest.raises(DataDirError):
            LogManager(manager_dir).startup()
    finally:
        child.stdin.write("\n")
        child.stdin.flush()
        assert child.wait(60) == 0
    lm = _started(manager_dir)
    lm.shutdown()


def test_log_manager_data_dir_lock(manager_dir):
    lm = _started(manager_dir)
    try:
        other = LogManager(manager_dir)
        with pytest.raises(DataDirError):
            other.startup()
    finally:
        lm.shutdown()
    # Released on shutdown: the next one starts.
    lm = _started(manager_dir)
    lm.shutdown()
