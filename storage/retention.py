"""Retention decisions (Kafka's UnifiedLog.deleteOldSegments), free of I/O.

Three predicates walk the segments oldest first and stop at the first segment
that must stay, so only a prefix is ever deletable:
- by time: ``now - largest timestamp > retention.ms`` (largest timestamp from
  the time index, else the file's last-modified time);
- by size: while the log exceeds ``retention.bytes`` by at least the segment's size;
- by log start offset: the next segment's base offset <= the log start offset.
A segment is only deletable when everything in it is below the high watermark,
and the last segment only if it is not empty (the caller then rolls first).

Who runs it, as in Kafka: the retention task (LogManager.cleanup_logs, every
``log.retention.check.interval.ms``) for the non-compacted logs, paused in the cleaner
while it works on them; a cleaner thread (LogCleaner.delete_old_segments, after each
cleaning attempt) for the compacted ones, held in progress meanwhile. So retention and
cleaning never work on one log at once; with ``log.cleaner.enable=false`` compacted logs
get no retention, as in Kafka (whose LogManager then has no cleaner).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol


class SegmentInfo(Protocol):
    base_offset: int
    size: int

    def largest_timestamp(self) -> int: ...


Predicate = Callable[[SegmentInfo, SegmentInfo | None], bool]


def deletable_prefix(segments: Sequence[SegmentInfo], predicate: Predicate, high_watermark: int, log_end_offset: int) -> int:
    """How many leading segments the predicate allows deleting."""
    n = 0
    for i, seg in enumerate(segments):
        nxt = segments[i + 1] if i + 1 < len(segments) else None
        last_and_empty = nxt is None and seg.size == 0
        upper = nxt.base_offset if nxt is not None else log_end_offset
        if last_and_empty or upper > high_watermark or not predicate(seg, nxt):
            break
        n += 1
    return n


def retention_ms_predicate(retention_ms: int, now_ms: int) -> Predicate | None:
    if retention_ms < 0:
        return None
    return lambda seg, _nxt: now_ms - seg.largest_timestamp() > retention_ms


def retention_size_predicate(retention_bytes: int, total_size: int) -> Predicate | None:
    if retention_bytes < 0 or total_size < retention_bytes:
        return None
    diff = total_size - retention_bytes

    def predicate(seg: SegmentInfo, _nxt: SegmentInfo | None) -> bool:
        nonlocal diff
        if diff - seg.size >= 0:
            diff -= seg.size
            return True
        return False

    return predicate


def log_start_offset_predicate(log_start_offset: int) -> Predicate:
    return lambda _seg, nxt: nxt is not None and nxt.base_offset <= log_start_offset
