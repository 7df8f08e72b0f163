"""Log compaction: Kafka's LogCleaner, LogCleanerManager, Cleaner and SkimpyOffsetMap.

One round (``LogCleaner.clean_one``):
1. LogCleanerManager picks the filthiest compacted log: dirty ratio =
   cleanable bytes / (clean + cleanable bytes) over [first dirty offset, first
   uncleanable offset), ratio > ``min.cleanable.dirty.ratio`` or dirty bytes past
   ``max.compaction.lag.ms``. As in Kafka, tombstones past their delete horizon
   never make a log cleanable: an idle log keeps them until its next real cleaning.
   The first dirty offset comes from ``cleaner-offset-checkpoint``; the first
   uncleanable offset is the active segment's base, the high watermark, or the
   first segment younger than ``min.compaction.lag.ms``.
2. Cleaner builds the offset map key -> last offset over the dirty section
   (16-byte MD5 of the key, or the key itself when shorter than 16 bytes;
   bounded like Kafka's dedupe buffer; if it fills, only the prefix that fit
   is cleaned and the rest waits for the next round).
3. Every segment from the log start to the end of the mapped section is
   rewritten, in groups that fit ``segment.bytes`` and the index size: a record
   stays if its offset >= the map's offset for its key; a tombstone stays until
   its batch's delete horizon (set on first cleaning to now +
   ``delete.retention.ms``, KIP-534) has passed; a batch that loses all its
   records is dropped, unless it is its producer's last (kept empty, so
   idempotent state survives). Batches keep producer id/epoch, base sequence,
   last offset, timestamps and codec.
   Transactions (Kafka's CleanedTransactionMetadata): records of aborted
   transactions (from the ``.txnindex`` files) are neither mapped nor kept;
   a transaction marker stays while its transaction has data in the log, then
   gets a delete horizon and goes once that has passed; the cleaned segment's
   ``.txnindex`` holds the aborts whose data it still holds. Nothing at or past
   the last stable offset is cleaned.
4. Each group is written to ``<base>.log.cleaned`` (+ indexes), renamed
   ``.swap``, swapped into the log (old segments renamed ``.deleted``), renamed
   to its final name. A crash leaves ``.cleaned`` (dropped at load) or ``.swap``
   (completed at load): nothing is lost.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kafka_sidecar.protocol.control_records import ABORT, COMMIT, control_type
from kafka_sidecar.protocol.record_batch import read_header
from kafka_sidecar.protocol.records import RecordBatch, decode_batches, encode_batch

from . import failpoints
from .cleaner_manager import (
    CLEANER_CHECKPOINT,
    CleanerAbortedError,
    LogCleanerManager,
    LogToClean,
    _segments_overlapping,
)
from .log import Log
from .log_segment import CLEANED_SUFFIX, DELETED_SUFFIX, SWAP_SUFFIX, AppendedBatch, LogSegment
from .offset_map import BYTES_PER_ENTRY, SHORT_KEY, SkimpyOffsetMap
from .throttler import NO_LIMIT, Throttler
from .txn_index import AbortedTxn, TransactionIndex

log = logging.getLogger(__name__)

DEFAULT_IO_BUFFER_SIZE = 524288  # log.cleaner.io.buffer.size
LENGTH_END = 12  # a batch's size is its 4-byte length at byte 8, plus these 12 bytes
THROTTLE_SLICE_S = 0.02


@dataclass
class CleanerStats:
    """Figures of one cleaning, logged and kept for metrics."""

    topic_partition: str = ""
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_removed: int = 0
    tombstones_removed: int = 0
    map_entries: int = 0
    buffer_utilization: float = 0.0  # the offset map's entries / slots after it was built
    start_ms: float = field(default_factory=lambda: time.time() * 1000)
    end_ms: float = 0.0
    first_dirty_offset: int = 0
    end_offset: int = 0

    @property
    def duration_ms(self) -> float:
        return max(0.0, self.end_ms - self.start_ms)

    def summary(self) -> str:
        secs = max(self.duration_ms / 1000, 1e-6)
        return (
            f"cleaned {self.topic_partition} offsets [{self.first_dirty_offset}, {self.end_offset}): "
            f"{self.bytes_read} -> {self.bytes_written} bytes, {self.records_read} records read, "
            f"{self.records_removed} removed ({self.tombstones_removed} tombstones), "
            f"map {self.map_entries} keys, {self.duration_ms:.0f} ms, {self.bytes_read / secs / 1e6:.1f} MB/s"
        )


class Cleaner:
    """Cleans one log: offset map, then rewrite of segment groups (Kafka's Cleaner).

    Segments are read through a read buffer of ``io_buffer_size`` bytes (grown, for one
    segment, to hold a batch larger than it: up to ``max.message.bytes`` at a time, or the
    batch's own size, as Kafka's growBuffersOrFail), and each buffer's surviving batches are
    written to the cleaned segment at once: a segment is never held in memory whole. Between
    buffers the cleaner checks for an abort and feeds the throttler.
    """

    def __init__(self, offset_map: SkimpyOffsetMap, check_aborted: Callable[[Log], None], now: Callable[[], int] | None = None, *,
                 io_buffer_size: int = DEFAULT_IO_BUFFER_SIZE // 2, throttler: Throttler | None = None) -> None:
        self.offset_map = offset_map
        self.check_aborted = check_aborted
        self.now = now or (lambda: int(time.time() * 1000))
        self.io_buffer_size = max(LENGTH_END, io_buffer_size)
        self.throttler = throttler or Throttler(NO_LIMIT)
        self.max_read_size = 0  # largest read buffer used (tests, stats)

    def clean(self, ltc: LogToClean) -> tuple[int, CleanerStats]:
        lg = ltc.log
        stats = CleanerStats(topic_partition=f"{lg.topic}-{lg.partition}", first_dirty_offset=ltc.first_dirty_offset)
        omap = self.offset_map
        omap.clear()
        end_offset = self._build_offset_map(lg, ltc.first_dirty_offset, ltc.first_uncleanable_offset, stats)
        stats.map_entries = omap.size
        stats.buffer_utilization = omap.utilization
        now_ms = self.now()
        delete_retention_ms = lg.config.values["delete.retention.ms"]
        latest_horizon = -1
        for group in self._group_segments(lg, end_offset):
            self.check_aborted(lg)
            latest_horizon = max(latest_horizon, self._clean_segments(lg, group, end_offset, now_ms, now_ms + delete_retention_ms, stats))
        # Every segment below end_offset was just rewritten: this is now the log's latest horizon.
        lg.latest_delete_horizon = latest_horizon
        stats.end_offset = end_offset
        stats.end_ms = time.time() * 1000
        return end_offset, stats

    # ---- reading -------------------------------------------------------------------

    def _throttle(self, lg: Log, observed: int) -> None:
        """Feed the throttler; its sleep is cut in slices so that an abort is noticed within
        ``THROTTLE_SLICE_S`` (Kafka sleeps it whole)."""
        def sleep(seconds: float) -> None:
            end = time.monotonic() + seconds
            while (left := end - time.monotonic()) > 0:
                self.check_aborted(lg)
                time.sleep(min(left, THROTTLE_SLICE_S))

        self.throttler.maybe_throttle(observed, sleep)

    def _read_buffers(self, lg: Log, seg: LogSegment) -> Iterator[tuple[bytes, list[RecordBatch]]]:
        """The segment's batches, one read buffer at a time: (buffer bytes, its whole batches).

        A batch that does not fit the buffer grows it for the rest of the segment; a
        truncated batch at the end of the segment ends the reading (as a whole read did).
        The abort check happens before every read, the throttler counts every read.
        """
        size = seg.size
        read_size = self.io_buffer_size
        max_message = max(read_size, lg.config.max_message_bytes)
        pos = 0
        while pos < size:
            self.check_aborted(lg)
            raw = seg.read_batch_bytes(pos, min(read_size, size - pos))
            batches = decode_batches(raw, verify_crc=False)
            if not batches:
                if len(raw) < LENGTH_END:
                    return
                need = int.from_bytes(raw[8:LENGTH_END], "big", signed=True) + LENGTH_END
                if need <= len(raw) or pos + need > size:
                    return  # a truncated batch at the end of the segment
                read_size = max(need, min(read_size * 2, max_message))
                self.max_read_size = max(self.max_read_size, read_size)
                continue
            used = sum(b.size for b in batches)
            self.max_read_size = max(self.max_read_size, len(raw))
            self._throttle(lg, used)
            yield raw, batches
            pos += used

    # ---- offset map ----------------------------------------------------------------

    def _build_offset_map(self, lg: Log, start: int, end: int, stats: CleanerStats) -> int:
        """Map keys of [start, end) (Kafka's buildOffsetMap); returns where mapping ended.

        The map is checked before every put: when full it stops, even inside a
        segment, and cleaning covers only up to the last batch mapped whole.
        """
        omap = self.offset_map
        put = omap.put
        slots = omap.slots
        txns = CleanedTransactionMetadata(lg.collect_aborted_transactions(start, end))
        for seg in _segments_overlapping(lg, start, end):
            self.check_aborted(lg)
            for _raw, batches in self._read_buffers(lg, seg):
                for batch in batches:
                    if batch.last_offset < start:
                        continue
                    if batch.is_control:
                        txns.on_control_batch_read(batch)
                    elif not txns.on_batch_read(batch):  # records of an aborted transaction are not mapped
                        for r in batch.records:
                            key = r.key
                            if key is not None and start <= r.offset < end:
                                if omap.entries >= slots:
                                    return max(start, omap.latest_offset + 1)
                                put(key, r.offset)
                    if start <= batch.last_offset < end:
                        omap.latest_offset = max(omap.latest_offset, batch.last_offset)
        return max(start, omap.latest_offset + 1)

    # ---- grouping ------------------------------------------------------------------

    def _group_segments(self, lg: Log, end_offset: int) -> list[list[LogSegment]]:
        """Consecutive segments below ``end_offset`` whose sum fits segment.bytes and the index size."""
        segs = [s for s in lg.segments if s.read_next_offset() <= end_offset or s.base_offset < end_offset]
        segs = [s for s in segs if s is not lg.active_segment and s.base_offset < end_offset]
        max_size = lg.config.segment_bytes
        max_index = lg.config.segment_index_bytes
        groups: list[list[LogSegment]] = []
        i = 0
        while i < len(segs):
            group = [segs[i]]
            log_size = segs[i].size
            index_size = segs[i].offset_index.size_in_bytes
            time_size = segs[i].time_index.size_in_bytes
            i += 1
            while i < len(segs):
                s = segs[i]
                if (log_size + s.size > max_size or index_size + s.offset_index.size_in_bytes > max_index
                        or time_size + s.time_index.size_in_bytes > max_index
                        or s.read_next_offset() - 1 - group[0].base_offset > 2**31 - 1):
                    break
                group.append(s)
                log_size += s.size
                index_size += s.offset_index.size_in_bytes
                time_size += s.time_index.size_in_bytes
                i += 1
            groups.append(group)
        return groups

    # ---- rewriting -----------------------------------------------------------------

    def _clean_segments(self, lg: Log, group: list[LogSegment], map_end: int, now_ms: int, new_horizon: int, stats: CleanerStats) -> int:
        """Rewrite one group into one segment; returns the largest delete horizon kept (-1: none)."""
        base = group[0].base_offset
        for suffix in (".log", ".index", ".timeindex", ".txnindex"):
            (lg.dir / f"{base:020d}{suffix}{CLEANED_SUFFIX}").unlink(missing_ok=True)
        cleaned = LogSegment(lg.dir, base, lg.config.index_interval_bytes, lg.config.segment_index_bytes, active=False, suffix=CLEANED_SUFFIX,
                             pools=lg.pools)
        latest_horizon = -1
        txns = CleanedTransactionMetadata([], cleaned.txn_index)
        try:
            segments = lg.segments
            for seg in group:
                self.check_aborted(lg)
                # Kafka's cleanSegments: the aborted transactions overlapping this segment.
                nxt = next((s.base_offset for s in segments if s.base_offset > seg.base_offset), seg.read_next_offset())
                txns.add_aborted_transactions(lg.collect_aborted_transactions(seg.base_offset, nxt))
                for raw, batches in self._read_buffers(lg, seg):
                    stats.bytes_read += sum(b.size for b in batches)
                    outs: list[bytes] = []
                    appended: list[AppendedBatch] = []
                    written = 0
                    pos = 0
                    for batch in batches:
                        original = raw[pos : pos + batch.size]
                        pos += batch.size
                        out, horizon = self._filter_batch(lg, batch, original, map_end, now_ms, new_horizon, stats, txns)
                        if out is None:
                            continue
                        latest_horizon = max(latest_horizon, horizon)
                        appended.append(AppendedBatch(written, len(out), batch.last_offset, _max_ts(out, batch)))
                        outs.append(out)
                        written += len(out)
                    if appended:
                        # One write per read buffer (Kafka's write buffer), indexed batch by batch.
                        cleaned.append(b"".join(outs), appended)
                        stats.bytes_written += written
                        self._throttle(lg, written)
                        failpoints.hit("cleaner.clean.after_buffer_write")
            cleaned.on_become_inactive()
            cleaned.flush()
            cleaned.change_suffix(CLEANED_SUFFIX, SWAP_SUFFIX)
            self.check_aborted(lg)
            try:
                lg.replace_segments(cleaned, group)
            except ValueError as e:
                # Retention or a truncation replaced these segments meanwhile: not this log's fault.
                raise CleanerAbortedError(f"cleaning of {lg.topic}-{lg.partition} was aborted: {e}") from e
        except BaseException:
            cleaned.close()
            for p in cleaned.paths():
                p.unlink(missing_ok=True)
            raise
        return latest_horizon

    def _filter_batch(self, lg: Log, batch: RecordBatch, original: bytes, map_end: int, now_ms: int, new_horizon: int, stats: CleanerStats,
                      txns: CleanedTransactionMetadata | None = None) -> tuple[bytes | None, int]:
        """The batch to write for ``batch`` (original bytes when untouched), and its delete horizon."""
        txns = txns if txns is not None else CleanedTransactionMetadata([])
        if batch.is_control:
            return self._filter_control_batch(lg, batch, original, now_ms, new_horizon, stats, txns)
        if txns.on_batch_read(batch):
            # Kafka: the records of an aborted transaction are all removed.
            stats.records_read += len(batch.records)
            stats.records_removed += len(batch.records)
            if batch.producer_id >= 0 and _is_last_batch_of_producer(lg, batch):
                return _empty_batch(batch), -1
            return None, -1
        latest = self.offset_map.get
        horizon = batch.delete_horizon_ms
        expired = horizon is not None and horizon <= now_ms
        records = batch.records
        kept = []
        has_tombstones = False
        tombstones_removed = 0
        for r in records:
            key = r.key
            if key is None:
                continue  # cannot happen on a compacted topic; Kafka drops them when cleaning
            offset = r.offset
            if offset < map_end and latest(key) > offset:
                continue  # a later record with this key exists
            if r.value is None:
                if expired:
                    tombstones_removed += 1  # tombstone past its delete horizon
                    continue
                has_tombstones = True
            kept.append(r)
        stats.records_read += len(records)
        stats.records_removed += len(records) - len(kept)
        stats.tombstones_removed += tombstones_removed
        set_horizon = has_tombstones and horizon is None
        if len(kept) == len(records) and not set_horizon:
            # The log's latest horizon only counts batches that still hold tombstones.
            return original, horizon if (horizon is not None and has_tombstones) else -1
        if not kept:
            if batch.producer_id >= 0 and _is_last_batch_of_producer(lg, batch):
                # Keep an empty batch so the producer's last sequence survives (Kafka's RETAIN_EMPTY).
                return _empty_batch(batch), -1
            return None, -1
        horizon_out = new_horizon if set_horizon else horizon
        return encode_batch(
            kept, base_offset=batch.base_offset, compression=batch.compression, producer_id=batch.producer_id,
            producer_epoch=batch.producer_epoch, base_sequence=batch.base_sequence,
            partition_leader_epoch=batch.partition_leader_epoch, timestamp_type=batch.timestamp_type,
            is_transactional=batch.is_transactional, delete_horizon_ms=horizon_out,
            max_timestamp=batch.max_timestamp if batch.timestamp_type == 1 else None,
            last_offset_delta=batch.last_offset_delta,
        ), (horizon_out if (horizon_out is not None and has_tombstones) else -1)


    def _filter_control_batch(self, lg: Log, batch: RecordBatch, original: bytes, now_ms: int, new_horizon: int, stats: CleanerStats,
                              txns: CleanedTransactionMetadata) -> tuple[bytes | None, int]:
        """Kafka's rule for transaction markers: a marker whose transaction has no data left
        ("can discard") gets a delete horizon, and goes once the horizon has passed (an empty
        batch stays if it is its producer's last); otherwise it is kept as is."""
        can_discard = txns.on_control_batch_read(batch)
        if not can_discard:
            return original, -1
        horizon = batch.delete_horizon_ms
        stats.records_read += len(batch.records)
        if horizon is not None and horizon <= now_ms:
            stats.records_removed += len(batch.records)
            if batch.producer_id >= 0 and _is_last_batch_of_producer(lg, batch):
                return (original if not batch.records else _empty_batch(batch)), -1
            return None, -1
        if horizon is not None:
            return original, horizon
        return encode_batch(
            batch.records, base_offset=batch.base_offset, producer_id=batch.producer_id, producer_epoch=batch.producer_epoch,
            base_sequence=batch.base_sequence, partition_leader_epoch=batch.partition_leader_epoch,
            timestamp_type=batch.timestamp_type, is_transactional=batch.is_transactional, is_control=True,
            delete_horizon_ms=new_horizon, max_timestamp=batch.max_timestamp if batch.timestamp_type == 1 else None,
            last_offset_delta=batch.last_offset_delta,
        ), new_horizon


class CleanedTransactionMetadata:
    """Kafka's CleanedTransactionMetadata: walks batches in offset order, telling which belong to
    aborted transactions (known from the txn indexes), and which markers can go. Retained ABORT
    markers whose transaction still has data are re-indexed into ``cleaned_index``."""

    def __init__(self, aborted: list[AbortedTxn], cleaned_index: TransactionIndex | None = None) -> None:
        self._pending: list[AbortedTxn] = []  # sorted by first offset (Kafka's min-heap)
        self._seen: set[AbortedTxn] = set()
        self.ongoing_committed: set[int] = set()
        self.ongoing_aborted: dict[int, list] = {}  # producer id -> [AbortedTxn, last observed batch offset or None]
        self.cleaned_index = cleaned_index
        self.add_aborted_transactions(aborted)

    def add_aborted_transactions(self, aborted: list[AbortedTxn]) -> None:
        for t in aborted:
            if t not in self._seen:
                self._seen.add(t)
                self._pending.append(t)
        self._pending.sort(key=lambda t: t.first_offset)

    def _consume_up_to(self, offset: int) -> None:
        pending = self._pending
        while pending and pending[0].first_offset <= offset:
            t = pending.pop(0)
            self.ongoing_aborted.setdefault(t.producer_id, [t, None])

    def on_control_batch_read(self, batch: RecordBatch) -> bool:
        """True if the marker can be discarded (its transaction has no data left)."""
        self._consume_up_to(batch.last_offset)
        if not batch.records:
            return True  # an empty control batch was already cleaned
        kind = control_type(batch.records[0].key)
        pid = batch.producer_id
        if kind == ABORT:
            meta = self.ongoing_aborted.pop(pid, None)
            if meta is not None and meta[1] is not None:
                if self.cleaned_index is not None:
                    self.cleaned_index.append(meta[0])
                return False
            return True
        if kind == COMMIT:
            if pid in self.ongoing_committed:
                self.ongoing_committed.discard(pid)
                return False
            return True
        return False

    def on_batch_read(self, batch: RecordBatch) -> bool:
        """True if this data batch belongs to an aborted transaction (safe to discard)."""
        self._consume_up_to(batch.last_offset)
        if not batch.is_transactional:
            return False
        meta = self.ongoing_aborted.get(batch.producer_id)
        if meta is not None:
            meta[1] = batch.last_offset
            return True
        self.ongoing_committed.add(batch.producer_id)
        return False


def _empty_batch(batch: RecordBatch) -> bytes:
    """The empty batch Kafka's RETAIN_EMPTY keeps: header fields (offsets, producer, sequence) only."""
    return encode_batch(
        [], base_offset=batch.base_offset, producer_id=batch.producer_id, producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence, partition_leader_epoch=batch.partition_leader_epoch,
        timestamp_type=batch.timestamp_type, is_transactional=batch.is_transactional, is_control=batch.is_control,
        base_timestamp=batch.max_timestamp, max_timestamp=batch.max_timestamp,
        last_offset_delta=batch.last_offset_delta,
    )


def _max_ts(encoded: bytes, batch: RecordBatch) -> int:
    return read_header(encoded).max_timestamp


def _is_last_batch_of_producer(lg: Log, batch: RecordBatch) -> bool:
    """Kafka's isBatchLastRecordOfProducer: the batch holding the producer's last data offset,
    or, when it has none, a marker of its current epoch (kept for fencing)."""
    entry = lg.producer_state.producers.get(batch.producer_id)
    if entry is None:
        return False
    if entry.batches:
        return entry.batches[-1].last_offset == batch.last_offset
    return batch.is_control and batch.producer_epoch == entry.producer_epoch


class LogCleaner:
    """The cleaner threads (``log.cleaner.threads``): each round cleans the filthiest log,
    then backs off. The dedupe buffer and the I/O buffers are split between the threads,
    and one throttler (``log.cleaner.io.max.bytes.per.second``) is shared by all of them.

    Kafka's gauges, read by the server's metrics: ``uncleanable_partitions_count``,
    ``uncleanable_bytes``, ``max_dirty_percent``, ``time_since_last_run_ms``,
    ``max_buffer_utilization_percent``, ``cleaner_recopy_percent``, ``max_clean_time_secs``,
    ``dead_thread_count``.
    """

    def __init__(self, data_dir: Path, logs: Callable[[], list[Log]], *, threads: int = 1, dedupe_buffer_size: int = 134217728,
                 io_buffer_load_factor: float = 0.9, backoff_ms: int = 15000, enabled: bool = True,
                 io_buffer_size: int = DEFAULT_IO_BUFFER_SIZE, max_io_bytes_per_second: float = NO_LIMIT,
                 on_segments_deleted: Callable[[Log, list[LogSegment], int], None] | None = None) -> None:
        self.manager = LogCleanerManager(data_dir)
        self.logs = logs
        # Told of the segments retention removed from a compacted log in a cleaner thread
        # (renamed .deleted, to be deleted after file.delete.delay.ms): the LogManager's.
        self.on_segments_deleted = on_segments_deleted
        self.threads = threads if enabled else 0
        # Kafka splits the dedupe buffer between the cleaner threads, and each thread's share
        # of log.cleaner.io.buffer.size in two: a read buffer and a write buffer.
        self.map_memory = dedupe_buffer_size // max(1, threads)
        self.io_buffer_size = io_buffer_size // max(1, threads) // 2
        self.load_factor = io_buffer_load_factor
        self.backoff_ms = backoff_ms
        self.throttler = Throttler(max_io_bytes_per_second)
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._threads: list[threading.Thread] = []
        self.last_stats: CleanerStats | None = None
        self.thread_stats: dict[int, CleanerStats] = {}  # the last cleaning of each thread
        self.rounds = 0

    def new_cleaner(self, now: Callable[[], int] | None = None) -> Cleaner:
        """A Cleaner with this cleaner's per-thread map, I/O buffer and shared throttler."""
        return Cleaner(SkimpyOffsetMap(self.map_memory, self.load_factor), self.manager.check_aborted, now,
                       io_buffer_size=self.io_buffer_size, throttler=self.throttler)

    def start(self) -> None:
        for i in range(self.threads):
            t = threading.Thread(target=self._run, args=(i,), name=f"kafka-log-cleaner-thread-{i}", daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        for t in self._threads:
            t.join(timeout=30)

    def _run(self, thread_id: int = 0) -> None:
        cleaner = self.new_cleaner()
        while not self._stop.is_set():
            try:
                cleaned = self.clean_one(cleaner, thread_id=thread_id)
            except Exception:
                log.exception("log cleaner round failed")
                cleaned = False
            try:
                self.delete_old_segments()
            except Exception:
                log.exception("log cleaner retention pass failed")
            if not cleaned:
                self._wake.wait(self.backoff_ms / 1000)
                self._wake.clear()
            self.manager.maintain_uncleanable_partitions(self.logs())

    def clean_one(self, cleaner: Cleaner | None = None, now_ms: int | None = None, *, thread_id: int = 0) -> bool:
        """One round; True if a log was cleaned. A log whose cleaning raises (other than an
        abort) is marked uncleanable and skipped by later rounds (Kafka's LogCleaningException)."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        fixed_now = now_ms
        cleaner = cleaner or self.new_cleaner(now=lambda: fixed_now)
        ltc = self.manager.grab_filthiest_log(self.logs(), now_ms)
        if ltc is None:
            return False
        end: int | None = None
        try:
            end, stats = cleaner.clean(ltc)
            self.last_stats = stats
            self.thread_stats[thread_id] = stats
            self.rounds += 1
            log.info("%s", stats.summary())
        except CleanerAbortedError as e:
            log.info("%s", e)
        except Exception as e:
            self.manager.mark_uncleanable(ltc.log, e)
        finally:
            self.manager.done_cleaning(ltc.log, end)
        return end is not None

    # ---- retention of compacted logs, in the cleaner thread ------------------------------

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Retention of the compacted logs (``compact,delete``: time, size, log start offset;
        ``compact``: log start offset only), run by a cleaner thread after each cleaning
        attempt as Kafka's cleanFilthiestLog does, so it never races a cleaning of the same
        log. A log whose deletion raises is marked uncleanable (Kafka's LogCleaningException).
        Returns the number of segments removed."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        deletable = self.manager.deletable_logs(self.logs())
        removed: list[tuple[Log, list[LogSegment]]] = []
        try:
            for lg in deletable:
                try:
                    segments = lg.delete_old_segments(now_ms)
                except Exception as e:
                    self.manager.mark_uncleanable(lg, e)
                    continue
                if segments:
                    removed.append((lg, segments))
        finally:
            self.manager.done_deleting(deletable)
        # Reported once the logs are out of progress: the callback may take the LogManager's
        # lock, which a DeleteTopics waiting for this pass (abort_and_pause) holds.
        for lg, segments in removed:
            if self.on_segments_deleted is not None:
                self.on_segments_deleted(lg, segments, now_ms)
            else:
                with lg.lock:
                    lg.retired_segments.extend(segments)
        return sum(len(segments) for _, segments in removed)

    @contextlib.contextmanager
    def retention_logs(self, logs: list[Log]) -> Iterator[list[Log]]:
        """The logs the retention task (Kafka's LogManager.cleanupLogs) deletes from: the
        non-compacted ones, paused in the cleaner until it is done. Without cleaner threads
        (``log.cleaner.enable=false``, Kafka's null cleaner) the non-compacted ones too:
        compacted logs get no retention then, as in Kafka."""
        if not self.threads:
            yield [lg for lg in logs if not lg.config.compact]
            return
        paused = self.manager.pause_cleaning_for_non_compacted_partitions(logs)
        try:
            yield paused
        finally:
            for lg in paused:
                self.manager.resume(lg.topic, lg.partition)

    # ---- Kafka's LogCleaner / LogCleanerManager gauges ----------------------------------

    @property
    def uncleanable_partitions_count(self) -> int:
        return len(self.manager.uncleanable)

    @property
    def uncleanable_bytes(self) -> int:
        return self.manager.uncleanable_bytes(self.logs())

    @property
    def max_dirty_percent(self) -> int:
        return int(100 * self.manager.dirtiest_log_cleanable_ratio)

    @property
    def time_since_last_run_ms(self) -> int:
        return int(time.time() * 1000 - self.manager.time_of_last_run_ms)

    @property
    def max_buffer_utilization_percent(self) -> int:
        return int(max((s.buffer_utilization for s in self.thread_stats.values()), default=0.0) * 100)

    @property
    def cleaner_recopy_percent(self) -> int:
        stats = list(self.thread_stats.values())
        return int(100 * sum(s.bytes_written for s in stats) / max(1, sum(s.bytes_read for s in stats)))

    @property
    def max_clean_time_secs(self) -> int:
        return int(max((s.duration_ms / 1000 for s in self.thread_stats.values()), default=0.0))

    @property
    def dead_thread_count(self) -> int:
        return sum(1 for t in self._threads if not t.is_alive()) if not self._stop.is_set() else 0


__all__ = [
    "BYTES_PER_ENTRY", "CLEANED_SUFFIX", "CLEANER_CHECKPOINT", "DELETED_SUFFIX", "SHORT_KEY", "SWAP_SUFFIX", "AbortedTxn",
    "Cleaner", "CleanerAbortedError", "CleanerStats", "LogCleaner", "LogCleanerManager", "LogToClean", "SkimpyOffsetMap",
    "Throttler",
]
