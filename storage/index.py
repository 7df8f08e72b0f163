"""OffsetIndex and TimeIndex: Kafka's sparse segment indexes.

Entries are mirrored in memory (lists, binary-searched) and written to the file
with ``pwrite``. Like Kafka, the file of the active segment is preallocated to
``segment.index.bytes`` and trimmed to its used size when the segment is rolled
or the log is closed.

- ``.index``: 8-byte entries (int32 offset relative to the segment's base offset,
  int32 file position), in increasing offset order.
- ``.timeindex``: 12-byte entries (int64 timestamp, int32 relative offset),
  timestamps strictly increasing.

The entry layouts are ``formats.py``'s (shared with the read-only readers of tools).
"""

from __future__ import annotations

import bisect
import os
import struct
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .formats import OFFSET_INDEX_ENTRY, TIME_INDEX_ENTRY

# Opening an index file lazily may race between a reader and the writer: one lock for all.
_OPEN_LOCK = threading.Lock()


def soft_open_file_limit() -> int:
    """RLIMIT_NOFILE's soft limit (40,000 when unlimited, 1,024 when unknown): what the pools of
    open files (index descriptors here, inactive segments' logs in log_segment.py) divide."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if soft == resource.RLIM_INFINITY or soft <= 0:
            soft = 40_000
    except (ImportError, OSError, ValueError):
        soft = 1024
    return soft


def default_open_index_files() -> int:
    """How many index files may stay open at once: an eighth of RLIMIT_NOFILE's soft limit
    (Kafka maps its indexes and keeps no descriptor for them; here the writes go through a
    descriptor, kept open for the indexes written last). 10,000 written partitions otherwise
    held 20,000 index descriptors besides their 10,000 logs: past the usual 20,000 limit."""
    return max(16, min(soft_open_file_limit() // 8, 5_000))


class IndexFilePool:
    """The indexes holding a descriptor, least recently used first (one pool per LogManager):
    over ``cap`` the oldest one not in use (no pin) is closed, to be reopened at its next write.
    Changed under _OPEN_LOCK."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.indexes: OrderedDict[_Index, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self.indexes)

    def close_least_recently_used(self, opening: _Index) -> None:
        """Close the least recently used open index that no thread is using (under _OPEN_LOCK)."""
        for index in self.indexes:
            if index is not opening and not index._pins and index._fd is not None and index._fd >= 0:
                os.close(index._fd)
                index._fd = None
                del self.indexes[index]
                return


# The pool of indexes opened outside a LogManager (tools, tests); each LogManager has its own.
INDEX_FILES = IndexFilePool(default_open_index_files())
# A lazy index without a segment's lock of its own loads under this one.
_LOAD_LOCK = threading.RLock()
_ZERO_CHUNK = 1 << 20


class _Index:
    """The entries of one index file, mirrored in memory.

    Loading is bounded by the entries, not the file: a preallocated file (the active segment's
    after a crash) ends in zero entries, and the first of them is found by a binary search
    (Kafka trusts the recovery of the segments past the recovery point instead of scanning).
    The file descriptor is opened only to load, then again at the first write (Kafka's
    LazyIndex): an idle partition keeps no index file open.
    """

    entry: struct.Struct

    def __init__(self, path: Path | str, base_offset: int, max_index_size: int, writable: bool, *, preallocate_at_first_write: bool = False,
                 lazy: bool = False, lock: threading.RLock | None = None, on_load: Callable[[], None] | None = None,
                 pool: IndexFilePool | None = None) -> None:
        self._pool = pool if pool is not None else INDEX_FILES  # where its open descriptor counts
        # The path as a str for the os calls; the Path object is made when asked for (10,000
        # partitions made 20,000 of them at start for files most of which are never opened).
        self._path_str = os.fspath(path)
        self._path: Path | None = path if isinstance(path, Path) else None
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_size // self.entry.size)
        self._fd: int | None = None  # None: not open (opened at need); -1: closed for good
        self._pins = 0  # threads using the descriptor now: it is not closed under them
        self._dirty = False  # written since the last fsync
        self._keys: list[int] = []
        self._values: list[int] = []
        # Why the file could not be read whole (damaged), or None: the segment rebuilds it.
        self._load_problem: str | None = None
        self._padded = False
        # Size of the file as found at load: the zero tail past the entries lies below it.
        self._size_at_load = 0
        self._file_size = 0  # the file's length, as this index last set or found it
        # The active segment's file is preallocated to segment.index.bytes (Kafka resizes it when
        # the segment is created, and again when the log is loaded). A loaded log defers that to
        # its first index write: an idle partition then never grows and trims the file, which
        # was a third of the start's and the stop's file work with 10,000 partitions.
        self._preallocate = writable and preallocate_at_first_write
        # Kafka's LazyIndex: a ``lazy`` index (a segment found by the loader) neither opens nor
        # reads its file until its entries are first used (``_materialize``); ``on_load`` then
        # runs once under ``lock`` (the segment's sanity check), before any other thread sees them.
        self._lock = lock if lock is not None else _LOAD_LOCK
        self._on_load = on_load
        self._read = False  # the file's entries are in memory
        self._loading = False  # inside ``_materialize`` (its thread holds ``_lock``)
        self._ready = not lazy  # the entries may be used (read, and checked when ``on_load``)
        if lazy:
            return
        self._call(self._load)
        self._read = True
        if writable and not preallocate_at_first_write:
            self.resize(self.max_entries * self.entry.size)
            self._dirty = False  # preallocated zeros: nothing to fsync
        # Nothing is written until the first append: close the file until then.
        self._release()

    # ---- lazy loading (Kafka's LazyIndex) ------------------------------------------------

    @property
    def keys(self) -> list[int]:
        if not self._ready:
            self._materialize()
        return self._keys

    @property
    def values(self) -> list[int]:
        if not self._ready:
            self._materialize()
        return self._values

    @property
    def load_problem(self) -> str | None:
        if not self._ready:
            self._materialize()
        return self._load_problem

    @property
    def padded(self) -> bool:
        if not self._ready:
            self._materialize()
        return self._padded

    @property
    def is_loaded(self) -> bool:
        """Whether the entries were read from the file (for tests: an untouched index is not)."""
        return self._read

    def _materialize(self) -> None:
        """First use of a lazy index: read the file, run ``on_load``, then publish the entries.
        Other threads wait on ``_lock``; the loading thread itself (``_loading``) sees the raw
        entries, which is what the sanity check reads."""
        with self._lock:
            if self._ready or self._loading:
                return
            self._loading = True
            try:
                self.read_entries()
                if self._on_load is not None:
                    self._on_load()
            finally:
                self._loading = False
            self._ready = True

    def read_entries(self) -> None:
        """Read the file's entries into memory once (no check: ``on_load`` does that). A file
        found empty by its size costs a stat, no open."""
        with self._lock:
            if self._read:
                return
            try:
                size = os.stat(self._path_str).st_size
            except FileNotFoundError:
                size = -1
            if size == 0:
                self._size_at_load = self._file_size = 0
            else:
                # Missing: created, as the eager open does (the loader listed it moments ago).
                self._call(self._load)
                self._release()
            self._read = True

    def last_entry_unchecked(self) -> tuple[int, int] | None:
        """The last entry (offset, position) as read, before any sanity check (None if none):
        where the loader's check of the active segment's tail starts."""
        self.read_entries()
        return (self._keys[-1], self._values[-1]) if self._keys else None

    def begin_check(self) -> None:
        """The owning segment's sanity check starts (under ``_lock``): raw entries for this thread."""
        self._loading = True
        self.read_entries()

    def end_check(self) -> None:
        """The sanity check is over (its rebuild included): the entries may be used by all."""
        self._loading = False
        self._ready = True

    @property
    def path(self) -> Path:
        p = self._path
        if p is None:
            p = self._path = Path(self._path_str)
        return p

    def _open(self, pin: bool = False) -> int:
        """The descriptor (opened at need); ``pin``: held until ``_unpin``, never closed meanwhile."""
        with _OPEN_LOCK:
            fd = self._fd
            if fd is None:
                fd = self._fd = os.open(self._path_str, os.O_RDWR | os.O_CREAT, 0o644)
                pool = self._pool
                pool.indexes[self] = None
                if len(pool.indexes) > pool.cap:
                    pool.close_least_recently_used(self)
            elif fd >= 0:
                self._pool.indexes.move_to_end(self)
            if fd < 0:
                raise OSError(9, f"index {self.path} is closed")
            if pin:
                self._pins += 1
        return fd

    def _unpin(self) -> None:
        with _OPEN_LOCK:
            self._pins -= 1

    def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(fd, *args)`` with the descriptor pinned for the call."""
        fd = self._open(pin=True)
        try:
            return fn(fd, *args)
        finally:
            self._unpin()

    def _release(self) -> None:
        with _OPEN_LOCK:
            if self._fd is not None and self._fd >= 0 and not self._pins:
                os.close(self._fd)
                self._fd = None
                self._pool.indexes.pop(self, None)

    def open(self) -> None:
        """Open the file now (before a change that must not fail half-way on the open)."""
        self._open()

    def release(self) -> None:
        """Close the file until the next write (after the load: what it wrote, e.g. a recovery's
        rebuilt entries, is still fsynced by the next ``flush``)."""
        self._release()

    @property
    def is_open(self) -> bool:
        """Whether the index holds an open file descriptor."""
        return self._fd is not None and self._fd >= 0

    def _entry_is_zero(self, fd: int, i: int) -> bool:
        size = self.entry.size
        return os.pread(fd, size, i * size).count(0) == size

    def _used_entries(self, fd: int, count: int) -> int:
        """How many entries precede the zero tail of a preallocated file (binary search:
        entries are never all-zero bytes, the preallocated tail is nothing else)."""
        if count == 0 or not self._entry_is_zero(fd, count - 1):
            return count
        lo, hi = 0, count - 1  # entry ``hi`` is zero
        while lo < hi:
            mid = (lo + hi) // 2
            if self._entry_is_zero(fd, mid):
                hi = mid
            else:
                lo = mid + 1
        return lo

    def _load(self, fd: int) -> None:
        size = os.fstat(fd).st_size
        self._size_at_load = self._file_size = size
        used = self._used_entries(fd, size // self.entry.size)
        data = os.pread(fd, used * self.entry.size, 0)
        prev_key: int | None = None
        for a, b in self.entry.iter_unpack(data):
            key, value = self._decode(a, b)
            # A zero entry or one out of order ends the entries.
            if prev_key is not None and key <= prev_key:
                break
            if prev_key is None and self._is_padding(a, b):
                break
            self._keys.append(key)
            self._values.append(value)
            prev_key = key
        # Room past the entries: normal for the active segment (preallocated), not once trimmed.
        self._padded = size > len(self._keys) * self.entry.size
        if size % self.entry.size:
            self._load_problem = f"size {size} is not a multiple of {self.entry.size}"
        elif len(self._keys) < used:
            # What follows the entries can only be preallocated zeros; anything else is damage.
            self._load_problem = f"entry {len(self._keys)} is out of order"

    def padding_problem(self) -> str | None:
        """Whether the tail past the entries, as found at load, is all zeros (reads it: only
        for an index that should have been trimmed, never for one that is recovered anyway)."""
        start = len(self.keys) * self.entry.size
        if self.load_problem or start >= self._size_at_load:
            return None
        return self._call(self._zero_tail_problem, start)

    def _zero_tail_problem(self, fd: int, start: int) -> str | None:
        pos = start
        while pos < self._size_at_load:
            chunk = os.pread(fd, min(_ZERO_CHUNK, self._size_at_load - pos), pos)
            if not chunk:
                break
            if chunk.count(0) != len(chunk):
                return f"entry {len(self.keys)} is out of order"
            pos += len(chunk)
        return None

    def _decode(self, a: int, b: int) -> tuple[int, int]:
        raise NotImplementedError

    def _is_padding(self, a: int, b: int) -> bool:
        """A first entry that can only be preallocated zeros."""
        return False

    @property
    def entries(self) -> int:
        return len(self.keys)

    @property
    def is_full(self) -> bool:
        return len(self.keys) >= self.max_entries

    @property
    def size_in_bytes(self) -> int:
        return len(self.keys) * self.entry.size

    def _write(self, a: int, b: int) -> None:
        if self._preallocate:
            self.resize(self.max_entries * self.entry.size)
        self._dirty = True
        end = (len(self.keys) + 1) * self.entry.size
        self._call(os.pwrite, self.entry.pack(a, b), end - self.entry.size)
        self._file_size = max(self._file_size, end)

    def resize(self, size: int) -> None:
        self._preallocate = False
        self._dirty = True
        size = max(size, self.size_in_bytes)
        self._call(os.ftruncate, size)
        self._file_size = size

    def trim(self) -> None:
        """Cut the preallocated tail, as Kafka does when a segment becomes inactive (nothing to
        do, not even an open, when the file holds just the entries)."""
        self._preallocate = False
        if not self._ready and not (self._read and self._padded):
            # Never used since the load (Kafka's LazyIndex.close trims a loaded index only): the
            # file is as found, and one found without a zero tail has nothing to cut.
            return
        used = self.size_in_bytes
        if self._file_size == used:
            return
        self._dirty = True
        self._call(os.ftruncate, self.size_in_bytes)
        self._file_size = self.size_in_bytes

    def truncate_to_entries(self, n: int) -> None:
        del self.keys[n:]
        del self.values[n:]
        # Zero everything after the kept entries (shrink, then grow back sparse),
        # so a reload of a preallocated file cannot resurrect removed entries.
        fd = self._open(pin=True)
        try:
            self._dirty = True
            size = os.fstat(fd).st_size
            os.ftruncate(fd, n * self.entry.size)
            os.ftruncate(fd, max(size, n * self.entry.size))
        finally:
            self._unpin()
        self._file_size = max(size, n * self.entry.size)

    def reset(self) -> None:
        self.truncate_to_entries(0)

    def flush(self) -> None:
        if self._fd is None:
            # Released: fsync what was written before (fsync covers the file, whatever the fd).
            if self._dirty:
                self._call(os.fsync)
                self._release()
        else:
            self._call(os.fsync)
        self._dirty = False

    def close(self) -> None:
        with _OPEN_LOCK:
            fd, self._fd = self._fd, -1
            self._pool.indexes.pop(self, None)
        if fd is not None and fd >= 0:
            os.close(fd)

    def rename(self, path: Path) -> None:
        os.rename(self._path_str, path)
        self._path_str, self._path = os.fspath(path), path


class OffsetIndex(_Index):
    entry = OFFSET_INDEX_ENTRY

    def _is_padding(self, a: int, b: int) -> bool:
        # Position 0 is never indexed: an entry is added only after
        # index.interval.bytes have been appended since the last one.
        return a == 0 and b == 0

    def _decode(self, a: int, b: int) -> tuple[int, int]:
        return a + self.base_offset, b

    @property
    def last_offset(self) -> int:
        return self.keys[-1] if self.keys else self.base_offset

    def append(self, offset: int, position: int) -> None:
        if self.keys and offset <= self.keys[-1]:
            raise ValueError(
                f"offset index {self.path}: offset {offset} is not larger than the last entry {self.keys[-1]}"
            )
        self._write(offset - self.base_offset, position)
        self.keys.append(offset)
        self.values.append(position)

    def lookup(self, target_offset: int) -> tuple[int, int]:
        """Largest entry with offset <= target, else (base offset, 0)."""
        i = bisect.bisect_right(self.keys, target_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.keys[i], self.values[i]

    def truncate_to(self, offset: int) -> None:
        """Remove entries with offset >= ``offset``."""
        self.truncate_to_entries(bisect.bisect_left(self.keys, offset))


class TimeIndex(_Index):
    entry = TIME_INDEX_ENTRY

    def _is_padding(self, a: int, b: int) -> bool:
        # A preallocated, never-written file: timestamp 0 at the base offset.
        return a == 0 and b == 0

    def _decode(self, a: int, b: int) -> tuple[int, int]:
        return a, b + self.base_offset

    @property
    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the last entry, or (-1, base offset) when empty."""
        if not self.keys:
            return -1, self.base_offset
        return self.keys[-1], self.values[-1]

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        if not skip_full_check and self.is_full:
            raise ValueError(f"time index {self.path} is full")
        if self.keys and offset < self.values[-1]:
            raise ValueError(
                f"time index {self.path}: offset {offset} is smaller than the last entry {self.values[-1]}"
            )
        # An empty index's last timestamp counts as -1 (NO_TIMESTAMP), as in Kafka.
        if timestamp > (self.keys[-1] if self.keys else -1):
            fd = self._open(pin=True)
            try:
                if len(self.keys) * self.entry.size + self.entry.size > os.fstat(fd).st_size:
                    os.ftruncate(fd, (len(self.keys) + 1) * self.entry.size)
            finally:
                self._unpin()
            self._write(timestamp, offset - self.base_offset)
            self.keys.append(timestamp)
            self.values.append(offset)

    def lookup(self, target_timestamp: int) -> tuple[int, int]:
        """Largest entry with timestamp <= target, else (-1, base offset)."""
        i = bisect.bisect_right(self.keys, target_timestamp) - 1
        if i < 0:
            return -1, self.base_offset
        return self.keys[i], self.values[i]

    def truncate_to(self, offset: int) -> None:
        """Remove entries whose offset >= ``offset``."""
        n = len(self.values)
        while n > 0 and self.values[n - 1] >= offset:
            n -= 1
        self.truncate_to_entries(n)
