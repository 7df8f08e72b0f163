"""TransactionIndex: a segment's ``<base>.txnindex`` of aborted transactions (Kafka's format).

Each entry is Kafka's AbortedTxn, 34 bytes: version int16 (0), producerId int64,
firstOffset int64, lastOffset int64 (the offset of the ABORT marker),
lastStableOffset int64 (the LSO right after the marker was written). An entry
goes into the index of the segment holding the marker. As in Kafka the file is
created only when the first entry is appended; entries' last offsets increase. The entry
layout is ``formats.py``'s ABORTED_TXN_ENTRY.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import NamedTuple

from .formats import ABORTED_TXN_ENTRY, ABORTED_TXN_VERSION, read_file, unpack_entries

log = logging.getLogger(__name__)

TXN_INDEX_SUFFIX = ".txnindex"
ENTRY_SIZE = ABORTED_TXN_ENTRY.size  # 34


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return ABORTED_TXN_ENTRY.pack(ABORTED_TXN_VERSION, self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset)


class TransactionIndex:
    def __init__(self, path: Path | str, base_offset: int, *, exists: bool | None = None) -> None:
        """``exists``: whether the file is there, when the caller listed the directory already
        (False skips a failed open per segment at start: most segments have no aborted transaction)."""
        # A str until a Path is asked for (one fewer Path object per segment at start).
        self._path: Path | str = path
        self.base_offset = base_offset
        self.entries: list[AbortedTxn] = []
        self._fd: int | None = None
        self.load_problem: str | None = None
        if exists is not False:
            self._load()

    def _load(self) -> None:
        try:
            data = read_file(self._path)
        except FileNotFoundError:
            return
        if len(data) % ENTRY_SIZE:
            self.load_problem = f"{len(data)} bytes is not a whole number of {ENTRY_SIZE}-byte entries"
        prev = -1
        for version, pid, first, last, lso in unpack_entries(data, ABORTED_TXN_ENTRY):
            if version != ABORTED_TXN_VERSION or last < first or last <= prev:
                self.load_problem = f"bad entry (version {version}, producer {pid}, offsets {first}..{last})"
                break
            self.entries.append(AbortedTxn(pid, first, last, lso))
            prev = last

    @property
    def path(self) -> Path:
        if not isinstance(self._path, Path):
            self._path = Path(self._path)
        return self._path

    @path.setter
    def path(self, path: Path) -> None:
        self._path = path

    @property
    def exists(self) -> bool:
        return self._fd is not None or self.path.exists()

    def _open(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        return self._fd

    def append(self, txn: AbortedTxn) -> None:
        """Append one entry (Kafka's TransactionIndex.append: last offsets must increase)."""
        if self.entries and self.entries[-1].last_offset >= txn.last_offset:
            raise ValueError(
                f"The last offset of appended transactions must increase sequentially, but {txn.last_offset} is not "
                f"greater than current last offset {self.entries[-1].last_offset} of index {self.path}"
            )
        data = txn.encode()
        fd = self._open()
        n = os.write(fd, data)
        if n != len(data):
            raise OSError(28, "short write")
        self.entries.append(txn)

    def collect_aborted(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        """Kafka's collectAbortedTxns: entries overlapping [fetch_offset, upper_bound_offset), and
        whether the search is complete (an entry's LSO reaches the upper bound)."""
        out = []
        for txn in self.entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                out.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return out, True
        return out, False

    def _rewrite(self) -> None:
        if not self.exists:
            return
        fd = self._open()
        os.ftruncate(fd, 0)
        if self.entries:
            os.write(fd, b"".join(t.encode() for t in self.entries))

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose marker is at or after ``offset``."""
        kept = [t for t in self.entries if t.last_offset < offset]
        if len(kept) != len(self.entries) or self.load_problem:
            self.entries = kept
            self.load_problem = None
            self._rewrite()

    def reset(self) -> None:
        """Remove every entry (the file, if any, becomes empty), before a rebuild."""
        self.entries = []
        self.load_problem = None
        self._rewrite()

    def flush(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)
        elif self.path.exists():
            # Entries written through a descriptor closed since (close_writer): fsync the file.
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def close_writer(self) -> None:
        """Release the descriptor of an index that gets no more appends (an inactive segment's)."""
        self.close()

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def rename(self, new_path: Path) -> None:
        if self.path.exists():
            os.rename(self.path, new_path)
        self.path = new_path

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)
