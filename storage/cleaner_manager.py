"""Kafka's LogCleanerManager: which log to clean next, the cleaner checkpoints, per-log states.

States of a partition (Kafka's LogCleaningState): in progress (a cleaner thread holds it),
aborted (asked to stop; the thread notices at its next read buffer), paused (counted, never
picked), uncleanable (its cleaning raised: skipped by later rounds, so the other logs keep
being cleaned; kept in memory only, so it is retried after a restart, as Kafka does).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from . import checkpoint
from .log import Log
from .log_segment import LogSegment

log = logging.getLogger(__name__)

CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"


class CleanerAbortedError(Exception):
    """Cleaning of a log was aborted (topic deleted, DeleteRecords, truncation...)."""


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
        # Kafka's uncleanablePartitions: partitions whose cleaning raised, skipped until a restart.
        self.uncleanable: set[tuple[str, int]] = set()
        # Kafka's gauges: max-dirty-percent, time-since-last-run-ms.
        self.dirtiest_log_cleanable_ratio = 0.0
        self.time_of_last_run_ms = time.time() * 1000

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
            self.time_of_last_run_ms = time.time() * 1000
            candidates: list[LogToClean] = []
            dirtiest = 0.0
            for lg in logs:
                tp = (lg.topic, lg.partition)
                if not lg.config.compact or tp in self.in_progress or tp in self.paused or tp in self.uncleanable:
                    continue
                first_dirty, uncleanable, must = self.cleanable_offsets(lg, now_ms)
                clean_bytes = sum(s.size for s in _segments_overlapping(lg, lg.log_start_offset, first_dirty))
                cleanable = sum(s.size for s in _segments_overlapping(lg, first_dirty, uncleanable))
                ltc = LogToClean(lg, first_dirty, uncleanable, clean_bytes, cleanable, must)
                dirtiest = max(dirtiest, ltc.ratio)
                min_ratio = lg.config.values["min.cleanable.dirty.ratio"]
                # Kafka's grabFilthiestCompactedLog: only dirty bytes make a log cleanable. A log
                # whose tombstones passed their delete horizon but with nothing dirty is left
                # alone: they go at its next real cleaning, so consumers see what Kafka's see.
                if (must and cleanable > 0) or ltc.ratio > min_ratio:
                    candidates.append(ltc)
            self.dirtiest_log_cleanable_ratio = dirtiest
            pick = max(candidates, key=lambda c: c.ratio) if candidates else None
            if pick is not None:
                self.in_progress.add((pick.log.topic, pick.log.partition))
            return pick

    # ---- retention, coordinated with cleaning (Kafka's LogManager.cleanupLogs and
    # LogCleaner.cleanFilthiestLog): the retention task deletes from the non-compacted logs,
    # paused here meanwhile; the cleaner thread deletes from the compacted ones, held in
    # progress meanwhile. A log is never cleaned and retention-deleted at once.

    def pause_cleaning_for_non_compacted_partitions(self, logs: list[Log]) -> list[Log]:
        """Kafka's pauseCleaningForNonCompactedPartitions: the non-compacted logs not already
        in progress or paused, paused (so a switch to compact cannot let the cleaner race
        their retention); the caller resumes them with ``resume``."""
        with self._lock:
            out = [lg for lg in logs if not lg.config.compact
                   and (lg.topic, lg.partition) not in self.in_progress and (lg.topic, lg.partition) not in self.paused]
            for lg in out:
                self.paused[(lg.topic, lg.partition)] = 1
            return out

    def deletable_logs(self, logs: list[Log]) -> list[Log]:
        """Kafka's deletableLogs: the compacted logs neither in progress, paused nor uncleanable,
        marked in progress for the cleaner thread's retention pass (``done_deleting`` ends it)."""
        with self._lock:
            out = [lg for lg in logs if lg.config.compact and (lg.topic, lg.partition) not in self.in_progress
                   and (lg.topic, lg.partition) not in self.paused and (lg.topic, lg.partition) not in self.uncleanable]
            for lg in out:
                self.in_progress.add((lg.topic, lg.partition))
            return out

    def done_deleting(self, logs: list[Log]) -> None:
        """Kafka's doneDeleting: out of progress (an abort asked meanwhile is answered)."""
        with self._lock:
            for lg in logs:
                self.in_progress.discard((lg.topic, lg.partition))
                self.aborted.discard((lg.topic, lg.partition))
            self._lock.notify_all()

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

    def mark_uncleanable(self, lg: Log, error: BaseException) -> None:
        """Kafka's markPartitionUncleanable: its cleaning failed; later rounds skip it (logged once)."""
        tp = (lg.topic, lg.partition)
        with self._lock:
            if tp in self.uncleanable:
                return
            self.uncleanable.add(tp)
        log.warning("unexpected error while cleaning %s-%d: marking the partition uncleanable (retried after a restart)",
                    lg.topic, lg.partition, exc_info=error)

    def maintain_uncleanable_partitions(self, logs: list[Log]) -> None:
        """Kafka's maintainUncleanablePartitions: forget partitions whose log is gone."""
        live = {(lg.topic, lg.partition) for lg in logs}
        with self._lock:
            self.uncleanable &= live

    def uncleanable_bytes(self, logs: list[Log]) -> int:
        """Kafka's uncleanable-bytes: the cleanable bytes of the uncleanable partitions."""
        now_ms = int(time.time() * 1000)
        with self._lock:
            marked = set(self.uncleanable)
        total = 0
        for lg in logs:
            if (lg.topic, lg.partition) in marked:
                first_dirty, uncleanable, _ = self.cleanable_offsets(lg, now_ms)
                total += sum(s.size for s in _segments_overlapping(lg, first_dirty, uncleanable))
        return total

    def abort_cleaning(self, topic: str, partition: int, timeout: float = 30.0) -> None:
        """Kafka's abortCleaning: stop a cleaning in progress (waiting for it), without pausing."""
        self.abort_and_pause(topic, partition, timeout)
        self.resume(topic, partition)

    def abort_and_pause(self, topic: str, partition: int, timeout: float = 30.0) -> None:
        """Stop cleaning this partition (waiting for a round in progress) until resumed.

        The cleaner checks for the abort at every read buffer, so the wait is about the time
        of one buffer (milliseconds), not of a segment."""
        tp = (topic, partition)
        with self._lock:
            self.paused[tp] = self.paused.get(tp, 0) + 1
            if tp in self.in_progress:
                self.aborted.add(tp)
                self._lock.notify_all()  # for whoever waits to see the abort asked for
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
        """Forget a deleted partition's checkpoint (and that it was uncleanable)."""
        with self._lock:
            self.uncleanable.discard((topic, partition))
            if self.checkpoints.pop((topic, partition), None) is not None:
                checkpoint.write_offsets(self.checkpoint_path, dict(self.checkpoints))
