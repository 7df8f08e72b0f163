"""LogLoader: open one partition directory at startup (Kafka's LogLoader).

Completes an interrupted compaction swap, drops what an unfinished deletion or cleaning left
(``.deleted``, ``.cleaned``, ``.tmp``, indexes without their log), opens the segments,
rebuilds damaged or missing indexes, recovers the segments after the recovery point (all of
them after an unclean shutdown; only a damaged tail after a clean one), then rebuilds the
producer state from the newest usable snapshot and the batches after it, rebuilding the
``.txnindex`` of every recovered segment on the way. The Log (storage/log.py) gets the
segments in its LocalLog, the offsets as LoadedLogOffsets and the producer state in place.
"""

from __future__ import annotations

import logging
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from kafka_sidecar.protocol.control_records import (
    ABORT,
    COMMIT,
    control_type,
    marker_coordinator_epoch,
)
from kafka_sidecar.protocol.record_batch import BatchHeader
from kafka_sidecar.protocol.records import decode_batches

from .local_log import LocalLog, open_segment
from .log_config import LogConfig
from .log_segment import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
)
from .producer_state import SNAPSHOT_SUFFIX, CompletedTxn, ProducerStateManager
from .txn_index import TXN_INDEX_SUFFIX, AbortedTxn

__all__ = ["LoadedLogOffsets", "LogLoader", "aborted_txn_entry", "read_marker"]

# The Log's own logger, so that operators' log lines keep their logger name.
log = logging.getLogger(__name__.rpartition(".")[0] + ".log")

_LEFT_OVER_SUFFIXES = (DELETED_SUFFIX, ".cleaned", ".tmp")
# The suffixes of ``<offset><suffix>`` files: the segment's log, its indexes, producer snapshots.
_OFFSET_SUFFIXES = frozenset((LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, SNAPSHOT_SUFFIX))



@dataclass(frozen=True)
class LoadedLogOffsets:
    """Kafka's LoadedLogOffsets: where the loaded log starts and ends, and what is on disk."""

    log_start_offset: int
    recovery_point: int
    log_end_offset: int  # Kafka's nextOffsetMetadata


def aborted_txn_entry(psm: ProducerStateManager, completed: CompletedTxn) -> AbortedTxn:
    """The ``.txnindex`` entry of an aborted transaction (with the last stable offset after it)."""
    return AbortedTxn(completed.producer_id, completed.first_offset, completed.last_offset, psm.last_stable_offset_after(completed))


def read_marker(seg: LogSegment, position: int, h: BatchHeader) -> tuple[bool, int] | None:
    """(commit, coordinator epoch) of a transaction marker batch; None for an empty control
    batch (its transaction was cleaned away) or another control type."""
    try:
        batches = decode_batches(seg.read_batch_bytes(position, h.size), verify_crc=False)
    except (ValueError, IndexError, struct.error):
        return None
    if not batches or not batches[0].records:
        return None
    r = batches[0].records[0]
    kind = control_type(r.key)
    if kind not in (ABORT, COMMIT):
        return None
    return kind == COMMIT, marker_coordinator_epoch(r.value)


class LogLoader:
    """Loads one partition directory into ``segments`` and ``producer_state`` (both filled in
    place, as Kafka's LogLoader fills its LogSegments and ProducerStateManager)."""

    # Index entries checked one by one at load (newest segments first), per partition: ~80 MiB
    # of log at the default index.interval.bytes, a few ms. Older segments get the cheap
    # check; any entry a read uses is checked then (LogSegment._indexed_position).
    FULL_INDEX_CHECK_ENTRIES = 20_000

    def __init__(self, dir: Path, topic: str, partition: int, config: LogConfig, segments: LocalLog, producer_state: ProducerStateManager,
                 *, recovery_point: int, log_start_offset: int | None, clean_shutdown: bool) -> None:
        self.dir = dir
        self.topic = topic
        self.partition = partition
        self.config = config
        self.segments = segments
        self.producer_state = producer_state
        self.recovery_point = recovery_point
        self.log_start_offset = log_start_offset
        self.clean_shutdown = clean_shutdown
        # Smallest base offset of a segment recovered at load: its .txnindex is rebuilt from the log.
        self._txn_rebuild_from: int | None = None
        self.recovered_segments = 0  # segments recovered (read whole, CRC-checked) at load

    def load(self) -> LoadedLogOffsets:
        """Open, check and recover the segments, then rebuild the producer state."""
        self._load_segments()
        segments = self.segments.segments
        log_end_offset = segments[-1].read_next_offset()
        first_base = segments[0].base_offset
        start = first_base if self.log_start_offset is None else max(self.log_start_offset, first_base)
        offsets = LoadedLogOffsets(min(start, log_end_offset), min(self.recovery_point, log_end_offset), log_end_offset)
        self._load_producer_state(log_end_offset)
        # Loaded: an idle partition keeps only its active .log open (indexes and older
        # segments are reopened at their first use, as Kafka's LazyIndex does).
        for seg in segments:
            seg.release_files()
        return offsets

    def _load_segments(self) -> None:
        # One listing of the directory (again only if a swap had to be completed); a new log's
        # directory is made here.
        try:
            entries = os.listdir(self.dir)
        except FileNotFoundError:
            self.dir.mkdir(parents=True, exist_ok=True)
            entries = []
        if any(e.endswith(SWAP_SUFFIX) for e in entries):
            self._complete_swaps()
            entries = os.listdir(self.dir)
        # One pass over the names (one partition's directory, thousands of them at start).
        bases: set[int] = set()
        kept: list[str] = []
        indexes: list[tuple[int, str]] = []  # (base offset, name) of the index files
        snapshots: list[int] = []
        for entry in entries:
            if entry.endswith(_LEFT_OVER_SUFFIXES):
                # Left by a deletion or cleaning that did not finish: Kafka removes these at load.
                (self.dir / entry).unlink(missing_ok=True)
                continue
            kept.append(entry)
            # <digits><suffix>: the digits hold no dot, so the suffix is all from the first one.
            stem, _, _ = entry.partition(".")
            suffix = entry[len(stem):]
            if suffix in _OFFSET_SUFFIXES and stem.isdigit():
                if suffix == LOG_SUFFIX:
                    bases.add(int(stem))
                elif suffix == SNAPSHOT_SUFFIX:
                    snapshots.append(int(stem))
                else:
                    indexes.append((int(stem), entry))
        for base, entry in indexes:
            if base not in bases:  # an index without its log is dropped, as Kafka does
                (self.dir / entry).unlink(missing_ok=True)
        ordered = sorted(bases)
        names = set(kept)
        snapshots.sort()
        self.producer_state.found_snapshots(snapshots)
        for i, base in enumerate(ordered):
            is_last = i == len(ordered) - 1
            self.segments.add_segment(open_segment(self.dir, base, self.config, active=is_last, on_rebuild=self._mark_txn_rebuild, names=names,
                                                     pools=self.segments.pools))
        if not self.segments.segments:
            self.segments.add_segment(open_segment(self.dir, 0, self.config, active=True, on_rebuild=self._mark_txn_rebuild, pools=self.segments.pools))
            return
        if self.clean_shutdown:
            # Kafka's LazyIndex: after a clean stop every segment's indexes are checked at their
            # first use (LogSegment._on_index_load), before any entry serves a read; a damaged
            # one is rebuilt then. An idle partition reads at most its active offset index here.
            for seg in self.segments.segments:
                seg.defer_index_check()
        else:
            # After a crash, the segments from the recovery point on are recovered whatever their
            # indexes hold: checking those first would be wasted (Kafka skips it the same way).
            self._check_indexes(self.segments.segment_index(self.recovery_point))
        if self.clean_shutdown:
            # Nothing to recover after a clean stop, but the end of the active segment, where
            # appends go, is checked (cheaply): a torn or damaged tail is recovered as after a crash.
            active = self.segments.active_segment
            problem = active.tail_problem()
            if problem is not None:
                log.warning("%s-%d: %s; recovering the last segment", self.topic, self.partition, problem)
                self._recover(active.base_offset)
        else:
            self._recover(self.recovery_point)

    def _check_indexes(self, end: int) -> None:
        """Rebuild the indexes of any segment before ``end`` whose indexes fail the sanity check
        (Kafka rebuilds a corrupt index at load too): a damaged index never stops the start, nor
        misleads a read."""
        segments = self.segments.segments
        last = segments[-1]
        budget = self.FULL_INDEX_CHECK_ENTRIES
        for seg in reversed(segments[:end]):
            entries = seg.offset_index.entries + seg.time_index.entries
            full = entries <= budget
            if full:
                budget -= entries
            problem = seg.index_problem(full=full)
            if problem is None and seg is not last and (seg.offset_index.padded or seg.time_index.padded):
                # An older segment's indexes are trimmed when it is rolled: zeros past the entries
                # mean a crash mid-roll or damage (an index zeroed out).
                problem = "indexes of an inactive segment are not trimmed"
            if problem is None:
                continue
            log.warning("%s-%d: %s; rebuilding the indexes of segment %d", self.topic, self.partition, problem, seg.base_offset)
            self._mark_txn_rebuild(seg.base_offset)
            truncated = seg.recover()
            self.recovered_segments += 1
            if truncated:
                log.warning("%s-%d: cut %d invalid bytes off segment %d while rebuilding its indexes", self.topic, self.partition, truncated, seg.base_offset)
            if seg is not last:
                seg.offset_index.trim()
                seg.time_index.trim()

    def _complete_swaps(self) -> None:
        """Finish a compaction swap that a crash interrupted (Kafka's LogLoader does the same).

        A ``<base>.log.swap`` holds the cleaned replacement of every segment whose
        base offset lies in its offset range: those are removed and the swap takes
        the final name. (``.cleaned`` files, never swapped in, are dropped later.)
        """
        for entry in sorted(os.listdir(self.dir)):
            if not entry.endswith(LOG_SUFFIX + SWAP_SUFFIX):
                continue
            stem = entry[: -len(LOG_SUFFIX + SWAP_SUFFIX)]
            if not stem.isdigit():
                continue
            base = int(stem)
            swap = LogSegment(self.dir, base, self.config.index_interval_bytes, self.config.segment_index_bytes, active=False, suffix=SWAP_SUFFIX,
                              pools=self.segments.pools)
            swap.recover()
            last = swap.read_next_offset() - 1
            swap.close()
            for other in os.listdir(self.dir):
                name, _, ext = other.partition(".")
                if name.isdigit() and base <= int(name) <= max(base, last) and not other.endswith(SWAP_SUFFIX) and not other.endswith(".snapshot") and not other.endswith(".tmp"):
                    (self.dir / other).unlink(missing_ok=True)
            for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                src = self.dir / f"{stem}{suffix}{SWAP_SUFFIX}"
                if src.exists():
                    os.replace(src, self.dir / f"{stem}{suffix}")
            log.warning("%s-%d: completed an interrupted compaction swap of segment %d (offsets up to %d)", self.topic, self.partition, base, last)
            # Kafka recovers a swapped-in segment (LogLoader): its .txnindex is rebuilt from the log,
            # whether or not the cleaned one was renamed before the crash.
            self._mark_txn_rebuild(base)
        # Index .swap files whose log was already renamed: their old indexes went to
        # .deleted, so they are the current ones (Kafka renames every .swap at load).
        for entry in sorted(os.listdir(self.dir)):
            for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                if entry.endswith(suffix + SWAP_SUFFIX):
                    final = self.dir / entry[: -len(SWAP_SUFFIX)]
                    if final.exists():
                        (self.dir / entry).unlink(missing_ok=True)
                    else:
                        os.replace(self.dir / entry, final)

    def _mark_txn_rebuild(self, base: int) -> None:
        if self._txn_rebuild_from is None or base < self._txn_rebuild_from:
            self._txn_rebuild_from = base

    def _recover(self, recovery_point: int) -> None:
        """Recover every segment from the one holding the recovery point (unclean shutdown)."""
        segments = self.segments
        start = segments.segment_index(recovery_point)
        if start < len(segments.segments):
            self._mark_txn_rebuild(segments.segments[start].base_offset)
        for i in range(start, len(segments.segments)):
            seg = segments.segments[i]
            truncated = seg.recover()
            self.recovered_segments += 1
            if truncated:
                log.warning(
                    "recovery of %s-%d: truncated %d invalid bytes at the end of segment %d; removing %d later segments",
                    self.topic, self.partition, truncated, seg.base_offset, len(segments.segments) - i - 1,
                )
                for later in segments.segments[i + 1 :]:
                    later.close()
                    for p in later.paths():
                        p.unlink(missing_ok=True)
                segments.set_segments(segments.segments[: i + 1])
                break
        # Only the last segment is active; older ones keep trimmed indexes.
        for seg in segments.segments[:-1]:
            seg.offset_index.trim()
            seg.time_index.trim()
        if len(segments.segments) > start:
            log.debug("recovered %s-%d from offset %d: log end offset %d", self.topic, self.partition, recovery_point, segments.segments[-1].read_next_offset())

    def _load_producer_state(self, log_end_offset: int) -> None:
        """Newest snapshot at or below the log end, then replay the batches after it: data batches
        (idempotent/transactional state, ongoing transactions) and transaction markers (which
        complete them). Segments recovered at load get their ``.txnindex`` rebuilt on the way, as
        Kafka's LogSegment.recover does; the replay then starts at or below the first of them."""
        psm = self.producer_state
        segments = self.segments.segments
        psm.truncate_and_reload(segments[0].base_offset, log_end_offset)
        for seg in segments:
            if seg.txn_index.load_problem:
                log.warning("%s-%d: transaction index %s: %s; rebuilding it", self.topic, self.partition, seg.txn_index.path.name, seg.txn_index.load_problem)
                self._mark_txn_rebuild(seg.base_offset)
        rebuild_from = self._txn_rebuild_from
        limit = log_end_offset if rebuild_from is None else rebuild_from
        # Newest snapshot first; a corrupt one is deleted and the next older one tried (Kafka's way).
        start = None
        while (candidate := psm.latest_snapshot_at_or_below(limit)) is not None:
            if psm.load_snapshot(candidate):
                start = candidate
                break
        if start is None:
            psm.reset()
            start = segments[0].base_offset
        if rebuild_from is not None:
            for seg in segments:
                if seg.base_offset >= rebuild_from:
                    seg.txn_index.reset()
        replayed = 0
        if start < log_end_offset:
            for seg in segments:
                if seg.read_next_offset() <= start:
                    continue
                rebuild = rebuild_from is not None and seg.base_offset >= rebuild_from
                _, pos = seg.offset_index.lookup(start)
                for p, h in seg.iter_batches(pos):
                    if h.last_offset < start or h.producer_id < 0:
                        continue
                    if h.is_control:
                        marker = read_marker(seg, p, h)
                        if marker is not None:
                            commit, coordinator_epoch = marker
                            completed = psm.end_txn(h.producer_id, h.producer_epoch, coordinator_epoch, commit, h.base_offset, h.max_timestamp)
                            if completed is not None:
                                if completed.is_aborted and rebuild:
                                    seg.txn_index.append(aborted_txn_entry(psm, completed))
                                psm.complete_txn(completed)
                    else:
                        psm.update(h, h.last_offset, h.max_timestamp)
                    replayed += 1
        if rebuild_from is not None:
            for seg in segments[:-1]:
                if seg.base_offset >= rebuild_from and seg.txn_index.exists:
                    seg.txn_index.flush()
                    seg.txn_index.close_writer()
        self._txn_rebuild_from = None
        if replayed:
            log.debug("%s-%d: rebuilt producer state from offset %d (%d producer batches)", self.topic, self.partition, start, replayed)
