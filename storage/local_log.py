"""LocalLog: one partition's segment list (Kafka's LocalLog with its LogSegments).

The bookkeeping under the leader-facing Log (storage/log.py): the ordered segments, rolling
to a new segment, reading from the segments, renaming removed or replaced segments
``.deleted``, flushing and closing them. It keeps no offsets of its own (the Log owns the log
end, log start and recovery point) and takes no lock: the Log holds its lock around every
change, as Kafka's UnifiedLog does around LocalLog.
"""

from __future__ import annotations

import bisect
import logging
import shutil
from collections.abc import Callable
from pathlib import Path

from . import failpoints
from .log_config import LogConfig
from .log_segment import (
    DEFAULT_POOLS,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    FileSlice,
    LogSegment,
    OpenFilePools,
    StorageError,
)
from .txn_index import TXN_INDEX_SUFFIX, AbortedTxn

__all__ = ["LocalLog", "open_segment"]

# The Log's own logger, so that operators' log lines keep their logger name.
log = logging.getLogger(__name__.rpartition(".")[0] + ".log")


def open_segment(dir: Path, base: int, config: LogConfig, active: bool, on_rebuild: Callable[[int], None] | None = None,
                 names: set[str] | None = None, pools: OpenFilePools = DEFAULT_POOLS) -> LogSegment:
    """Open (or create) the segment at ``base``; a segment with data but without both indexes
    gets them rebuilt from its log (``on_rebuild(base)`` is told, its .txnindex is stale too).
    ``names``: the directory's file names, when the caller has listed it already."""
    prefix = f"{base:020d}"
    txn_index_exists: bool | None = None
    if names is not None:
        had_indexes = prefix + INDEX_SUFFIX in names and prefix + TIME_INDEX_SUFFIX in names
        txn_index_exists = prefix + TXN_INDEX_SUFFIX in names
    else:
        had_indexes = (dir / (prefix + INDEX_SUFFIX)).exists() and (dir / (prefix + TIME_INDEX_SUFFIX)).exists()
    # A new active segment's file is preallocated to segment.bytes when the topic asks for it
    # (Kafka's initFileSize); an existing one is opened as it is.
    preallocate = config.segment_bytes if active and config.preallocate and names is None else 0
    seg = LogSegment(dir, base, config.index_interval_bytes, config.segment_index_bytes, active=active, loaded=names is not None,
                     preallocate=preallocate, txn_index_exists=txn_index_exists, pools=pools)
    if not had_indexes and seg.size:
        log.info("rebuilding missing indexes of %s segment %d", dir.name, base)
        if on_rebuild is not None:
            on_rebuild(base)
        seg.recover()
        if not active:
            seg.offset_index.trim()
            seg.time_index.trim()
    return seg


class LocalLog:
    """The segments of one partition directory, oldest first; the last one is active."""

    def __init__(self, dir: Path, topic: str, partition: int, pools: OpenFilePools = DEFAULT_POOLS) -> None:
        self.dir = dir
        self.pools = pools  # the LogManager's pools of open files, for every segment of this log
        self.topic = topic
        self.partition = partition
        # Copy-on-write (segments, base offsets): readers take one snapshot without
        # locking; writers (append, roll, retention, truncation) hold the Log's lock.
        self.view: tuple[list[LogSegment], list[int]] = ([], [])

    @property
    def segments(self) -> list[LogSegment]:
        """The current segments, oldest first (a snapshot: never mutated in place)."""
        return self.view[0]

    def set_segments(self, segments: list[LogSegment]) -> None:
        self.view = (segments, [s.base_offset for s in segments])

    def add_segment(self, seg: LogSegment) -> None:
        self.set_segments([*self.segments, seg])

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    def segment_index(self, offset: int) -> int:
        """Index in ``segments`` of the segment that holds ``offset`` (0 below the first)."""
        return max(0, bisect.bisect_right(self.view[1], offset) - 1)

    def segment_for(self, offset: int) -> LogSegment:
        segments, bases = self.view
        return segments[max(0, bisect.bisect_right(bases, offset) - 1)]

    # ---- roll, replace, remove ---------------------------------------------------------

    def roll(self, new_base: int, config: LogConfig) -> LogSegment:
        """Open the new active segment at ``new_base`` and add it. On failure no half-made
        segment stays behind (at the next start it would hide the offsets still appended to
        the old one, which stays the active segment): raises StorageError."""
        old = self.active_segment
        try:
            new = open_segment(self.dir, new_base, config, active=True, pools=self.pools)
        except OSError as e:
            old.active = True
            prefix = self.dir / f"{new_base:020d}"
            for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                try:
                    prefix.with_name(prefix.name + suffix).unlink(missing_ok=True)
                except OSError:
                    pass
            raise StorageError(f"cannot roll {self.topic}-{self.partition} to a new segment at {new_base}: {e.strerror or e}", e.errno) from e
        self.add_segment(new)
        return new

    def replace_segments(self, new: LogSegment, old: list[LogSegment]) -> None:
        """Kafka's LocalLog.replaceSegments: old files become ``.deleted`` first, then the
        ``.swap`` takes its final name (a crash in between is completed at load).
        Raises ValueError (nothing changed) if ``old`` is no longer in the log."""
        segments = self.segments
        ids = {id(s) for s in old}
        if not all(any(s is o for s in segments) for o in old):
            raise ValueError("segments changed during cleaning")
        first = next(i for i, s in enumerate(segments) if id(s) in ids)
        kept = [s for s in segments if id(s) not in ids]
        kept.insert(first, new)
        for seg in old:
            seg.change_suffix("", DELETED_SUFFIX)
            seg.deleted = True
            failpoints.hit("log.swap.after_delete_rename")
        failpoints.hit("log.swap.before_final_rename")
        new.change_suffix(SWAP_SUFFIX, "")
        self.set_segments(kept)

    def remove_oldest(self, n: int) -> list[LogSegment]:
        """Take the ``n`` oldest segments out of the list and rename them ``.deleted`` (for
        delayed deletion by the caller); the list is changed before any rename."""
        segments = self.segments
        doomed, kept = segments[:n], segments[n:]
        self.set_segments(kept)
        for seg in doomed:
            seg.change_suffix("", DELETED_SUFFIX)
            seg.deleted = True
            failpoints.hit("log.retention.after_rename")
        return doomed

    # ---- read --------------------------------------------------------------------------

    @staticmethod
    def read(view: tuple[list[LogSegment], list[int]], fetch_offset: int, max_bytes: int, min_one_message: bool,
             max_offset: int | None, end_position: tuple[int, int, int] | None) -> tuple[FileSlice | None, int]:
        """Data from ``fetch_offset`` in one snapshot of the segments, below ``max_offset`` if
        given (``end_position``: where the log end lies, if it is that bound); returns (data,
        index of its segment), or (None, -1)."""
        segments, bases = view
        i = bisect.bisect_right(bases, fetch_offset) - 1
        while 0 <= i < len(segments):
            seg = segments[i]
            max_position = None
            if max_offset is not None:
                if seg.base_offset >= max_offset:
                    return None, -1
                if i + 1 >= len(segments) or max_offset < segments[i + 1].base_offset:
                    # The bound lies in this segment: read up to the batch holding it.
                    if end_position is not None and end_position[0] == max_offset and end_position[1] == seg.base_offset:
                        max_position = end_position[2]
                    else:
                        found = seg.translate_offset(max_offset, seg._indexed_position(max_offset))
                        max_position = seg.size if found is None else found[0]
            data = seg.read(fetch_offset, max_bytes, max_position, min_one_message)
            if data is not None:
                return data, i
            i += 1
        return None, -1

    @staticmethod
    def collect_aborted(segments: list[LogSegment], start_index: int, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Kafka's LocalLog.collectAbortedTransactions: the txn indexes from the starting segment
        on, until one holds an entry whose last stable offset reaches the upper bound."""
        out: list[AbortedTxn] = []
        for seg in segments[start_index:]:
            found, complete = seg.txn_index.collect_aborted(fetch_offset, upper_bound)
            out += found
            if complete:
                break
        return out

    # ---- durability --------------------------------------------------------------------

    def flush(self, end: int, recovery_point: int) -> None:
        """fsync the segments holding offsets in [recovery_point, end)."""
        for seg in list(self.segments):
            if seg.base_offset >= end:
                break
            if seg.read_next_offset() > recovery_point:
                seg.flush()

    def close(self, *, trim: bool) -> None:
        """Close every segment; ``trim`` (a clean close) first writes the active segment's last
        time index entry and trims its indexes, as an inactive segment's are."""
        if trim:
            seg = self.active_segment
            # Untouched since the load (Kafka's LogSegment.close: maxTimestampAndOffsetSoFar
            # unknown): the time index already ends with that entry; nothing to read or write.
            if seg.max_timestamp_known and seg.max_timestamp_so_far >= 0:
                seg.time_index.maybe_append(seg.max_timestamp_so_far, seg.offset_of_max_timestamp, skip_full_check=True)
            seg.trim_log()
            seg.offset_index.trim()
            seg.time_index.trim()
        for seg in self.segments:
            seg.close()

    def delete_all(self) -> None:
        """Close the segments and remove the directory (topic deletion)."""
        for seg in self.segments:
            seg.close()
        shutil.rmtree(self.dir, ignore_errors=True)
