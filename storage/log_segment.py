"""LogSegment: one ``.log`` file with its ``.index`` and ``.timeindex``.

Appends write whole batches (already offset-assigned) with one ``os.write``;
index entries are added per batch, never per record, with Kafka's rule: an
offset index entry (batch last offset, batch position) whenever more than
``index.interval.bytes`` were appended since the previous entry, and a time
index entry (max timestamp so far, offset of its batch) at the same moments.
"""

from __future__ import annotations

import bisect
import logging
import os
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kafka_sidecar.protocol.record_batch import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    compute_crc,
    read_header,
)
from kafka_sidecar.protocol.records import decode_batches

from . import failpoints
from .index import (
    _OPEN_LOCK,
    INDEX_FILES,
    IndexFilePool,
    OffsetIndex,
    TimeIndex,
    default_open_index_files,
    soft_open_file_limit,
)
from .txn_index import TXN_INDEX_SUFFIX, TransactionIndex

log = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
# A check deferred to an index's first use reads every entry's batch header up to this many
# entries (a few ms); past it only the last entries are (reads check the entries they use).
DEFERRED_FULL_CHECK_ENTRIES = 2_000
# Bytes the load's check of the active segment's tail reads at once.
TAIL_READ = 1 << 16


class StorageError(Exception):
    """A write to the log failed (disk full, read-only file system, I/O error).

    Nothing of the failed append stays in the segment: what was written is cut
    off again, so the log is as it was before (Kafka answers KAFKA_STORAGE_ERROR).
    """

    def __init__(self, message: str, errno: int | None = None) -> None:
        super().__init__(message)
        self.errno = errno


def _write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    """os.write until every byte is written (a write may be short, e.g. when the disk fills)."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        if n <= 0:
            raise OSError(28, "short write")
        view = view[n:]


def filename_prefix(offset: int) -> str:
    """Kafka's 20-digit zero-padded segment name."""
    return f"{offset:020d}"


@dataclass
class AppendedBatch:
    """Where a batch goes, from its header: what the indexes need."""

    position: int  # relative to the start of the appended bytes
    size: int
    last_offset: int
    max_timestamp: int


class SegmentFile:
    """An open ``.log`` descriptor, shared by its segment and whoever reads through it.

    The pool of open files (``SegmentFilePool``) may close an inactive segment's file from any
    thread: it only *retires* it (the segment forgets it), and the descriptor is closed when
    the last holder lets go (CPython frees it at once then). A read holds it in a local
    variable, a FileSlice handed to the connection holds it until the slice is sent: a file is
    never closed under a reader, nor its number reused while a slice still names it."""

    __slots__ = ("fd", "retired")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.retired = False

    def __del__(self) -> None:
        if self.retired:
            try:
                os.close(self.fd)
            except OSError:
                pass


_CLOSED = SegmentFile(-1)  # a closed segment's: os calls on it fail with EBADF, as before


def default_open_segment_files() -> int:
    """The pool's default cap: a quarter of RLIMIT_NOFILE's soft limit, at most 10,000 (the
    rest stays for the active segments, one each, the sockets and everything else)."""
    return max(16, min(soft_open_file_limit() // 4, 10_000))


class SegmentFilePool:
    """A bounded LRU of the open ``.log`` files of inactive segments (one per process).

    An inactive segment's ``.log`` is opened by a read and used to stay open for good: with
    many partitions and segments that ran the process out of descriptors. Past ``cap`` the
    least recently read inactive segment's file is retired (closed once no read holds it,
    see SegmentFile) and reopened by its next read. Active segments are never in it."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._lock = threading.Lock()
        self._segments: OrderedDict[int, LogSegment] = OrderedDict()

    def __len__(self) -> int:
        return len(self._segments)

    def touch(self, seg: LogSegment) -> None:
        """``seg``'s file was used: the most recently used now (added if new; may evict)."""
        key = id(seg)
        victims: list[LogSegment] = []
        with self._lock:
            segments = self._segments
            if key in segments:
                segments.move_to_end(key)
                return
            segments[key] = seg
            while len(segments) > self.cap:
                victims.append(segments.popitem(last=False)[1])
        for victim in victims:
            victim._retire_file()

    def discard(self, seg: LogSegment) -> None:
        with self._lock:
            self._segments.pop(id(seg), None)

    def set_cap(self, cap: int) -> None:
        """Change the cap (closing what is over it now)."""
        victims: list[LogSegment] = []
        with self._lock:
            self.cap = max(1, cap)
            while len(self._segments) > self.cap:
                victims.append(self._segments.popitem(last=False)[1])
        for victim in victims:
            victim._retire_file()


# The pool of segments opened outside a LogManager (tools, tests); each LogManager has its own.
SEGMENT_FILES = SegmentFilePool(default_open_segment_files())


class OpenFilePools:
    """The pools of open files of one LogManager (inactive segments' logs, index descriptors):
    two brokers in one process (tests, the embedded fixture) no longer share, or evict from,
    each other's. Sized from the soft RLIMIT_NOFILE."""

    def __init__(self, segments: SegmentFilePool | None = None, indexes: IndexFilePool | None = None) -> None:
        self.segments = segments if segments is not None else SegmentFilePool(default_open_segment_files())
        self.indexes = indexes if indexes is not None else IndexFilePool(default_open_index_files())
        _LIVE_POOLS.add(self)

    def follow_open_file_limit(self) -> tuple[int, int]:
        with _OPEN_LOCK:
            self.indexes.cap = default_open_index_files()
        self.segments.set_cap(default_open_segment_files())
        return self.indexes.cap, self.segments.cap


_LIVE_POOLS: weakref.WeakSet[OpenFilePools] = weakref.WeakSet()
DEFAULT_POOLS = OpenFilePools(SEGMENT_FILES, INDEX_FILES)


def follow_open_file_limit() -> tuple[int, int]:
    """Recompute every pool's caps (open index files, inactive segments' logs) from the soft
    RLIMIT_NOFILE in effect now. They are first computed when made, before the broker raises the
    limit (server/broker.py raise_open_file_limit), which calls this after; returns the default
    pools' (index files cap, segment files cap)."""
    for pools in list(_LIVE_POOLS):
        pools.follow_open_file_limit()
    return INDEX_FILES.cap, SEGMENT_FILES.cap


@dataclass
class FileSlice:
    """A byte range of a segment file, for sendfile or pread."""

    fd: int
    path: Path
    position: int
    size: int
    # Keeps ``fd`` open while the slice lives (the pool may retire the segment's file meanwhile).
    file: SegmentFile | None = field(default=None, repr=False, compare=False)

    def read(self) -> bytes:
        return os.pread(self.fd, self.size, self.position)


class SegmentFiles:
    """The part of LogSegment that opens its files at need: the ``.log`` descriptor (shared
    with the LogManager's pool of open files), the lazy indexes' deferred sanity check and
    the largest timestamp read from the time index at its first use."""

    active: bool
    dir: Path
    base_offset: int
    offset_index: OffsetIndex
    time_index: TimeIndex
    _log_path_str: str
    _pools: OpenFilePools
    _log_path: Path | None
    _fd: int | None
    _file_ref: SegmentFile | None
    _preallocated: bool
    _max_ts: tuple[int, int] | None
    _deferred_check: bool

    @property
    def log_path(self) -> Path:
        path = self._log_path
        if path is None:
            path = self._log_path = Path(self._log_path_str)
        return path

    @log_path.setter
    def log_path(self, path: Path) -> None:
        self._log_path = path
        self._log_path_str = os.fspath(path)

    def rebuild_indexes(self) -> None:
        raise NotImplementedError

    @property
    def fd(self) -> int:
        """The .log's file descriptor, opened at the first use (-1 once closed: EBADF, as before).
        Writers (the active segment, never retired) use it; reads hold ``_file()`` instead."""
        return self._file().fd

    def _file(self) -> SegmentFile:
        """The open .log (opened at need), to hold for the length of a read: an inactive
        segment's file counts in its pool, which may retire the least recently used."""
        f = self._file_ref
        if f is None:
            with _OPEN_LOCK:
                f = self._file_ref
                if f is None:
                    f = self._file_ref = SegmentFile(os.open(self._log_path_str, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644))
                    self._fd = f.fd
        if not self.active and f.fd >= 0:
            self._pools.segments.touch(self)
        return f

    def _retire_file(self) -> None:
        """The pool closes this inactive segment's file (when the last reader lets go of it)."""
        with _OPEN_LOCK:
            f = self._file_ref
            if self.active or f is None or f.fd < 0:
                return
            self._file_ref, self._fd = None, None
            f.retired = True
        del f  # closed here unless a read or a FileSlice still holds it

    def _close_file(self, forever: bool) -> None:
        """Close the .log now (``forever``: later uses fail with EBADF, as after close())."""
        self._pools.segments.discard(self)
        with _OPEN_LOCK:
            f = self._file_ref
            self._file_ref, self._fd = (_CLOSED, -1) if forever else (None, None)
            if f is not None and f.fd >= 0:
                f.retired = False
                os.close(f.fd)

    def _preallocate(self, length: int) -> None:
        """Grow the new, empty file to ``length`` (sparse, as Java's setLength) and write at
        positions from now on (an O_APPEND descriptor would write past the zeros)."""
        self._close_file(forever=False)
        with _OPEN_LOCK:
            f = self._file_ref = SegmentFile(os.open(self._log_path_str, os.O_RDWR | os.O_CREAT, 0o644))
            self._fd = f.fd
        os.ftruncate(f.fd, length)
        self._preallocated = True

    # ---- the time index's last entry, read at first use ------------------------------

    def _max_entry(self) -> tuple[int, int]:
        m = self._max_ts
        if m is None:
            m = self._max_ts = self.time_index.last_entry
        return m

    @property
    def max_timestamp_so_far(self) -> int:
        return self._max_entry()[0]

    @max_timestamp_so_far.setter
    def max_timestamp_so_far(self, value: int) -> None:
        self._max_ts = (value, self._max_entry()[1])

    @property
    def offset_of_max_timestamp(self) -> int:
        return self._max_entry()[1]

    @offset_of_max_timestamp.setter
    def offset_of_max_timestamp(self, value: int) -> None:
        self._max_ts = (self._max_entry()[0], value)

    @property
    def max_timestamp_known(self) -> bool:
        """Whether the largest timestamp was read or set since the load (a clean close writes
        the final time index entry only then, as Kafka's LogSegment.close)."""
        return self._max_ts is not None

    # ---- the loader's deferred index check (Kafka's LazyIndex) -------------------------

    def defer_index_check(self) -> None:
        """Clean load: check the indexes at their first use instead of now (``_on_index_load``)."""
        self._deferred_check = True

    @property
    def index_check_pending(self) -> bool:
        return self._deferred_check

    def _on_index_load(self) -> None:
        """First use of either index (under ``_index_lock``; other threads wait): read both and,
        if the loader deferred it, run its sanity check; a damaged index is rebuilt from the log
        before any entry is used. The .log is not CRC-checked here: a clean stop left it whole
        (its tail was checked at load)."""
        oi, ti = self.offset_index, self.time_index
        oi.begin_check()
        ti.begin_check()
        try:
            if self._deferred_check:
                self._deferred_check = False
                problem = segment_index_problem(self, full=oi.entries + ti.entries <= DEFERRED_FULL_CHECK_ENTRIES)
                if problem is None and not self.active and (oi.padded or ti.padded):
                    problem = "indexes of an inactive segment are not trimmed"
                if problem is not None:
                    log.warning("%s: %s; rebuilding the indexes of segment %d", self.dir.name, problem, self.base_offset)
                    self.rebuild_indexes()
        finally:
            oi.end_check()
            ti.end_check()


class LogSegment(SegmentFiles):
    def __init__(
        self,
        dir: Path,
        base_offset: int,
        index_interval_bytes: int,
        max_index_size: int,
        *,
        active: bool,
        suffix: str = "",
        loaded: bool = False,
        preallocate: int = 0,
        txn_index_exists: bool | None = None,
        pools: OpenFilePools = DEFAULT_POOLS,
    ) -> None:
        self._pools = pools  # the LogManager's pools of open files (the process default outside one)
        self.dir = dir
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.active = active  # its indexes are preallocated (trimmed once it becomes inactive)
        prefix = filename_prefix(base_offset)
        # Strings for the os calls; the Path object only when asked for (one fewer per segment at start).
        self._log_path: Path | None = None
        self._log_path_str = os.path.join(dir, prefix + LOG_SUFFIX + suffix)
        # The .log of an inactive segment is opened at its first read (most are never read
        # after a restart); the active one, where appends go, at once. ``_fd`` mirrors
        # ``_file.fd`` (None: not open; -1: closed for good).
        self._fd: int | None = None
        self._file_ref: SegmentFile | None = None
        # ``preallocate``: the new file's length (the topic's ``preallocate``: segment.bytes),
        # written at positions from ``size`` on and cut back to ``size`` when the segment stops
        # being active or is closed (Kafka's FileRecords with preallocate). 0: plain appends.
        self._preallocated = False
        try:
            self.size = os.stat(self._log_path_str).st_size if not active else -1
        except FileNotFoundError:
            self.size = -1
        if self.size < 0:
            self.size = os.fstat(self.fd).st_size
            if preallocate > 0 and self.size == 0:
                self._preallocate(preallocate)
        # ``loaded``: an existing segment opened by the log loader: its indexes are lazy (Kafka's
        # LazyIndex: opened and read at their first use, when ``_on_index_load`` runs the
        # sanity check the loader deferred, if it did) and the active ones are preallocated at
        # their first write, not at load.
        self._index_lock = threading.RLock()
        self._deferred_check = False
        stem = f"{self._log_path_str[: -len(LOG_SUFFIX + suffix + prefix)]}{prefix}"
        self.offset_index = OffsetIndex(stem + INDEX_SUFFIX + suffix, base_offset, max_index_size, active, preallocate_at_first_write=loaded,
                                        lazy=loaded, lock=self._index_lock, on_load=self._on_index_load, pool=pools.indexes)
        self.time_index = TimeIndex(stem + TIME_INDEX_SUFFIX + suffix, base_offset, max_index_size, active, preallocate_at_first_write=loaded,
                                    lazy=loaded, lock=self._index_lock, on_load=self._on_index_load, pool=pools.indexes)
        # Aborted transactions whose ABORT marker is in this segment; the file exists only once it has an entry.
        self.txn_index = TransactionIndex(os.path.join(dir, prefix + TXN_INDEX_SUFFIX + suffix), base_offset, exists=txn_index_exists)
        self.created_ms = int(time.time() * 1000)
        self.bytes_since_last_index_entry = 0
        # Kafka's maxTimestampAndOffsetSoFar: read from the time index at its first use (None until then).
        self._max_ts: tuple[int, int] | None = None if loaded else self.time_index.last_entry
        self.rolling_based_timestamp: int | None = None
        self.next_offset_hint: int | None = None  # next offset after the last batch, once known
        self.deleted = False
        # Bytes past ``size`` that a failed append could not cut off (read-only disk): cut before the next write.
        self._dirty_tail = False
        self._index_warned = False

    def trim_log(self) -> None:
        """Cut a preallocated file back to its bytes (roll and clean close: Kafka's FileRecords.trim)."""
        if self._preallocated:
            os.ftruncate(self._file().fd, self.size)
            self._preallocated = False

    def _write(self, data: bytes | bytearray | memoryview, pos: int) -> None:
        f = self._file()  # held: the cleaner writes to an inactive (.cleaned) segment
        if not self._preallocated:
            _write_all(f.fd, data)
            return
        view = memoryview(data)
        while view:
            n = os.pwrite(f.fd, view, pos)
            if n <= 0:
                raise OSError(28, "short write")
            view, pos = view[n:], pos + n

    def release_files(self) -> None:
        """After the load, before anything is served: close what an idle segment does not need
        (its indexes; the .log too unless it is the active segment), reopened at need. Never
        while serving: a FileSlice handed out holds the .log's descriptor."""
        self.offset_index.release()
        self.time_index.release()
        if not self.active:
            self._close_file(forever=False)

    def open_file_count(self) -> int:
        """File descriptors this segment holds (.log and indexes; for tests and metrics)."""
        f = self._file_ref
        n = 1 if f is not None and f.fd >= 0 else 0
        return n + self.offset_index.is_open + self.time_index.is_open + (self.txn_index._fd is not None)

    # ---- appending ----------------------------------------------------------------

    def append(self, data: bytes | bytearray | memoryview, batches: list[AppendedBatch]) -> None:
        """Append offset-assigned batches (``data``) and index them.

        All or nothing: if a write fails (disk full, read-only file system) the
        bytes already written and the new index entries are removed again and
        StorageError is raised, leaving the segment as it was.
        """
        if not batches:
            return
        base_pos = self.size
        # Locals, not properties, in this per-produce loop; the indexes' entry counts (for the
        # undo) are taken only before this append's first index entry.
        (max_ts, max_ts_offset), since, rolling = self._max_entry(), self.bytes_since_last_index_entry, self.rolling_based_timestamp
        entries: tuple[int, int] | None = None
        try:
            if self._dirty_tail:
                self._cut(base_pos)
                self._dirty_tail = False
            if failpoints.due("segment.append.torn"):
                self._write(memoryview(data)[: max(1, len(data) // 2)], base_pos)
                failpoints.die()
            self._write(data, base_pos)
            failpoints.hit("segment.append.before_index")
            if base_pos == 0:
                self.rolling_based_timestamp = batches[0].max_timestamp
            interval = self.index_interval_bytes
            for b in batches:
                if b.max_timestamp > max_ts:
                    max_ts, max_ts_offset = b.max_timestamp, b.last_offset
                if since > interval:
                    if entries is None:
                        entries = (self.offset_index.entries, self.time_index.entries)
                    self.offset_index.append(b.last_offset, base_pos + b.position)
                    self.time_index.maybe_append(max_ts, max_ts_offset)
                    since = 0
                since += b.size
        except OSError as e:
            self._undo_append(base_pos, rolling, entries)
            raise StorageError(f"cannot append {len(data)} bytes to {self.log_path}: {e.strerror or e}", e.errno) from e
        self._max_ts = (max_ts, max_ts_offset)
        self.bytes_since_last_index_entry = since
        self.size += len(data)
        self.next_offset_hint = batches[-1].last_offset + 1

    def _undo_append(self, size: int, rolling: int | None, entries: tuple[int, int] | None) -> None:
        """Undo a failed append (its largest timestamp and index byte count were not stored)."""
        self.rolling_based_timestamp = rolling
        self.size = size
        if entries is not None:
            for index, n in ((self.offset_index, entries[0]), (self.time_index, entries[1])):
                if index.entries > n:
                    try:
                        index.truncate_to_entries(n)
                    except OSError:
                        del index.keys[n:]
                        del index.values[n:]
        try:
            self._cut(size)
        except OSError as e:
            # Cut again before the next write; a restart's recovery cuts it too (CRC check).
            self._dirty_tail = True
            log.warning("cannot cut the failed append off %s (%s): will retry before the next write", self.log_path, e.strerror or e)

    def _cut(self, size: int) -> None:
        """Remove the bytes from ``size`` on (a preallocated file keeps its length: zeros)."""
        f = self._file()
        if self._preallocated:
            length = os.fstat(f.fd).st_size
            os.ftruncate(f.fd, size)
            os.ftruncate(f.fd, max(length, size))
        else:
            os.ftruncate(f.fd, size)

    def should_roll(self, messages_size: int, max_timestamp: int, max_offset: int, max_segment_bytes: int, roll_ms: int, now_ms: int) -> bool:
        """Kafka's LogSegment.shouldRoll: size, time (record timestamps), full indexes, offset range."""
        if self.size > max_segment_bytes - messages_size:
            return True
        if self.size > 0 and self.time_waited_for_roll(now_ms, max_timestamp) > roll_ms:
            return True
        if self.offset_index.is_full or self.time_index.is_full:
            return True
        return max_offset - self.base_offset > 2**31 - 1

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        ts = self._load_rolling_based_timestamp()
        if ts is not None and ts >= 0:
            return message_timestamp - ts
        return now_ms - self.created_ms

    def _load_rolling_based_timestamp(self) -> int | None:
        if self.rolling_based_timestamp is None and self.size >= BATCH_HEADER_SIZE:
            self.rolling_based_timestamp = read_header(os.pread(self._file().fd, BATCH_HEADER_SIZE, 0)).max_timestamp
        return self.rolling_based_timestamp

    def on_become_inactive(self) -> None:
        """On roll: final time index entry, then trim both indexes (Kafka's onBecomeInactiveSegment).

        The index files are opened first (they may have been released after the load): if that
        fails (no descriptor left, I/O error) nothing has changed and the roll fails.
        """
        try:
            self.offset_index.open()
            self.time_index.open()
        except OSError as e:
            raise StorageError(f"cannot open the indexes of {self.log_path} to roll: {e.strerror or e}", e.errno) from e
        self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp, skip_full_check=True)
        self.trim_log()
        self.offset_index.trim()
        self.time_index.trim()
        # Reopened at need (a lookup reads the entries in memory; a flush reopens to fsync).
        self.offset_index.release()
        self.time_index.release()
        self.active = False
        self.txn_index.close_writer()
        if self._file_ref is not None and self._file_ref.fd >= 0:
            self._pools.segments.touch(self)  # inactive now: its open .log counts in the pool

    # ---- reading ------------------------------------------------------------------

    def iter_batches(self, position: int = 0, end: int | None = None, chunk: int = 1 << 20) -> Iterator[tuple[int, BatchHeader]]:
        """Yield (position, header) of each complete batch from ``position`` (headers only)."""
        end = self.size if end is None else end
        pos = position
        f = self._file()  # held while the generator lives
        while end - pos >= BATCH_HEADER_SIZE:
            raw = os.pread(f.fd, BATCH_HEADER_SIZE, pos)
            if len(raw) < BATCH_HEADER_SIZE:
                return
            h = read_header(raw)
            if h.batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD or pos + h.size > end:
                return
            yield pos, h
            pos += h.size

    def translate_offset(self, offset: int, start_position: int = 0) -> tuple[int, BatchHeader] | None:
        """First batch whose last offset >= ``offset``, searching from ``start_position``."""
        for pos, h in self.iter_batches(start_position):
            if h.last_offset >= offset:
                return pos, h
        return None

    def _indexed_position(self, offset: int) -> int:
        """Where to start scanning for ``offset``: the offset index's position, once checked.

        An entry must point at a batch whose last offset it names; if it does not
        (a damaged index), scan from the start of the segment and rebuild the
        indexes, so a damaged index never makes a read start inside a batch.
        """
        entry_offset, pos = self.offset_index.lookup(offset)
        if pos == 0:
            return 0
        raw = os.pread(self._file().fd, BATCH_HEADER_SIZE, pos) if pos + BATCH_HEADER_SIZE <= self.size else b""
        if len(raw) == BATCH_HEADER_SIZE:
            h = read_header(raw)
            if h.magic == 2 and h.last_offset == entry_offset:
                return pos
        if not self._index_warned:
            self._index_warned = True
            log.warning("offset index %s: entry (%d, %d) does not point at its batch; rebuilding the indexes", self.offset_index.path, entry_offset, pos)
            try:
                self.rebuild_indexes()
            except OSError as e:
                log.warning("cannot rebuild the indexes of %s: %s", self.log_path, e)
        return 0

    def read(self, start_offset: int, max_size: int, max_position: int | None = None, min_one_message: bool = True) -> FileSlice | None:
        """Bytes from the batch holding ``start_offset``, up to ``max_size`` (Kafka's LogSegment.read).

        The first batch is returned whole even when larger than ``max_size`` if
        ``min_one_message``; the slice may end inside a batch, as in Kafka.
        """
        pos = self._indexed_position(start_offset)
        found = self.translate_offset(start_offset, pos)
        if found is None:
            return None
        start, header = found
        limit = self.size if max_position is None else max_position
        if start >= limit:
            return None
        adjusted = max(max_size, header.size) if min_one_message else max_size
        if adjusted <= 0:
            return None
        size = min(limit - start, adjusted)
        f = self._file()
        return FileSlice(f.fd, self.log_path, start, size, f)

    def fetch_upper_bound_offset(self, position: int) -> int | None:
        """Kafka's OffsetIndex.fetchUpperBoundOffset: the offset of the first index entry at or
        past ``position`` (a bound for the aborted transactions of a fetch), or None."""
        values = self.offset_index.values
        i = bisect.bisect_left(values, position)
        return self.offset_index.keys[i] if i < len(values) else None

    def read_batch_bytes(self, position: int, size: int) -> bytes:
        return os.pread(self._file().fd, size, position)

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int) -> tuple[int, BatchHeader] | None:
        """Position and header of the first batch with max timestamp >= ``timestamp``."""
        ts_entry, ts_offset = self.time_index.lookup(timestamp)
        if ts_entry != -1:
            # The entry must name a batch's last offset and its max timestamp; a damaged
            # time index is rebuilt rather than trusted.
            found = self.translate_offset(ts_offset, self._indexed_position(ts_offset))
            if found is None or found[1].last_offset != ts_offset or found[1].max_timestamp != ts_entry:
                log.warning("time index %s: entry (%d, %d) does not match its batch; rebuilding the indexes", self.time_index.path, ts_entry, ts_offset)
                try:
                    self.rebuild_indexes()
                    ts_entry, ts_offset = self.time_index.lookup(timestamp)
                except OSError as e:
                    log.warning("cannot rebuild the indexes of %s: %s", self.log_path, e)
                    ts_offset = self.base_offset
        pos = self._indexed_position(max(ts_offset, starting_offset))
        for p, h in self.iter_batches(pos):
            if h.max_timestamp >= timestamp and h.last_offset >= starting_offset:
                return p, h
        return None

    def search_for_timestamp(self, timestamp: int, starting_offset: int) -> tuple[int, int, int] | None:
        """Kafka's LogSegment.findOffsetByTimestamp: the first record at or after ``starting_offset``
        whose timestamp is >= ``timestamp``, as (timestamp, offset, leader epoch or -1). Only
        batches whose max timestamp qualifies are decoded."""
        found = self.find_offset_by_timestamp(timestamp, starting_offset)
        if found is None:
            return None
        for p, h in self.iter_batches(found[0]):
            if h.max_timestamp < timestamp or h.last_offset < starting_offset:
                continue
            for batch in decode_batches(self.read_batch_bytes(p, h.size), verify_crc=False):
                for r in batch.records:
                    if r.timestamp >= timestamp and r.offset >= starting_offset:
                        epoch = h.partition_leader_epoch if h.partition_leader_epoch >= 0 else -1
                        return r.timestamp, r.offset, epoch
        return None

    def read_next_offset(self) -> int:
        """Offset after the last batch (scans from the last index entry)."""
        if self.next_offset_hint is not None:
            return self.next_offset_hint
        _, pos = self.offset_index.lookup(2**62)
        nxt = self.base_offset
        for _, h in self.iter_batches(pos):
            nxt = h.last_offset + 1
        self.next_offset_hint = nxt
        return nxt

    def largest_timestamp(self) -> int:
        """Largest record timestamp (from the time index), else the file's last-modified time:
        what retention by time compares with (Kafka's LogSegment.largestTimestamp)."""
        if self.max_timestamp_so_far >= 0:
            return self.max_timestamp_so_far
        return self.last_modified_ms()

    # ---- load-time checks (Kafka's sanityCheck, and a bit more) --------------------

    def index_problem(self, full: bool = False) -> str | None:
        """Why this segment's indexes cannot be trusted, or None (``segment_index_problem``)."""
        return segment_index_problem(self, full)

    def tail_problem(self) -> str | None:
        """Whether the batches after the last offset index entry are whole and intact."""
        return segment_tail_problem(self)

    def rebuild_indexes(self) -> None:
        """Rebuild both indexes from the batch headers, without cutting anything off the log."""
        self._deferred_check = False
        self.offset_index.reset()
        self.time_index.reset()
        self.bytes_since_last_index_entry = 0
        self.max_timestamp_so_far, self.offset_of_max_timestamp = -1, self.base_offset
        nxt = self.base_offset
        for pos, h in self.iter_batches(0):
            if h.max_timestamp > self.max_timestamp_so_far:
                self.max_timestamp_so_far, self.offset_of_max_timestamp = h.max_timestamp, h.last_offset
            if self.bytes_since_last_index_entry > self.index_interval_bytes:
                self.offset_index.append(h.last_offset, pos)
                self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp)
                self.bytes_since_last_index_entry = 0
            self.bytes_since_last_index_entry += h.size
            nxt = h.last_offset + 1
        if self.max_timestamp_so_far >= 0:
            self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp, skip_full_check=True)
        if not self.active:
            self.offset_index.trim()
            self.time_index.trim()
            # An inactive segment keeps no index file open (reopened at need).
            self.offset_index.release()
            self.time_index.release()
        self.next_offset_hint = nxt

    # ---- recovery -----------------------------------------------------------------

    def recover(self) -> int:
        """Rebuild both indexes from the log and truncate a torn or corrupt tail.

        Returns the number of bytes truncated. Checks every batch's CRC.
        """
        self._deferred_check = False  # everything is rebuilt from the log: nothing left to check
        self.offset_index.reset()
        self.time_index.reset()
        self.bytes_since_last_index_entry = 0
        self.max_timestamp_so_far, self.offset_of_max_timestamp = -1, self.base_offset
        self.rolling_based_timestamp = None
        valid = 0
        f = self._file()
        file_size = os.fstat(f.fd).st_size
        self.size = file_size
        pos = 0
        prev_last = self.base_offset - 1
        while file_size - pos >= BATCH_HEADER_SIZE:
            raw = os.pread(f.fd, BATCH_HEADER_SIZE, pos)
            h = read_header(raw)
            if h.magic != 2 or h.batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD or pos + h.size > file_size:
                break
            data = os.pread(f.fd, h.size, pos)
            # The CRC does not cover the base offset: offsets must also go up, from the segment's base.
            if compute_crc(data, 0, h.size) != h.crc or h.base_offset <= prev_last or h.last_offset_delta < 0:
                break
            prev_last = h.last_offset
            if h.max_timestamp > self.max_timestamp_so_far:
                self.max_timestamp_so_far, self.offset_of_max_timestamp = h.max_timestamp, h.last_offset
            if self.bytes_since_last_index_entry > self.index_interval_bytes:
                self.offset_index.append(h.last_offset, pos)
                self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp)
                self.bytes_since_last_index_entry = 0
            self.bytes_since_last_index_entry += h.size
            if self.rolling_based_timestamp is None:
                self.rolling_based_timestamp = h.max_timestamp
            self.next_offset_hint = h.last_offset + 1
            pos += h.size
            valid = pos
        if self.max_timestamp_so_far >= 0:
            # The entry a clean roll would have written (Kafka's LogSegment.recover does the same).
            self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp, skip_full_check=True)
        truncated = file_size - valid
        if truncated:
            os.ftruncate(f.fd, valid)
            self.size = valid
        if valid == 0:
            self.next_offset_hint = self.base_offset
        return truncated

    def truncate_to(self, offset: int) -> int:
        """Drop every batch at or after ``offset`` (batch-aligned); returns bytes removed."""
        found = self.translate_offset(offset)
        if found is None:
            return 0
        pos, h = found
        if h.base_offset < offset:
            pos += h.size
        removed = self.size - pos
        os.ftruncate(self._file().fd, pos)
        self.size = pos
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self.next_offset_hint = None
        self.recover()
        return removed

    # ---- lifecycle ----------------------------------------------------------------

    def flush(self) -> None:
        os.fsync(self._file().fd)
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def close(self) -> None:
        self._close_file(forever=True)
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.close()

    def paths(self) -> list[Path]:
        """The segment's files (the ``.txnindex`` only if it exists: it is created lazily)."""
        out = [self.log_path, self.offset_index.path, self.time_index.path]
        if self.txn_index.exists:
            out.append(self.txn_index.path)
        return out

    def last_modified_ms(self) -> int:
        f = self._file_ref
        st = os.fstat(f.fd) if f is not None and f.fd >= 0 else os.stat(self._log_path_str)
        return int(st.st_mtime * 1000)

    def change_suffix(self, old: str, new: str) -> None:
        """Rename all files of this segment, e.g. to ``.deleted``."""
        def renamed(p: Path) -> Path:
            name = p.name[: -len(old)] if old and p.name.endswith(old) else p.name
            return p.with_name(name + new)

        new_log = renamed(self.log_path)
        if self.log_path.exists():
            os.rename(self.log_path, new_log)
        self.log_path = new_log
        self._log_path_str = str(new_log)
        for idx in (self.offset_index, self.time_index):
            if idx.path.exists():
                idx.rename(renamed(idx.path))
        self.txn_index.rename(renamed(self.txn_index.path))


def segment_tail_problem(seg: LogSegment) -> str | None:
    """Whether the batches after the last offset index entry are whole and intact.

    After a clean shutdown nothing is recovered; this cheap check (at most
    ``index.interval.bytes`` plus one batch, CRC-checked) still catches a torn
    or damaged end of the active segment, where the next append would go.
    """
    # The last entry's position, unchecked (the offset index's own check may be deferred to its
    # first use): a wrong one fails the walk below, and the recovery then rebuilds the index.
    entry = seg.offset_index.last_entry_unchecked()
    pos = entry[1] if entry is not None else 0
    if pos and pos >= seg.size:
        return f"offset index {seg.offset_index.path.name}: last entry at position {pos} is past the end of {seg.log_path.name}"
    prev_last = seg.base_offset - 1
    first = True
    f = seg._file()
    # The tail is read in one pread (up to TAIL_READ bytes; an idle partition's whole tail), a
    # batch past the buffer with one more.
    buf = b""
    buf_pos = pos  # the file position of buf[0]
    while pos < seg.size:
        rel = pos - buf_pos
        if rel + BATCH_HEADER_SIZE > len(buf):
            buf, buf_pos, rel = os.pread(f.fd, max(BATCH_HEADER_SIZE, min(seg.size - pos, TAIL_READ)), pos), pos, 0
            if len(buf) < BATCH_HEADER_SIZE:
                return f"{seg.size - pos} stray bytes at the end of {seg.log_path.name}"
        h = read_header(buf, rel)
        if h.magic != 2 or h.batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD or pos + h.size > seg.size:
            return f"no valid batch at position {pos} of {seg.log_path.name}"
        if (h.base_offset <= prev_last and not first) or h.base_offset < seg.base_offset or h.last_offset < h.base_offset:
            return f"batch at position {pos} of {seg.log_path.name} has offset {h.base_offset} out of order"
        if first and entry is not None and h.last_offset != entry[0]:
            # The batch the last index entry names (the CRC does not cover the base offset).
            return f"batch at position {pos} of {seg.log_path.name} has last offset {h.last_offset}, its index entry says {entry[0]}"
        crc = compute_crc(buf, rel, h.size) if rel + h.size <= len(buf) else compute_crc(os.pread(f.fd, h.size, pos), 0, h.size)
        if crc != h.crc:
            return f"batch at position {pos} of {seg.log_path.name} fails its CRC check"
        prev_last = h.last_offset
        first = False
        pos += h.size
    if not first:
        seg.next_offset_hint = prev_last + 1  # the log end: no index lookup needed for it
    elif seg.size == 0:
        seg.next_offset_hint = seg.base_offset
    return None


def segment_index_problem(seg: LogSegment, full: bool = False) -> str | None:
    """Why a segment's indexes cannot be trusted, or None.

    Cheap: the entries are already in memory; reads at most the batches from
    the last offset index entry on. Checks what a damaged or torn index shows:
    a file that is not whole entries, entries out of order, positions outside
    the log, and that the last entry of each index names a real batch
    (offset index: the batch at its position has that last offset; time index:
    the batch with that last offset has that max timestamp). ``full`` checks
    every entry that way (one or a few header reads per entry).
    """
    oi, ti = seg.offset_index, seg.time_index
    for name, index in (("offset index", oi), ("time index", ti)):
        problem = index.load_problem or (index.padding_problem() if index.padded else None)
        if problem:
            return f"{name} {index.path.name}: {problem}"
    prev = 0
    for off, pos in zip(oi.keys, oi.values, strict=True):
        if pos <= prev or pos >= seg.size or not 0 < off - seg.base_offset <= 2**31 - 1:
            return f"offset index {oi.path.name}: entry ({off}, {pos}) is outside the log or out of order"
        prev = pos
    for i in range(len(oi.keys) if full else min(1, len(oi.keys))):
        off, pos = oi.keys[-1 - i], oi.values[-1 - i]
        raw = os.pread(seg._file().fd, BATCH_HEADER_SIZE, pos)
        h = read_header(raw) if len(raw) == BATCH_HEADER_SIZE else None
        if h is None or h.magic != 2 or h.last_offset != off:
            return f"offset index {oi.path.name}: entry ({off}, {pos}) does not point at its batch"
    prev_off = seg.base_offset
    for off in ti.values:
        if off < prev_off or off - seg.base_offset > 2**31 - 1:
            return f"time index {ti.path.name}: entry offset {off} is out of order"
        prev_off = off
    for i in range(len(ti.keys) if full else min(1, len(ti.keys))):
        ts, off = ti.keys[-1 - i], ti.values[-1 - i]
        found = seg.translate_offset(off, oi.lookup(off)[1])
        if found is None or found[1].last_offset != off or found[1].max_timestamp != ts:
            return f"time index {ti.path.name}: entry ({ts}, {off}) does not match a batch"
    if not seg.active and seg.size and (not oi.keys or not ti.keys):
        # An inactive segment's indexes were completed when it was rolled: an empty one
        # that should have entries was emptied.
        since = 0
        for _, h in seg.iter_batches(0):
            if not oi.keys and since > seg.index_interval_bytes:
                return f"offset index {oi.path.name} is empty"
            if not ti.keys and h.max_timestamp >= 0:
                return f"time index {ti.path.name} is empty"
            since += h.size
    return None
