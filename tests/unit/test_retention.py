"""Retention decisions (Kafka's UnifiedLog.deleteOldSegments) with synthetic segments
and a controllable clock: the pure predicates of storage/retention.py, then a real
Log in a temporary directory, then LogManager (deferred deletes, checkpoints, restart).

Every ``now_ms`` is passed explicitly, so nothing depends on the wall clock except
where a segment's file mtime is the subject (set with ``os.utime``).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest
from kafka_sidecar.protocol.record_batch import NO_TIMESTAMP, validate_batches
from kafka_sidecar.protocol.records import Record, decode_batches, encode_batch
from kafka_sidecar.storage import checkpoint, retention
from kafka_sidecar.storage.log import Log, OffsetOutOfRangeError
from kafka_sidecar.storage.log_config import LogConfig
from kafka_sidecar.storage.log_manager import (
    LOG_START_OFFSET_CHECKPOINT,
    LogManager,
)

T0 = 1_700_000_000_000  # record timestamps are built from this
HOUR = 3_600_000
VALUE = b"v" * 100


# ------------------------------------------------------------------------- helpers


@dataclass
class FakeSegment:
    base_offset: int
    size: int
    ts: int = T0

    def largest_timestamp(self) -> int:
        return self.ts


def batch_bytes(timestamps: list[int], value: bytes = VALUE) -> bytearray:
    records = [Record(i, ts, b"k%d" % i, value) for i, ts in enumerate(timestamps)]
    return bytearray(encode_batch(records, max_timestamp=max(timestamps) if timestamps else None))


BATCH_SIZE = len(batch_bytes([T0]))
# Exactly one single-record batch per segment: the second append would exceed
# segment.bytes (Kafka rolls when size > segment.bytes - incoming size).
ONE_BATCH_PER_SEGMENT = BATCH_SIZE + BATCH_SIZE // 2


def append(lg: Log, timestamps: list[int], now_ms: int = T0) -> None:
    """Append one batch holding one record per timestamp."""
    data = batch_bytes(timestamps)
    lg.append_as_leader(data, validate_batches(data), now_ms=now_ms)


def make_log(dir: Path, **configs) -> Log:
    return Log(dir / "t-0", "t", 0, LogConfig(None, {"segment.bytes": ONE_BATCH_PER_SEGMENT, **configs}))


def bases(lg: Log) -> list[int]:
    return [s.base_offset for s in lg.segments]


SEGMENT_EXTENSIONS = (".log", ".index", ".timeindex")


def files(dir: Path) -> set[str]:
    """Segment files in a partition dir (``.deleted`` ones included; producer
    snapshots and partition.metadata left out)."""
    return {f for f in os.listdir(dir) if f.removesuffix(".deleted").endswith(SEGMENT_EXTENSIONS)}


def seg_files(base: int, suffix: str = "") -> set[str]:
    return {f"{base:020d}{ext}{suffix}" for ext in (".log", ".index", ".timeindex")}


def read_offsets(lg: Log, start: int) -> list[int]:
    """Every record offset from ``start`` to the log end, through Log.read."""
    out: list[int] = []
    offset = start
    for _ in range(10_000):
        if offset >= lg.log_end_offset:
            break
        data = lg.read(offset, 1 << 20, True)
        assert data is not None
        batches = decode_batches(data.read())
        got = [r.offset for b in batches for r in b.records if r.offset >= offset]
        assert got, f"no progress at {offset}"
        out += got
        offset = got[-1] + 1
    return out


# ------------------------------------------------------ pure predicates (retention.py)


class TestPredicates:
    def test_time_predicate_compares_largest_timestamp_strictly(self):
        pred = retention.retention_ms_predicate(1000, now_ms=T0 + 1000)
        assert pred is not None
        assert not pred(FakeSegment(0, 10, T0), None)  # exactly retention.ms old: kept
        assert pred(FakeSegment(0, 10, T0 - 1), None)
        assert not pred(FakeSegment(0, 10, T0 + 5), None)

    def test_retention_ms_minus_one_disables(self):
        assert retention.retention_ms_predicate(-1, now_ms=T0 * 10) is None

    def test_retention_bytes_minus_one_disables(self):
        assert retention.retention_size_predicate(-1, total_size=10**12) is None

    def test_size_under_threshold_disables(self):
        assert retention.retention_size_predicate(1000, total_size=999) is None

    @pytest.mark.parametrize(
        ("retention_bytes", "deleted"),
        [
            # The seed's example: 3 x 700 MB + an active segment of 1234 B.
            (2000 * 2**20, 0),  # excess 100 MB + 1234 B < one segment: nothing
            (1400 * 2**20, 1),  # excess 700 MB + 1234 B >= one segment: the oldest
            (700 * 2**20, 2),
            (1234, 3),
        ],
    )
    def test_size_seed_example(self, retention_bytes, deleted):
        mb700 = 700 * 2**20
        segs = [FakeSegment(0, mb700), FakeSegment(10, mb700), FakeSegment(20, mb700), FakeSegment(30, 1234)]
        total = sum(s.size for s in segs)
        pred = retention.retention_size_predicate(retention_bytes, total)
        assert pred is not None
        assert retention.deletable_prefix(segs, pred, high_watermark=31, log_end_offset=31) == deleted

    def test_log_start_offset_predicate_uses_next_base(self):
        pred = retention.log_start_offset_predicate(20)
        assert pred(FakeSegment(0, 1), FakeSegment(10, 1))
        assert pred(FakeSegment(10, 1), FakeSegment(20, 1))  # next base == start: goes
        assert not pred(FakeSegment(20, 1), FakeSegment(30, 1))
        assert not pred(FakeSegment(20, 1), None)  # the last segment never goes by start offset

    def test_prefix_stops_at_first_kept_segment(self):
        segs = [FakeSegment(0, 1, T0 - 10 * HOUR), FakeSegment(10, 1, T0), FakeSegment(20, 1, T0 - 10 * HOUR), FakeSegment(30, 1, T0)]
        pred = retention.retention_ms_predicate(HOUR, now_ms=T0)
        assert retention.deletable_prefix(segs, pred, 40, 40) == 1

    def test_prefix_stops_at_high_watermark(self):
        segs = [FakeSegment(0, 1), FakeSegment(10, 1), FakeSegment(20, 1), FakeSegment(30, 1)]
        always = lambda _s, _n: True  # noqa: E731
        assert retention.deletable_prefix(segs, always, high_watermark=40, log_end_offset=40) == 4
        assert retention.deletable_prefix(segs, always, high_watermark=35, log_end_offset=40) == 3
        assert retention.deletable_prefix(segs, always, high_watermark=20, log_end_offset=40) == 2
        assert retention.deletable_prefix(segs, always, high_watermark=19, log_end_offset=40) == 1
        assert retention.deletable_prefix(segs, always, high_watermark=5, log_end_offset=40) == 0

    def test_prefix_never_includes_an_empty_last_segment(self):
        segs = [FakeSegment(0, 5), FakeSegment(10, 0)]
        always = lambda _s, _n: True  # noqa: E731
        assert retention.deletable_prefix(segs, always, 10, 10) == 1
        assert retention.deletable_prefix([FakeSegment(10, 0)], always, 10, 10) == 0


# ------------------------------------------------------------------- Log: by time


class TestRetentionByTime:
    def test_expired_prefix_deleted_by_largest_timestamp(self, tmp_path):
        lg = make_log(tmp_path, **{"retention.ms": HOUR})
        for i in range(5):
            append(lg, [T0 + i * HOUR])
        assert bases(lg) == [0, 1, 2, 3, 4]
        # now = T0 + 2.5 h: segments 0 (2.5 h old) and 1 (1.5 h) are expired, 2 (0.5 h) is not.
        removed = lg.delete_old_segments(T0 + 2 * HOUR + HOUR // 2)
        assert [s.base_offset for s in removed] == [0, 1]
        assert bases(lg) == [2, 3, 4]
        assert lg.log_start_offset == 2
        assert lg.log_end_offset == 5
        assert read_offsets(lg, 2) == [2, 3, 4]
        with pytest.raises(OffsetOutOfRangeError):
            lg.read(1, 1 << 20, True)
        # Nothing more is due at the same time.
        assert lg.delete_old_segments(T0 + 2 * HOUR + HOUR // 2) == []
        lg.close()

    def test_uses_the_largest_timestamp_not_the_first_or_last(self, tmp_path):
        lg = make_log(tmp_path, **{"retention.ms": HOUR})
        # Segment 0: one old record and one recent record (max timestamp in the middle).
        append(lg, [T0 - 10 * HOUR, T0, T0 - 9 * HOUR])
        append(lg, [T0 - 10 * HOUR])  # segment 3: old
        append(lg, [T0 + HOUR])  # segment 4: active, recent
        assert bases(lg) == [0, 3, 4]
        assert lg.segments[0].largest_timestamp() == T0
        # Segment 0 is not expired, so nothing after it goes either (only a prefix can go).
        assert lg.delete_old_segments(T0 + HOUR // 2) == []
        assert bases(lg) == [0, 3, 4]
        removed = lg.delete_old_segments(T0 + HOUR + 1)
        assert [s.base_offset for s in removed] == [0, 3]
        lg.close()

    def test_time_index_value_survives_reopen_and_wins_over_mtime(self, tmp_path):
        lg = make_log(tmp_path, **{"retention.ms": HOUR})
        append(lg, [T0 - 5 * HOUR])  # old records
        append(lg, [T0])  # recent records
        append(lg, [T0])  # active
        lg.close()
        d = tmp_path / "t-0"
        # mtimes say the opposite of the record timestamps.
        recent_s = T0 / 1000
        old_s = (T0 - 100 * HOUR) / 1000
        os.utime(d / f"{0:020d}.log", (recent_s, recent_s))
        os.utime(d / f"{1:020d}.log", (old_s, old_s))
        lg = make_log(tmp_path, **{"retention.ms": HOUR})
        assert [s.largest_timestamp() for s in lg.segments] == [T0 - 5 * HOUR, T0, T0]
        removed = lg.delete_old_segments(T0 + HOUR // 2)
        assert [s.base_offset for s in removed] == [0]
        assert bases(lg) == [1, 2]
        lg.close()

    def test_mtime_fallback_without_timestamps(self, tmp_path):
        lg = make_log(tmp_path, **{"retention.ms": HOUR})
        append(lg, [NO_TIMESTAMP])
        append(lg, [NO_TIMESTAMP])
        append(lg, [NO_TIMESTAMP])  # active
        d = tmp_path / "t-0"
        now = T0
        old_s = (now - 3 * HOUR) / 1000
        fresh_s = (now - HOUR // 2) / 1000
        os.utime(d / f"{0:020d}.log", (old_s, old_s))
        os.utime(d / f"{1:020d}.log", (fresh_s, fresh_s))
        os.utime(d / f"{2:020d}.log", (old_s, old_s))
        assert lg.segments[0].largest_timestamp() == now - 3 * HOUR
        assert lg.segments[1].largest_timestamp() == now - HOUR // 2
        removed = lg.delete_old_segments(now)
        assert [s.base_offset for s in removed] == [0]
        assert bases(lg) == [1, 2]
        assert lg.log_start_offset == 1
        # Once segment 1's file is old too, it goes; segment 2 (active, old) forces a roll.
        os.utime(lg.segments[0].log_path, (old_s, old_s))
        removed = lg.delete_old_segments(now)
        assert [s.base_offset for s in removed] == [1, 2]
        assert bases(lg) == [3]
        assert lg.log_start_offset == lg.log_end_offset == 3
        lg.close()

    def test_mtime_fallback_after_reopen(self, tmp_path):
        lg = make_log(tmp_path, **{"retention.ms": HOUR})
        append(lg, [NO_TIMESTAMP])
        append(lg, [NO_TIMESTAMP])
        append(lg, [T0])  # active, recent
        lg.close()
        d = tmp_path / "t-0"
        old_s = (T0 - 3 * HOUR) / 1000
        fresh_s = T0 / 1000
        os.utime(d / f"{0:020d}.log", (old_s, old_s))
        os.utime(d / f"{1:020d}.log", (fresh_s, fresh_s))
        lg = make_log(tmp_path, **{"retention.ms": HOUR})
        assert [s.largest_timestamp() for s in lg.segments] == [T0 - 3 * HOUR, T0, T0]
        removed = lg.delete_old_segments(T0 + HOUR // 2)
        assert [s.base_offset for s in removed] == [0]
        assert bases(lg) == [1, 2]
        lg.close()

    def test_no_timestamp_segment_keeps_an_empty_time_index(self, tmp_path):
        # Kafka's TimeIndex.maybeAppend only appends a timestamp larger than the last
        # entry's, and an empty index's last entry is NO_TIMESTAMP (-1): a segment
        # whose records carry no timestamp is rolled with an empty .timeindex.
        lg = make_log(tmp_path, **{"retention.ms": HOUR})
        append(lg, [NO_TIMESTAMP])
        append(lg, [NO_TIMESTAMP])
        lg.close()
        assert (tmp_path / "t-0" / f"{0:020d}.timeindex").stat().st_size == 0

    def test_all_segments_expired_rolls_then_deletes(self, tmp_path):
        lg = make_log(tmp_path, **{"retention.ms": HOUR})
        for _ in range(4):
            append(lg, [T0 - 10 * HOUR])
        assert bases(lg) == [0, 1, 2, 3]
        old_active = lg.active_segment
        removed = lg.delete_old_segments(T0)
        assert [s.base_offset for s in removed] == [0, 1, 2, 3]
        assert old_active in removed
        # A new, empty active segment at the log end remains.
        assert bases(lg) == [4]
        assert lg.active_segment.size == 0
        assert lg.log_start_offset == lg.log_end_offset == lg.high_watermark == 4
        d = tmp_path / "t-0"
        assert (d / f"{4:020d}.log").stat().st_size == 0
        for b in range(4):
            assert seg_files(b, ".deleted") <= files(d)
            assert not (seg_files(b) & files(d))
        assert lg.read(4, 1 << 20, True) is None
        with pytest.raises(OffsetOutOfRangeError):
            lg.read(3, 1 << 20, True)
        # The empty active segment is never deleted, however old the clock.
        assert lg.delete_old_segments(T0 + 1000 * HOUR) == []
        assert bases(lg) == [4]
        # Appends continue at the log end.
        append(lg, [T0])
        assert lg.log_end_offset == 5
        assert read_offsets(lg, 4) == [4]
        lg.close()

    def test_retention_ms_minus_one_keeps_everything(self, tmp_path):
        lg = make_log(tmp_path, **{"retention.ms": -1})
        for _ in range(4):
            append(lg, [1])  # 1970
        assert lg.delete_old_segments(T0 * 2) == []
        assert bases(lg) == [0, 1, 2, 3]
        assert lg.log_start_offset == 0
        lg.close()


# ------------------------------------------------------------------- Log: by size


class TestRetentionBySize:
    def _log(self, tmp_path, retention_bytes: int, n: int = 5) -> Log:
        lg = make_log(tmp_path, **{"retention.bytes": retention_bytes, "retention.ms": -1})
        for _ in range(n):
            append(lg, [T0])
        assert [s.size for s in lg.segments] == [BATCH_SIZE] * n
        return lg

    @pytest.mark.parametrize(
        ("excess", "deleted"),
        [
            (-1, 0),  # under the threshold
            (0, 0),
            (BATCH_SIZE - 1, 0),  # over, but by less than a segment
            (BATCH_SIZE, 1),  # exactly one segment over
            (2 * BATCH_SIZE - 1, 1),
            (2 * BATCH_SIZE, 2),
            (3 * BATCH_SIZE + 7, 3),
        ],
    )
    def test_oldest_first_while_excess_at_least_a_segment(self, tmp_path, excess, deleted):
        total = 5 * BATCH_SIZE
        lg = self._log(tmp_path, total - excess)
        removed = lg.delete_old_segments(T0)
        assert [s.base_offset for s in removed] == list(range(deleted))
        assert bases(lg) == list(range(deleted, 5))
        assert lg.log_start_offset == deleted
        assert lg.size_in_bytes == total - deleted * BATCH_SIZE
        lg.close()

    def test_retention_bytes_zero_rolls_and_deletes_everything(self, tmp_path):
        lg = self._log(tmp_path, 0, n=3)
        removed = lg.delete_old_segments(T0)
        assert [s.base_offset for s in removed] == [0, 1, 2]
        assert bases(lg) == [3]
        assert lg.active_segment.size == 0
        assert lg.log_start_offset == lg.log_end_offset == 3
        lg.close()

    def test_retention_bytes_minus_one_keeps_everything(self, tmp_path):
        lg = self._log(tmp_path, -1)
        assert lg.delete_old_segments(T0) == []
        assert bases(lg) == [0, 1, 2, 3, 4]
        lg.close()

    def test_size_counts_log_files_only(self, tmp_path):
        # Indexes are not counted: with retention.bytes = total .log bytes nothing goes,
        # although the active segment's preallocated indexes are large on disk.
        lg = self._log(tmp_path, 5 * BATCH_SIZE)
        assert lg.delete_old_segments(T0) == []
        lg.close()


# ------------------------------------------------------- Log: by log start offset


class TestRetentionByLogStartOffset:
    def _log(self, tmp_path, **configs) -> Log:
        lg = make_log(tmp_path, **configs)
        for _ in range(6):
            append(lg, [T0, T0, T0, T0, T0])  # segments of 5 records: 0, 5, 10, 15, 20, 25
        assert bases(lg) == [0, 5, 10, 15, 20, 25]
        return lg

    def test_mid_segment_start_deletes_segments_wholly_below(self, tmp_path):
        lg = self._log(tmp_path)
        assert lg.maybe_increment_log_start_offset(12)
        # Only the start moves; files stay until the next retention check.
        assert bases(lg) == [0, 5, 10, 15, 20, 25]
        with pytest.raises(OffsetOutOfRangeError):
            lg.read(11, 1 << 20, True)
        removed = lg.delete_old_segments(T0)
        assert [s.base_offset for s in removed] == [0, 5]
        assert bases(lg) == [10, 15, 20, 25]
        assert lg.log_start_offset == 12  # not lowered to the segment's base
        assert read_offsets(lg, 12)[:3] == [12, 13, 14]
        lg.close()

    def test_start_on_a_segment_boundary(self, tmp_path):
        lg = self._log(tmp_path)
        lg.maybe_increment_log_start_offset(15)
        removed = lg.delete_old_segments(T0)
        assert [s.base_offset for s in removed] == [0, 5, 10]
        assert bases(lg) == [15, 20, 25]
        assert lg.log_start_offset == 15
        lg.close()

    def test_start_at_high_watermark_keeps_the_active_segment(self, tmp_path):
        lg = self._log(tmp_path)
        lg.maybe_increment_log_start_offset(lg.high_watermark)
        assert lg.log_start_offset == 30
        removed = lg.delete_old_segments(T0)
        assert [s.base_offset for s in removed] == [0, 5, 10, 15, 20]
        # The last segment has no next segment: it is not deleted by start offset.
        assert bases(lg) == [25]
        assert lg.log_start_offset == 30
        assert lg.read(30, 1 << 20, True) is None
        with pytest.raises(OffsetOutOfRangeError):
            lg.read(29, 1 << 20, True)
        lg.close()

    def test_start_never_moves_back_nor_past_the_high_watermark(self, tmp_path):
        lg = self._log(tmp_path)
        assert lg.maybe_increment_log_start_offset(12)
        assert not lg.maybe_increment_log_start_offset(7)
        assert not lg.maybe_increment_log_start_offset(12)
        assert lg.log_start_offset == 12
        with pytest.raises(OffsetOutOfRangeError):
            lg.maybe_increment_log_start_offset(31)
        assert lg.log_start_offset == 12
        lg.close()

    def test_compact_only_topic_applies_only_start_offset_deletion(self, tmp_path):
        lg = self._log(tmp_path, **{"cleanup.policy": "compact", "retention.ms": 1, "retention.bytes": 0})
        # Everything is expired by time and by size, but compaction-only logs ignore both.
        assert lg.delete_old_segments(T0 + 100 * HOUR) == []
        assert bases(lg) == [0, 5, 10, 15, 20, 25]
        lg.maybe_increment_log_start_offset(10)
        removed = lg.delete_old_segments(T0 + 100 * HOUR)
        assert [s.base_offset for s in removed] == [0, 5]
        assert bases(lg) == [10, 15, 20, 25]
        lg.close()

    def test_compact_delete_topic_applies_time_retention(self, tmp_path):
        lg = self._log(tmp_path, **{"cleanup.policy": "compact,delete", "retention.ms": HOUR})
        removed = lg.delete_old_segments(T0 + 2 * HOUR)
        assert [s.base_offset for s in removed] == [0, 5, 10, 15, 20, 25]
        assert bases(lg) == [30]
        lg.close()


# --------------------------------------------- Log: active segment, HW, .deleted files


class _LaggingLog(Log):
    """A log whose high watermark lags its end (as with followers behind): retention
    must not delete a segment holding offsets at or above the high watermark."""

    hw = 0

    @property
    def high_watermark(self) -> int:  # type: ignore[override]
        return self.hw


def test_segments_above_high_watermark_are_not_deleted(tmp_path):
    lg = _LaggingLog(tmp_path / "t-0", "t", 0, LogConfig(None, {"segment.bytes": ONE_BATCH_PER_SEGMENT, "retention.ms": HOUR}))
    for _ in range(5):
        append(lg, [T0 - 10 * HOUR])
    lg.hw = 2  # segment 1 ends at offset 1 < 2: deletable; segment 2 holds offset 2: not
    removed = lg.delete_old_segments(T0)
    assert [s.base_offset for s in removed] == [0, 1]
    assert bases(lg) == [2, 3, 4]
    lg.hw = 4
    removed = lg.delete_old_segments(T0)
    assert [s.base_offset for s in removed] == [2, 3]
    assert bases(lg) == [4]
    lg.close()


def test_deleted_segments_are_renamed_and_readers_keep_working(tmp_path):
    lg = make_log(tmp_path, **{"retention.ms": HOUR})
    append(lg, [T0 - 10 * HOUR])
    append(lg, [T0 - 10 * HOUR])
    append(lg, [T0])
    d = tmp_path / "t-0"
    held = lg.read(0, 1 << 20, True)  # a fetch that already holds segment 0
    assert held is not None
    before = held.read()
    removed = lg.delete_old_segments(T0)
    assert [s.base_offset for s in removed] == [0, 1]
    for seg in removed:
        assert seg.deleted
        assert all(p.name.endswith(".deleted") and p.exists() for p in seg.paths())
    assert files(d) >= seg_files(0, ".deleted") | seg_files(1, ".deleted") | seg_files(2)
    assert not (seg_files(0) | seg_files(1)) & files(d)
    assert held.read() == before
    assert [r.offset for b in decode_batches(before) for r in b.records] == [0]
    for seg in removed:
        seg.close()
    lg.close()


def test_active_segment_is_never_renamed(tmp_path):
    lg = make_log(tmp_path, **{"retention.ms": HOUR, "retention.bytes": 0})
    append(lg, [T0 - 10 * HOUR])
    append(lg, [T0 - 10 * HOUR])
    for now in (T0, T0 + HOUR, T0 + 100 * HOUR):
        lg.delete_old_segments(now)
        active = lg.active_segment
        assert not active.deleted
        assert active.log_path.name == f"{lg.log_end_offset:020d}.log"
        assert active.log_path.exists()
        assert len(lg.segments) >= 1
    lg.close()


# ------------------------------------------------------------------------- LogManager


def _manager(data_dir: Path) -> LogManager:
    lm = LogManager(data_dir)
    lm.startup()
    return lm


def _crash(lm: LogManager) -> None:
    """Drop the manager without a clean shutdown (as kill -9 would): only the lock goes."""
    assert lm._lock_fd is not None
    os.close(lm._lock_fd)
    lm._lock_fd = None


def _fill(lm: LogManager, topic: str, batches: int, ts: int, per_batch: int = 5) -> Log:
    lg = lm.get_log(topic, 0)
    assert lg is not None
    for _ in range(batches):
        append(lg, [ts] * per_batch)
    return lg


class TestLogManager:
    def test_deleted_files_removed_after_file_delete_delay(self, tmp_path):
        lm = _manager(tmp_path / "data")
        lm.create_topic("r", 1, {"segment.bytes": ONE_BATCH_PER_SEGMENT, "retention.ms": HOUR, "file.delete.delay.ms": 1000})
        lg = _fill(lm, "r", 4, T0 - 10 * HOUR)
        d = lg.dir
        now = T0
        assert lm.cleanup_logs(now) == 4
        doomed = seg_files(0, ".deleted") | seg_files(5, ".deleted") | seg_files(10, ".deleted") | seg_files(15, ".deleted")
        assert doomed <= files(d)
        assert bases(lg) == [20]
        assert lm.delete_due_segments(now + 999) == 0
        assert doomed <= files(d)
        assert lm.delete_due_segments(now + 1000) == 4
        assert not doomed & files(d)
        assert not [f for f in files(d) if f.endswith(".deleted")]
        assert lm.delete_due_segments(now + 10_000) == 0
        lm.shutdown()

    def test_zero_delay_removes_files_in_the_same_pass(self, tmp_path):
        lm = _manager(tmp_path / "data")
        lm.create_topic("r", 1, {"segment.bytes": ONE_BATCH_PER_SEGMENT, "retention.ms": HOUR, "file.delete.delay.ms": 0})
        lg = _fill(lm, "r", 3, T0 - 10 * HOUR)
        assert lm.cleanup_logs(T0) == 3
        assert sorted(files(lg.dir)) == sorted(seg_files(15))
        lm.shutdown()

    def test_delete_records_checkpoint_and_retention(self, tmp_path):
        data = tmp_path / "data"
        lm = _manager(data)
        lm.create_topic("r", 1, {"segment.bytes": ONE_BATCH_PER_SEGMENT, "retention.ms": -1, "file.delete.delay.ms": 0})
        lg = _fill(lm, "r", 6, T0)
        assert lm.delete_records("r", 0, 12) == 12
        assert (data / LOG_START_OFFSET_CHECKPOINT).read_text() == "0\n1\nr 0 12\n"
        assert bases(lg) == [0, 5, 10, 15, 20, 25]  # files stay until the retention check
        assert lm.delete_records("r", 0, 3) == 12  # never lowered
        assert lm.cleanup_logs(T0) == 2
        assert bases(lg) == [10, 15, 20, 25]
        assert (data / LOG_START_OFFSET_CHECKPOINT).read_text() == "0\n1\nr 0 12\n"
        assert lm.delete_records("r", 0, -1) == 30  # -1: the high watermark
        assert checkpoint.read_offsets(data / LOG_START_OFFSET_CHECKPOINT) == {("r", 0): 30}
        with pytest.raises(OffsetOutOfRangeError):
            lm.delete_records("r", 0, 31)
        lm.shutdown()

    def test_delete_records_racing_the_periodic_checkpoint(self, tmp_path):
        """The broker runs storage work on two threads: DeleteRecords (which checkpoints
        before answering) can run while the periodic checkpoint task or a retention pass
        writes the same file. Neither may fail, and once DeleteRecords has answered, the
        file on disk never holds an older start (a crash would bring records back)."""
        data = tmp_path / "data"
        lm = _manager(data)
        lm.create_topic("r", 1, {"retention.ms": -1})
        _fill(lm, "r", 1, T0, per_batch=500)
        stop = threading.Event()
        failures: list[str] = []

        def periodic_checkpoints() -> None:
            for _ in range(100_000):
                if stop.is_set():
                    return
                try:
                    lm.checkpoint_log_start_offsets()
                except Exception as e:
                    failures.append(f"checkpoint task: {e!r}")

        thread = threading.Thread(target=periodic_checkpoints, daemon=True)
        thread.start()
        stale: list[tuple[int, int]] = []
        try:
            for k in range(1, 301):
                try:
                    assert lm.delete_records("r", 0, k) == k
                except OSError as e:
                    failures.append(f"delete_records({k}): {e!r}")
                    continue
                on_disk = checkpoint.read_offsets(data / LOG_START_OFFSET_CHECKPOINT).get(("r", 0), 0)
                if on_disk < k:
                    stale.append((k, on_disk))
        finally:
            stop.set()
            thread.join(timeout=10)
        assert failures == []
        assert stale == []
        lm.shutdown()

    @pytest.mark.parametrize("clean", [True, False], ids=["clean-restart", "crash"])
    def test_restart_after_delete_records_keeps_start_offset(self, tmp_path, clean):
        data = tmp_path / "data"
        lm = _manager(data)
        lm.create_topic("r", 1, {"segment.bytes": ONE_BATCH_PER_SEGMENT, "retention.ms": -1, "file.delete.delay.ms": 60_000})
        _fill(lm, "r", 6, T0)
        lm.delete_records("r", 0, 12)
        assert lm.cleanup_logs(T0) == 2  # segments 0 and 5 renamed .deleted, removal pending
        if clean:
            lm.shutdown()
        else:
            _crash(lm)
        lm2 = _manager(data)
        lg = lm2.get_log("r", 0)
        assert lg is not None
        assert lg.log_start_offset == 12
        assert lg.log_end_offset == 30
        assert bases(lg) == [10, 15, 20, 25]
        assert not [f for f in files(lg.dir) if f.endswith(".deleted")]
        assert not (seg_files(0) | seg_files(5)) & files(lg.dir)
        assert read_offsets(lg, 12) == list(range(12, 30))
        with pytest.raises(OffsetOutOfRangeError):
            lg.read(11, 1 << 20, True)
        lm2.shutdown()

    @pytest.mark.parametrize("clean", [True, False], ids=["clean-restart", "crash"])
    def test_restart_after_delete_records_before_retention(self, tmp_path, clean):
        data = tmp_path / "data"
        lm = _manager(data)
        lm.create_topic("r", 1, {"segment.bytes": ONE_BATCH_PER_SEGMENT, "retention.ms": -1})
        _fill(lm, "r", 6, T0)
        lm.delete_records("r", 0, 17)
        if clean:
            lm.shutdown()
        else:
            _crash(lm)
        lm2 = _manager(data)
        lg = lm2.get_log("r", 0)
        assert lg is not None
        assert lg.log_start_offset == 17  # from log-start-offset-checkpoint
        assert bases(lg) == [0, 5, 10, 15, 20, 25]
        assert lm2.cleanup_logs(T0) == 3
        assert bases(lg) == [15, 20, 25]
        assert read_offsets(lg, 17) == list(range(17, 30))
        lm2.shutdown()

    @pytest.mark.parametrize("clean", [True, False], ids=["clean-restart", "crash"])
    def test_restart_after_time_retention_of_everything(self, tmp_path, clean):
        data = tmp_path / "data"
        lm = _manager(data)
        lm.create_topic("r", 1, {"segment.bytes": ONE_BATCH_PER_SEGMENT, "retention.ms": HOUR, "file.delete.delay.ms": 60_000})
        _fill(lm, "r", 4, T0 - 10 * HOUR)
        assert lm.cleanup_logs(T0) == 4
        if clean:
            lm.shutdown()
        else:
            _crash(lm)
        lm2 = _manager(data)
        lg = lm2.get_log("r", 0)
        assert lg is not None
        assert bases(lg) == [20]
        assert lg.log_start_offset == lg.log_end_offset == 20
        assert sorted(files(lg.dir)) == sorted(seg_files(20))
        # Appends continue at the old log end.
        append(lg, [T0])
        assert read_offsets(lg, 20) == [20]
        lm2.shutdown()

    @pytest.mark.parametrize("clean", [True, False], ids=["clean-restart", "crash"])
    def test_restart_after_size_retention(self, tmp_path, clean):
        data = tmp_path / "data"
        lm = _manager(data)
        seg = len(batch_bytes([T0] * 5))
        lm.create_topic("r", 1, {"segment.bytes": seg + seg // 2, "retention.ms": -1, "retention.bytes": 3 * seg, "file.delete.delay.ms": 60_000})
        lg = _fill(lm, "r", 6, T0)
        assert lg.size_in_bytes == 6 * seg
        assert lm.cleanup_logs(T0) == 3
        assert bases(lg) == [15, 20, 25]
        if clean:
            lm.shutdown()
        else:
            _crash(lm)
        lm2 = _manager(data)
        lg = lm2.get_log("r", 0)
        assert lg is not None
        assert bases(lg) == [15, 20, 25]
        assert lg.log_start_offset == 15
        assert read_offsets(lg, 15) == list(range(15, 30))
        assert not [f for f in files(lg.dir) if f.endswith(".deleted")]
        assert lm2.cleanup_logs(T0) == 0
        lm2.shutdown()
