"""Log: one partition's leader-facing log (Kafka's UnifiedLog for a single replica).

Loading and recovery are storage/log_loader.py's LogLoader; the segment list, rolling,
segment reads, renames, flush and close are storage/local_log.py's LocalLog (Kafka's split).

With one replica the high watermark is the log end offset after every append;
the last stable offset is the first offset of the earliest ongoing transaction,
else the high watermark (Kafka's firstUnstableOffset rules). Appends assign
offsets by patching each batch's baseOffset in place (the CRC does not cover it).
Transaction markers (control batches) are written by append_transaction_marker;
aborted transactions go to the segment's ``.txnindex`` (storage/txn_index.py).
"""

from __future__ import annotations

import bisect
import logging
import random
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kafka_sidecar.protocol.control_records import end_txn_marker_key, end_txn_marker_value
from kafka_sidecar.protocol.record_batch import (
    ATTRIBUTES_POS,
    BASE_OFFSET_POS,
    CRC_POS,
    MAX_TIMESTAMP_POS,
    PARTITION_LEADER_EPOCH_POS,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    compute_crc,
    read_header,
)
from kafka_sidecar.protocol.records import Record, encode_batch

from . import failpoints, retention
from .local_log import LocalLog
from .log_config import LogConfig
from .log_loader import LogLoader, aborted_txn_entry
from .log_segment import (
    DEFAULT_POOLS,
    AppendedBatch,
    FileSlice,
    LogSegment,
    OpenFilePools,
    StorageError,
)
from .producer_state import CompletedTxn, ProducerStateManager, snapshot_path
from .txn_index import AbortedTxn

__all__ = ["AppendInfo", "Log", "OffsetOutOfRangeError", "StorageError", "parse_partition_dir"]

log = logging.getLogger(__name__)

_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_U32 = struct.Struct(">I")

LEADER_EPOCH = 0


class OffsetOutOfRangeError(Exception):
    pass


@dataclass
class AppendInfo:
    first_offset: int
    last_offset: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    needs_flush: bool = False  # flush.messages reached: the caller must flush() before acknowledging


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """``<topic>-<partition>`` -> (topic, partition), or None if not a partition dir."""
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit():
        return None
    return topic, int(part)


class Log:
    """The leader-facing log (Kafka's UnifiedLog): offsets, producer state and transactions over
    a LocalLog of segments (storage/local_log.py), loaded by a LogLoader (storage/log_loader.py)."""

    def __init__(self, dir: Path, topic: str, partition: int, config: LogConfig, *, recovery_point: int = 0, log_start_offset: int | None = None,
                 clean_shutdown: bool = True, pools: OpenFilePools = DEFAULT_POOLS) -> None:
        self.dir = dir
        self.topic = topic
        self.partition = partition
        self.config = config
        # The segments; readers take one snapshot without locking, writers hold ``lock``.
        self._local = LocalLog(dir, topic, partition, pools)
        self.lock = threading.RLock()
        # (active segment's base offset, its roll jitter, (segment.jitter.ms, segment.ms) drawn for)
        self._jitter_drawn: tuple[int, int, tuple[int, int]] | None = None
        self.unflushed_messages = 0
        # Largest delete horizon the cleaner wrote (-1: none); tells it when tombstones expire.
        self.latest_delete_horizon = -1
        self.retired_segments: list[LogSegment] = []
        self.last_flush_ms = int(time.time() * 1000)
        # The directory is made by the loader when it does not exist (one listing, no mkdir per
        # partition found at start).
        self.producer_state = ProducerStateManager(dir, f"{topic}-{partition}")
        # (log end offset, its segment's base, its byte position) after the last append: where a
        # READ_COMMITTED read stops when the LSO is the log end (Kafka keeps this LogOffsetMetadata).
        self._end_position: tuple[int, int, int] | None = None
        loader = LogLoader(
            dir, topic, partition, config, self._local, self.producer_state,
            recovery_point=recovery_point, log_start_offset=log_start_offset, clean_shutdown=clean_shutdown,
        )
        offsets = loader.load()
        self.recovered_at_load = loader.recovered_segments  # for the start-up summary
        self.log_end_offset = offsets.log_end_offset
        self.recovery_point = offsets.recovery_point
        self.log_start_offset = offsets.log_start_offset
        self._first_unstable: int | None = self.producer_state.first_unstable_offset()  # cached

    @property
    def pools(self) -> OpenFilePools:
        """The pools of open files its segments count in (its LogManager's)."""
        return self._local.pools

    FULL_INDEX_CHECK_ENTRIES = LogLoader.FULL_INDEX_CHECK_ENTRIES  # the loader's (kept for callers)

    def replace_segments(self, new: LogSegment, old: list[LogSegment]) -> None:
        """Swap a cleaned segment (files ``.swap``) in for ``old``, under the log lock.

        Order matters for crash safety: old files become ``.deleted`` first, then the
        swap takes its final name; a crash in between is completed at load.
        Raises ValueError (nothing changed) if ``old`` is no longer in the log.
        """
        with self.lock:
            self._local.replace_segments(new, old)
            self.retired_segments.extend(old)

    def take_retired_segments(self) -> list[LogSegment]:
        """Segments replaced by the cleaner, renamed ``.deleted``, for delayed deletion."""
        with self.lock:
            out, self.retired_segments = self.retired_segments, []
            return out

    def _aborted_entry(self, completed: CompletedTxn) -> AbortedTxn:
        return aborted_txn_entry(self.producer_state, completed)

    @property
    def segments(self) -> list[LogSegment]:
        """The current segments, oldest first (a snapshot: never mutated in place)."""
        return self._local.segments

    # ---- properties ------------------------------------------------------------------

    @property
    def active_segment(self) -> LogSegment:
        return self._local.active_segment

    @property
    def high_watermark(self) -> int:
        return self.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        """Kafka's UnifiedLog.lastStableOffset: the first unstable offset (earliest ongoing
        transaction's first offset, at least the log start offset), capped by the high watermark."""
        hw = self.high_watermark
        first = self._first_unstable
        if first is None:
            return hw
        return min(max(first, self.log_start_offset), hw)

    def has_ongoing_transaction(self, producer_id: int) -> bool:
        return self.producer_state.has_ongoing_txn(producer_id)

    @property
    def size_in_bytes(self) -> int:
        return self._local.size_in_bytes

    # ---- append ----------------------------------------------------------------------

    def append_as_leader(self, records: bytearray, headers: list[BatchHeader], now_ms: int | None = None) -> AppendInfo:
        """Assign offsets to validated batches, then write them to the active segment.

        ``records`` is modified in place (baseOffset, partitionLeaderEpoch and,
        for LogAppendTime, maxTimestamp + attributes + CRC): per batch, never per record.
        """
        with self.lock:
            return self._append(records, headers, int(time.time() * 1000) if now_ms is None else now_ms)

    def _append(self, records: bytearray, headers: list[BatchHeader], now_ms: int) -> AppendInfo:
        append_time = self.config.log_append_time
        first = self.log_end_offset
        psm = self.producer_state
        offset = first
        for h in headers:
            if h.producer_id >= 0 and not h.is_control:
                duplicate = psm.check(h, offset)
                if duplicate is not None:
                    # A retried batch: answer with where it was written, write nothing (Kafka does the same).
                    return AppendInfo(duplicate.first_offset, duplicate.last_offset, -1, self.log_start_offset)
            offset += h.last_offset_delta + 1
        offset = first
        pos = 0
        batches: list[AppendedBatch] = []
        max_ts = -1
        for h in headers:
            _I64.pack_into(records, pos + BASE_OFFSET_POS, offset)
            _I32.pack_into(records, pos + PARTITION_LEADER_EPOCH_POS, LEADER_EPOCH)
            batch_max_ts = h.max_timestamp
            if append_time:
                _I16.pack_into(records, pos + ATTRIBUTES_POS, h.attributes | TIMESTAMP_TYPE_MASK)
                _I64.pack_into(records, pos + MAX_TIMESTAMP_POS, now_ms)
                _U32.pack_into(records, pos + CRC_POS, compute_crc(records, pos, h.size))
                batch_max_ts = now_ms
            last = offset + h.last_offset_delta
            batches.append(AppendedBatch(pos, h.size, last, batch_max_ts))
            max_ts = max(max_ts, batch_max_ts)
            offset = last + 1
            pos += h.size
        seg = self._maybe_roll(len(records), max_ts, offset - 1, now_ms)
        seg.append(records, batches)
        self._end_position = (offset, seg.base_offset, seg.size)
        self.log_end_offset = offset
        for h, b in zip(headers, batches, strict=True):
            if h.producer_id >= 0 and not h.is_control:
                psm.update(h, b.last_offset, b.max_timestamp)
        self._first_unstable = psm.first_unstable_offset()
        self.unflushed_messages += offset - first
        needs_flush = self.unflushed_messages >= self.config.flush_messages
        return AppendInfo(first, offset - 1, now_ms if append_time else -1, self.log_start_offset, needs_flush)

    def append_transaction_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool, now_ms: int | None = None) -> int:
        """Write Kafka's EndTransactionMarker (a control batch) for ``producer_id``; returns its offset.

        Ends the producer's ongoing transaction here (if any), moves the last stable offset
        and, for an ABORT of a transaction that had data in this partition, appends an
        AbortedTxn entry to the active segment's ``.txnindex``. A marker for a producer
        without an ongoing transaction is written too, without an index entry (Kafka's way).
        Never fsyncs: the caller flushes when ``flush_due`` (flush.messages reached).
        Raises ProducerStateError: INVALID_PRODUCER_EPOCH (47) for an older producer epoch,
        TRANSACTION_COORDINATOR_FENCED (52) for an older coordinator epoch; StorageError.
        """
        with self.lock:
            now_ms = int(time.time() * 1000) if now_ms is None else now_ms
            psm = self.producer_state
            offset = self.log_end_offset
            psm.check_end_txn(producer_id, producer_epoch, coordinator_epoch, offset)
            batch = bytearray(encode_end_txn_marker(producer_id, producer_epoch, coordinator_epoch, commit, now_ms))
            h = read_header(batch)
            self._append(batch, [h], now_ms)
            seg = self.active_segment  # the segment the marker went to (after any roll)
            completed = psm.end_txn(producer_id, producer_epoch, coordinator_epoch, commit, offset, h.max_timestamp)
            if completed is not None:
                if completed.is_aborted:
                    try:
                        seg.txn_index.append(self._aborted_entry(completed))
                    except OSError as e:
                        # The marker is in the log: a restart's recovery rebuilds the index from it.
                        log.error("%s-%d: cannot write the transaction index entry of the abort at %d: %s", self.topic, self.partition, offset, e)
                psm.complete_txn(completed)
            self._first_unstable = psm.first_unstable_offset()
            return offset

    def _maybe_roll(self, messages_size: int, max_timestamp: int, max_offset: int, now_ms: int) -> LogSegment:
        seg = self.active_segment
        if seg.should_roll(messages_size, max_timestamp, max_offset, self.config.segment_bytes, self.config.max_segment_ms - self._roll_jitter(), now_ms):
            return self._roll()
        return seg

    def _roll_jitter(self) -> int:
        """The active segment's roll jitter: drawn once per segment, below min(segment.jitter.ms,
        segment.ms) (Kafka's LogConfig.randomSegmentJitter), so a jitter larger than segment.ms
        cannot make every append roll."""
        jitter, segment_ms = self.config.segment_jitter_ms, self.config.segment_ms
        if jitter <= 0:
            return 0
        base = self.active_segment.base_offset
        drawn = self._jitter_drawn
        if drawn is None or drawn[0] != base or drawn[2] != (jitter, segment_ms):
            drawn = (base, random.randrange(max(1, min(jitter, segment_ms))), (jitter, segment_ms))
            self._jitter_drawn = drawn
        return drawn[1]

    def roll(self) -> LogSegment:
        """Start a new active segment at the log end offset."""
        with self.lock:
            return self._roll()

    def _roll(self) -> LogSegment:
        old = self.active_segment
        new_base = self.log_end_offset
        if old.base_offset == new_base and old.size == 0:
            return old
        old.on_become_inactive()
        failpoints.hit("log.roll.after_trim")
        try:
            self.producer_state.take_snapshot(new_base)
        except OSError as e:
            # The snapshot only saves replay work at the next start: go on without it.
            log.warning("%s-%d: cannot write producer snapshot at %d (%s); state is rebuilt from the log if needed", self.topic, self.partition, new_base, e.strerror or e)
            tmp = snapshot_path(self.dir, new_base)
            for p in (tmp, tmp.with_name(tmp.name + ".tmp")):
                p.unlink(missing_ok=True)
        failpoints.hit("log.roll.after_snapshot")
        new = self._local.roll(new_base, self.config)
        log.info("rolled %s-%d: new segment %020d (previous %d bytes)", self.topic, self.partition, new_base, old.size)
        return new

    # ---- read ------------------------------------------------------------------------

    def read(self, fetch_offset: int, max_bytes: int, min_one_message: bool, max_offset: int | None = None) -> FileSlice | None:
        """Data from ``fetch_offset`` up to the high watermark (or ``max_offset``, e.g. the last
        stable offset); raises OffsetOutOfRangeError."""
        return self._read(fetch_offset, max_bytes, min_one_message, max_offset)[0]

    def read_committed(self, fetch_offset: int, max_bytes: int, min_one_message: bool) -> tuple[int, FileSlice | None, list[AbortedTxn]]:
        """A READ_COMMITTED read (Kafka's LocalLog.read with TXN_COMMITTED isolation): data only
        below the last stable offset, and the aborted transactions overlapping the fetched range.
        Returns (last stable offset used, data, aborted transactions)."""
        lso = self.last_stable_offset
        data, seg_index, segments = self._read(fetch_offset, max_bytes, min_one_message, lso)
        if data is None:
            return lso, None, []
        seg = segments[seg_index]
        upper = seg.fetch_upper_bound_offset(data.position + data.size)
        if upper is None:
            upper = segments[seg_index + 1].base_offset if seg_index + 1 < len(segments) else self.log_end_offset
        return lso, data, LocalLog.collect_aborted(segments, seg_index, fetch_offset, upper)

    def _read(self, fetch_offset: int, max_bytes: int, min_one_message: bool, max_offset: int | None) -> tuple[FileSlice | None, int, list[LogSegment]]:
        if fetch_offset < self.log_start_offset or fetch_offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {fetch_offset} is outside [{self.log_start_offset}, {self.log_end_offset}] for {self.topic}-{self.partition}"
            )
        view = self._local.view
        segments = view[0]
        if fetch_offset == self.log_end_offset or (max_offset is not None and fetch_offset >= max_offset):
            return None, -1, segments
        data, i = self._local.read(view, fetch_offset, max_bytes, min_one_message, max_offset, self._end_position)
        return data, i, segments

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [start_offset, upper_bound_offset) (Kafka's
        UnifiedLog.collectAbortedTransactions, used by the cleaner)."""
        segments, bases = self._local.view
        i = max(0, bisect.bisect_right(bases, start_offset) - 1)
        return LocalLog.collect_aborted(segments, i, self.log_start_offset, upper_bound_offset)

    def segment_for(self, offset: int) -> LogSegment:
        return self._local.segment_for(offset)

    def fetch_offset_by_timestamp(self, timestamp: int) -> tuple[int, int, int] | None:
        """Kafka's UnifiedLog.fetchOffsetByTimestamp for a plain timestamp: search only the first
        segment whose largest timestamp is >= ``timestamp`` (even one wholly below the log start,
        which then finds nothing), for its first record at or after the log start with a
        timestamp >= ``timestamp``: (timestamp, offset, leader epoch), or None."""
        start = self.log_start_offset
        for seg in self.segments:
            if seg.largest_timestamp() >= timestamp:
                return seg.search_for_timestamp(timestamp, start)
        return None

    # ---- log start offset and retention ----------------------------------------------

    def maybe_increment_log_start_offset(self, new_offset: int) -> bool:
        """Raise the log start offset (DeleteRecords); never lowers it. Raises
        OffsetOutOfRangeError above the high watermark, as Kafka does."""
        with self.lock:
            if new_offset > self.high_watermark:
                raise OffsetOutOfRangeError(
                    f"Cannot increment the log start offset to {new_offset} of partition {self.topic}-{self.partition} "
                    f"since it is larger than the high watermark {self.high_watermark}"
                )
            if new_offset <= self.log_start_offset:
                return False
            log.info("%s-%d: log start offset %d -> %d (DeleteRecords)", self.topic, self.partition, self.log_start_offset, new_offset)
            self.log_start_offset = new_offset
            return True

    def delete_old_segments(self, now_ms: int) -> list[LogSegment]:
        """Apply retention (time, size, log start offset); returns the segments removed
        from the log, already renamed ``.deleted``, for the caller to delete later."""
        removed: list[LogSegment] = []
        with self.lock:
            # Each check sees the log as the previous one left it (sizes, start offset).
            checks: list[tuple[str, Callable[[], retention.Predicate | None]]] = []
            if self.config.delete:
                checks.append(("retention.ms", lambda: retention.retention_ms_predicate(self.config.retention_ms, now_ms)))
                checks.append(("retention.bytes", lambda: retention.retention_size_predicate(self.config.retention_bytes, self.size_in_bytes)))
            checks.append(("log start offset", lambda: retention.log_start_offset_predicate(self.log_start_offset)))
            for reason, make_predicate in checks:
                predicate = make_predicate()
                if predicate is None:
                    continue
                n = retention.deletable_prefix(self.segments, predicate, self.high_watermark, self.log_end_offset)
                if n:
                    removed += self._delete_segments(n, reason)
        return removed

    def _delete_segments(self, n: int, reason: str) -> list[LogSegment]:
        segments = self.segments
        if n == len(segments):
            # Every segment is expired: roll first, the log always keeps one segment.
            self._roll()
            segments = self.segments
            if segments[n - 1] is self.active_segment:
                n -= 1
        doomed = self._local.remove_oldest(n)
        kept = self.segments
        if kept[0].base_offset > self.log_start_offset:
            self.log_start_offset = kept[0].base_offset
        self.producer_state.delete_snapshots_below(kept[0].base_offset)
        log.info(
            "%s-%d: deleting %d segment(s) %s by %s; log start offset now %d",
            self.topic, self.partition, len(doomed), [s.base_offset for s in doomed], reason, self.log_start_offset,
        )
        return doomed

    # ---- durability ------------------------------------------------------------------

    def flush(self, up_to: int | None = None) -> None:
        """fsync segments holding offsets below ``up_to`` (default: the log end) and
        advance the recovery point to it. Blocking: the server calls it off the loop."""
        end = self.log_end_offset if up_to is None else up_to
        if end <= self.recovery_point:
            return
        self._local.flush(end, self.recovery_point)
        self.recovery_point = end
        if up_to is None:
            self.unflushed_messages = 0
            self.last_flush_ms = int(time.time() * 1000)

    @property
    def flush_due(self) -> bool:
        """flush.messages reached since the last flush: the writer must flush before acknowledging
        (the server's ReplicaManager does it off the event loop)."""
        return self.unflushed_messages >= self.config.flush_messages

    @property
    def rolled_unflushed(self) -> bool:
        """Kafka flushes a segment once it is rolled; true while that is pending."""
        return self.recovery_point < self.active_segment.base_offset

    def close(self, *, trim: bool = True) -> None:
        """Close files; a clean close (``trim``) also snapshots producer state at the log end."""
        if trim:
            self.producer_state.take_snapshot(self.log_end_offset, sync=True)
        self._local.close(trim=trim)

    def delete_all(self) -> None:
        """Close and remove this log's directory (topic deletion)."""
        self._local.delete_all()


def encode_end_txn_marker(producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool, timestamp: int) -> bytes:
    """Kafka's MemoryRecords.withEndTransactionMarker: a transactional control batch with one
    record, key = (version 0, type: 0 ABORT / 1 COMMIT), value = (version 0, coordinator epoch)."""
    record = Record(0, timestamp, end_txn_marker_key(commit), end_txn_marker_value(coordinator_epoch))
    return encode_batch(
        [record], producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=-1,
        partition_leader_epoch=LEADER_EPOCH, is_transactional=True, is_control=True,
    )
