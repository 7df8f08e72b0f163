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
from pathlib import Path

from .formats import OFFSET_INDEX_ENTRY, TIME_INDEX_ENTRY


class _Index:
    entry: struct.Struct

    def __init__(self, path: Path, base_offset: int, max_index_size: int, writable: bool) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_size // self.entry.size)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        self.keys: list[int] = []
        self.values: list[int] = []
        # Why the file could not be read whole (damaged), or None: the segment rebuilds it.
        self.load_problem: str | None = None
        self.padded = False
        self._load()
        if writable:
            self.resize(self.max_entries * self.entry.size)

    def _load(self) -> None:
        size = os.fstat(self._fd).st_size
        data = os.pread(self._fd, size - size % self.entry.size, 0)
        prev_key: int | None = None
        for a, b in self.entry.iter_unpack(data):
            key, value = self._decode(a, b)
            # A preallocated file that was never trimmed ends in zero entries: stop there.
            if prev_key is not None and key <= prev_key:
                break
            if prev_key is None and self._is_padding(a, b):
                break
            self.keys.append(key)
            self.values.append(value)
            prev_key = key
        # Room past the entries: normal for the active segment (preallocated), not once trimmed.
        self.padded = size > len(self.keys) * self.entry.size
        if size % self.entry.size:
            self.load_problem = f"size {size} is not a multiple of {self.entry.size}"
        else:
            used = len(self.keys) * self.entry.size
            # Whatever follows the entries can only be preallocated zeros; anything else is damage.
            if data[used:].count(0) != len(data) - used:
                self.load_problem = f"entry {len(self.keys)} is out of order"

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
        os.pwrite(self._fd, self.entry.pack(a, b), len(self.keys) * self.entry.size)

    def resize(self, size: int) -> None:
        os.ftruncate(self._fd, max(size, self.size_in_bytes))

    def trim(self) -> None:
        """Cut the preallocated tail, as Kafka does when a segment becomes inactive."""
        os.ftruncate(self._fd, self.size_in_bytes)

    def truncate_to_entries(self, n: int) -> None:
        del self.keys[n:]
        del self.values[n:]
        # Zero everything after the kept entries (shrink, then grow back sparse),
        # so a reload of a preallocated file cannot resurrect removed entries.
        size = os.fstat(self._fd).st_size
        os.ftruncate(self._fd, n * self.entry.size)
        os.ftruncate(self._fd, max(size, n * self.entry.size))

    def reset(self) -> None:
        self.truncate_to_entries(0)

    def flush(self) -> None:
        os.fsync(self._fd)

    def close(self) -> None:
        os.close(self._fd)

    def rename(self, path: Path) -> None:
        os.rename(self.path, path)
        self.path = path


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
            if len(self.keys) * self.entry.size + self.entry.size > os.fstat(self._fd).st_size:
                os.ftruncate(self._fd, (len(self.keys) + 1) * self.entry.size)
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
