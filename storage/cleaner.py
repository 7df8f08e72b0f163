"""Log compaction: Kafka's LogCleaner, LogCleanerManager, Cleaner and SkimpyOffsetMap.

One round (``LogCleaner.clean_one``):
1. LogCleanerManager picks the filthiest compacted log: dirty ratio =
   cleanable bytes / (clean + cleanable bytes) over [first dirty offset, first
   uncleanable offset), ratio >= ``min.cleanable.dirty.ratio`` or past
   ``max.compaction.lag.ms``, or with tombstones whose delete horizon passed.
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

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kafka_sidecar.protocol.record_batch import read_header
from kafka_sidecar.protocol.records import RecordBatch, decode_batches, encode_batch

from . import checkpoint
from .log import CONTROL_ABORT, CONTROL_COMMIT, Log
from .log_segment import CLEANED_SUFFIX, DELETED_SUFFIX, SWAP_SUFFIX, AppendedBatch, LogSegment
from .txn_index import AbortedTxn, TransactionIndex

log = logging.getLogger(__name__)

CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
BYTES_PER_ENTRY = 24  # 16-byte MD5 + 8-byte offset, as Kafka's SkimpyOffsetMap
INDEX_ENTRY_SIZE = 8


class CleanerAbortedError(Exception):
    """Cleaning of a log was aborted (topic deleted, DeleteRecords, truncation...)."""


_md5 = hashlib.md5
# Keys shorter than this are their own map entry; longer ones are replaced by their MD5.
SHORT_KEY = 16


class SkimpyOffsetMap:
    """key digest -> last offset, with Kafka's capacity rule (bytes x load factor / 24).

    Kafka keys its map by the 16-byte MD5 of each key. A key shorter than 16 bytes is
    used as is here: it is no larger than a digest, cannot be equal to one (digests are
    exactly 16 bytes), and costs no hashing, which is most of a lookup's time in Python.
    The Cleaner's loops inline ``digest``/``put``/``get`` on ``_map`` for speed.
    """

    def __init__(self, memory: int, load_factor: float = 0.9) -> None:
        self.slots = max(1, int(memory * load_factor) // BYTES_PER_ENTRY)
        self._map: dict[bytes, int] = {}
        self.latest_offset = -1

    @staticmethod
    def digest(key: bytes) -> bytes:
        return key if len(key) < SHORT_KEY else _md5(key).digest()

    def put(self, key: bytes, offset: int) -> None:
        self._map[self.digest(key)] = offset

    def get(self, key: bytes) -> int:
        return self._map.get(self.digest(key), -1)

    @property
    def size(self) -> int:
        return len(self._map)

    @property
    def full(self) -> bool:
        return len(self._map) >= self.slots

    def clear(self) -> None:
        self._map.clear()
        self.latest_offset = -1


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


@dataclass
class LogToClean:
    log: Log
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    needs_compaction_now: bool = False

    @property
    def ratio(self) -> float:
        total = self.clean_bytes + self.cleanable_bytes
        return self.cleanable_bytes / total if total else 0.0


def _segments_overlapping(lg: Log, start: int, end: int) -> list[LogSegment]:
    """Segments holding any offset in [start, end)."""
    segs = lg.segments
    out = []
    for i, s in enumerate(segs):
        nxt = segs[i + 1].base_offset if i + 1 < len(segs) else lg.log_end_offset
        if s.base_offset < end and nxt > start:
            out.append(s)
    return out


class LogCleanerManager:
    """Which log to clean next, the cleaner checkpoints, and per-log cleaning states."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.checkpoint_path = data_dir / CLEANER_CHECKPOINT
        self._lock = threading.Condition()
        self.checkpoints = checkpoint.read_offsets(self.checkpoint_path)
        self.in_progress: set[tuple[str, int]] = set()
        self.paused: dict[tuple[str, int], int] = {}  # pause count
        self.aborted: set[tuple[str, int]] = set()

    def cleanable_offsets(self, lg: Log, now_ms: int) -> tuple[int, int, bool]:
        """(first dirty offset, first uncleanable offset, must clean now)."""
        tp = (lg.topic, lg.partition)
        checkpointed = self.checkpoints.get(tp)
        first_dirty = lg.log_start_offset if checkpointed is None else checkpointed
        if first_dirty < lg.log_start_offset or first_dirty > lg.log_end_offset:
            first_dirty = lg.log_start_offset
        # Kafka never cleans at or past the first unstable offset (an ongoing transaction).
        uncleanable = min(lg.last_stable_offset, lg.active_segment.base_offset)
        lag = lg.config.values["min.compaction.lag.ms"]
        dirty_segments = [s for s in _segments_overlapping(lg, first_dirty, uncleanable)]
        if lag > 0:
            for s in dirty_segments:
                if s.largest_timestamp() > now_ms - lag:
                    uncleanable = min(uncleanable, s.base_offset)
                    break
        must = False
        max_lag = lg.config.values["max.compaction.lag.ms"]
        if max_lag < 2**63 - 1:
            # Kafka: the earliest first-batch timestamp (> 0) of the dirty, non-active segments.
            stamps = [
                ts for s in dirty_segments if s is not lg.active_segment
                if (ts := s._load_rolling_based_timestamp()) is not None and ts > 0
            ]
            if stamps and now_ms - min(stamps) > max_lag:
                must = True
        return first_dirty, max(first_dirty, uncleanable), must

    def grab_filthiest_log(self, logs: list[Log], now_ms: int) -> LogToClean | None:
        """The dirtiest eligible log, marked in progress; None if nothing needs cleaning."""
        with self._lock:
            candidates: list[LogToClean] = []
            expired_tombstones: list[LogToClean] = []
            for lg in logs:
                tp = (lg.topic, lg.partition)
                if not lg.config.compact or tp in self.in_progress or tp in self.paused:
                    continue
                first_dirty, uncleanable, must = self.cleanable_offsets(lg, now_ms)
                clean_bytes = sum(s.size for s in _segments_overlapping(lg, lg.log_start_offset, first_dirty))
                cleanable = sum(s.size for s in _segments_overlapping(lg, first_dirty, uncleanable))
                ltc = LogToClean(lg, first_dirty, uncleanable, clean_bytes, cleanable, must)
                min_ratio = lg.config.values["min.cleanable.dirty.ratio"]
                if (must and cleanable > 0) or (cleanable > 0 and ltc.ratio > min_ratio):
                    candidates.append(ltc)
                elif 0 <= lg.latest_delete_horizon <= now_ms:
                    expired_tombstones.append(ltc)
            pick = max(candidates, key=lambda c: c.ratio) if candidates else (expired_tombstones[0] if expired_tombstones else None)
            if pick is not None:
                self.in_progress.add((pick.log.topic, pick.log.partition))
            return pick

    def done_cleaning(self, lg: Log, end_offset: int | None) -> None:
        tp = (lg.topic, lg.partition)
        with self._lock:
            self.in_progress.discard(tp)
            self.aborted.discard(tp)
            if end_offset is not None:
                self.checkpoints[tp] = end_offset
                checkpoint.write_offsets(self.checkpoint_path, dict(self.checkpoints))
            self._lock.notify_all()

    def check_aborted(self, lg: Log) -> None:
        if (lg.topic, lg.partition) in self.aborted:
            raise CleanerAbortedError(f"cleaning of {lg.topic}-{lg.partition} was aborted")

    def abort_and_pause(self, topic: str, partition: int, timeout: float = 30.0) -> None:
        """Stop cleaning this partition (waiting for a round in progress) until resumed."""
        tp = (topic, partition)
        with self._lock:
            self.paused[tp] = self.paused.get(tp, 0) + 1
            if tp in self.in_progress:
                self.aborted.add(tp)
                self._lock.wait_for(lambda: tp not in self.in_progress, timeout)

    def resume(self, topic: str, partition: int) -> None:
        tp = (topic, partition)
        with self._lock:
            n = self.paused.get(tp, 0) - 1
            if n <= 0:
                self.paused.pop(tp, None)
            else:
                self.paused[tp] = n

    def remove(self, topic: str, partition: int) -> None:
        """Forget a deleted partition's checkpoint."""
        with self._lock:
            if self.checkpoints.pop((topic, partition), None) is not None:
                checkpoint.write_offsets(self.checkpoint_path, dict(self.checkpoints))

    def update_checkpoint_for_truncation(self, lg: Log) -> None:
        tp = (lg.topic, lg.partition)
        with self._lock:
            off = self.checkpoints.get(tp)
            if off is not None and (off > lg.log_end_offset or off < lg.log_start_offset):
                self.checkpoints[tp] = lg.log_start_offset
                checkpoint.write_offsets(self.checkpoint_path, dict(self.checkpoints))


class Cleaner:
    """Cleans one log: offset map, then rewrite of segment groups (Kafka's Cleaner)."""

    def __init__(self, offset_map: SkimpyOffsetMap, check_aborted: Callable[[Log], None], now: Callable[[], int] | None = None) -> None:
        self.offset_map = offset_map
        self.check_aborted = check_aborted
        self.now = now or (lambda: int(time.time() * 1000))

    def clean(self, ltc: LogToClean) -> tuple[int, CleanerStats]:
        lg = ltc.log
        stats = CleanerStats(topic_partition=f"{lg.topic}-{lg.partition}", first_dirty_offset=ltc.first_dirty_offset)
        omap = self.offset_map
        omap.clear()
        end_offset = self._build_offset_map(lg, ltc.first_dirty_offset, ltc.first_uncleanable_offset, stats)
        stats.map_entries = omap.size
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

    # ---- offset map ----------------------------------------------------------------

    def _build_offset_map(self, lg: Log, start: int, end: int, stats: CleanerStats) -> int:
        """Map keys of [start, end) (Kafka's buildOffsetMap); returns where mapping ended.

        The map is checked before every put: when full it stops, even inside a
        segment, and cleaning covers only up to the last batch mapped whole.
        """
        omap = self.offset_map
        entries = omap._map  # omap.put and omap.full, inlined
        slots = omap.slots
        md5 = _md5
        txns = CleanedTransactionMetadata(lg.collect_aborted_transactions(start, end))
        for seg in _segments_overlapping(lg, start, end):
            self.check_aborted(lg)
            for batch in decode_batches(seg.read_batch_bytes(0, seg.size), verify_crc=False):
                if batch.last_offset < start:
                    continue
                if batch.is_control:
                    txns.on_control_batch_read(batch)
                elif not txns.on_batch_read(batch):  # records of an aborted transaction are not mapped
                    for r in batch.records:
                        key = r.key
                        if key is not None and start <= r.offset < end:
                            if len(entries) >= slots:
                                return max(start, omap.latest_offset + 1)
                            entries[key if len(key) < SHORT_KEY else md5(key).digest()] = r.offset
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
        cleaned = LogSegment(lg.dir, base, lg.config.index_interval_bytes, lg.config.segment_index_bytes, active=False, suffix=CLEANED_SUFFIX)
        latest_horizon = -1
        txns = CleanedTransactionMetadata([], cleaned.txn_index)
        try:
            segments = lg.segments
            for seg in group:
                self.check_aborted(lg)
                # Kafka's cleanSegments: the aborted transactions overlapping this segment.
                nxt = next((s.base_offset for s in segments if s.base_offset > seg.base_offset), seg.read_next_offset())
                txns.add_aborted_transactions(lg.collect_aborted_transactions(seg.base_offset, nxt))
                raw = seg.read_batch_bytes(0, seg.size)
                stats.bytes_read += len(raw)
                pos = 0
                for batch in decode_batches(raw, verify_crc=False):
                    original = raw[pos : pos + batch.size]
                    pos += batch.size
                    out, horizon = self._filter_batch(lg, batch, original, map_end, now_ms, new_horizon, stats, txns)
                    if out is None:
                        continue
                    latest_horizon = max(latest_horizon, horizon)
                    cleaned.append(out, [AppendedBatch(0, len(out), batch.last_offset, _max_ts(out, batch))])
                    stats.bytes_written += len(out)
            cleaned.on_become_inactive()
            cleaned.flush()
            cleaned.change_suffix(CLEANED_SUFFIX, SWAP_SUFFIX)
            self.check_aborted(lg)
            lg.replace_segments(cleaned, group)
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
        latest = self.offset_map._map.get  # omap.get, inlined
        md5 = _md5
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
            if offset < map_end and latest(key if len(key) < SHORT_KEY else md5(key).digest(), -1) > offset:
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
        key = batch.records[0].key
        kind = int.from_bytes(key[2:4], "big", signed=True) if key is not None and len(key) >= 4 else -1
        pid = batch.producer_id
        if kind == CONTROL_ABORT:
            meta = self.ongoing_aborted.pop(pid, None)
            if meta is not None and meta[1] is not None:
                if self.cleaned_index is not None:
                    self.cleaned_index.append(meta[0])
                return False
            return True
        if kind == CONTROL_COMMIT:
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
    """The cleaner threads: each round cleans the filthiest log, then backs off."""

    def __init__(self, data_dir: Path, logs: Callable[[], list[Log]], *, threads: int = 1, dedupe_buffer_size: int = 134217728,
                 io_buffer_load_factor: float = 0.9, backoff_ms: int = 15000, enabled: bool = True) -> None:
        self.manager = LogCleanerManager(data_dir)
        self.logs = logs
        self.threads = threads if enabled else 0
        # Kafka splits the dedupe buffer between the cleaner threads.
        self.map_memory = dedupe_buffer_size // max(1, threads)
        self.load_factor = io_buffer_load_factor
        self.backoff_ms = backoff_ms
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._threads: list[threading.Thread] = []
        self.last_stats: CleanerStats | None = None
        self.rounds = 0

    def start(self) -> None:
        for i in range(self.threads):
            t = threading.Thread(target=self._run, name=f"kafka-log-cleaner-thread-{i}", daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        for t in self._threads:
            t.join(timeout=30)

    def wakeup(self) -> None:
        self._wake.set()

    def _run(self) -> None:
        cleaner = Cleaner(SkimpyOffsetMap(self.map_memory, self.load_factor), self.manager.check_aborted)
        while not self._stop.is_set():
            try:
                cleaned = self.clean_one(cleaner)
            except Exception:
                log.exception("log cleaner round failed")
                cleaned = False
            if not cleaned:
                self._wake.wait(self.backoff_ms / 1000)
                self._wake.clear()

    def clean_one(self, cleaner: Cleaner | None = None, now_ms: int | None = None) -> bool:
        """One round; True if a log was cleaned."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        fixed_now = now_ms
        cleaner = cleaner or Cleaner(SkimpyOffsetMap(self.map_memory, self.load_factor), self.manager.check_aborted, now=lambda: fixed_now)
        ltc = self.manager.grab_filthiest_log(self.logs(), now_ms)
        if ltc is None:
            return False
        end: int | None = None
        try:
            end, stats = cleaner.clean(ltc)
            self.last_stats = stats
            self.rounds += 1
            log.info("%s", stats.summary())
        except CleanerAbortedError as e:
            log.info("%s", e)
        finally:
            self.manager.done_cleaning(ltc.log, end)
        return end is not None


__all__ = [
    "CLEANED_SUFFIX", "DELETED_SUFFIX", "SWAP_SUFFIX", "Cleaner", "CleanerStats", "LogCleaner",
    "LogCleanerManager", "LogToClean", "SkimpyOffsetMap",
]
