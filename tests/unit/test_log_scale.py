"""Start-up that scales with the partitions, not with the preallocated files: an index's entries
are found without reading its zero tail, an idle partition keeps one file open, and the
segments a crash left past the recovery point are recovered without checking them first.
Real files in a temporary directory; reads are counted through the modules' ``os``.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from kafka_sidecar.protocol.record_batch import validate_batches
from kafka_sidecar.protocol.records import Record, encode_batch
from kafka_sidecar.storage import index as index_module
from kafka_sidecar.storage.index import OffsetIndex, TimeIndex
from kafka_sidecar.storage.log import Log
from kafka_sidecar.storage.log_config import LogConfig

T0 = 1_700_000_000_000
TEN_MIB = 10 * 1024 * 1024


class CountingOS:
    """The ``os`` module, with the bytes ``pread`` returned counted per file name suffix."""

    def __init__(self) -> None:
        self.read: dict[str, int] = {}
        self._names: dict[int, str] = {}

    def __getattr__(self, name: str):
        return getattr(os, name)

    def open(self, path, flags, mode=0o777):
        fd = os.open(path, flags, mode)
        self._names[fd] = Path(path).suffix
        return fd

    def pread(self, fd: int, n: int, pos: int) -> bytes:
        data = os.pread(fd, n, pos)
        suffix = self._names.get(fd, "?")
        self.read[suffix] = self.read.get(suffix, 0) + len(data)
        return data


@pytest.fixture
def counting(monkeypatch) -> CountingOS:
    c = CountingOS()
    monkeypatch.setattr(index_module, "os", c)
    return c


def crashed_index(cls, path: Path, base: int, entries: list[tuple[int, int]]) -> None:
    """A 10 MiB preallocated index with ``entries`` and a zero tail: the active segment's
    index as a kill -9 leaves it (never trimmed)."""
    idx = cls(path, base, TEN_MIB, writable=True)
    for a, b in entries:
        if cls is OffsetIndex:
            idx.append(a, b)
        else:
            idx.maybe_append(a, b)
    idx.close()
    assert path.stat().st_size == TEN_MIB // cls.entry.size * cls.entry.size


def test_a_preallocated_offset_index_loads_its_entries_without_reading_the_zero_tail(tmp_path, counting):
    path = tmp_path / "00000000000000001000.index"
    entries = [(1000 + 10 * i, 4096 * (i + 1)) for i in range(1, 300)]
    crashed_index(OffsetIndex, path, 1000, entries)
    counting.read.clear()
    idx = OffsetIndex(path, 1000, TEN_MIB, writable=True)
    try:
        assert list(zip(idx.keys, idx.values, strict=True)) == entries
        assert idx.load_problem is None and idx.padded
        # The entries, plus one 8-byte probe per step of a binary search over 1.3 M slots.
        assert counting.read[".index"] <= len(entries) * 8 + 8 * 32
        idx.append(5000, 4096 * 400)
        assert idx.keys[-1] == 5000
    finally:
        idx.close()


def test_a_preallocated_time_index_loads_its_entries_without_reading_the_zero_tail(tmp_path, counting):
    path = tmp_path / "00000000000000000000.timeindex"
    entries = [(T0 + i, 3 * i) for i in range(1, 50)]
    crashed_index(TimeIndex, path, 0, entries)
    counting.read.clear()
    idx = TimeIndex(path, 0, TEN_MIB, writable=False)
    try:
        assert list(zip(idx.keys, idx.values, strict=True)) == entries
        assert counting.read[".timeindex"] <= len(entries) * 12 + 12 * 32
        assert idx.padding_problem() is None  # the tail, read on demand, is all zeros
    finally:
        idx.close()


def test_an_empty_preallocated_index_is_found_empty(tmp_path, counting):
    path = tmp_path / "00000000000000000000.index"
    crashed_index(OffsetIndex, path, 0, [])
    counting.read.clear()
    idx = OffsetIndex(path, 0, TEN_MIB, writable=False)
    try:
        assert idx.entries == 0 and idx.padded and idx.load_problem is None
        assert counting.read[".index"] <= 8 * 32
    finally:
        idx.close()


def test_damage_is_still_found(tmp_path):
    # An entry out of order among the entries: reported at load.
    path = tmp_path / "00000000000000000000.index"
    crashed_index(OffsetIndex, path, 0, [(5, 100), (9, 200), (12, 300)])
    with open(path, "r+b") as f:
        f.seek(8)
        f.write(struct.pack(">ii", 1, 200))
    idx = OffsetIndex(path, 0, TEN_MIB, writable=False)
    assert idx.entries == 1 and idx.load_problem == "entry 1 is out of order"
    idx.close()
    # Garbage past a zero gap in the tail: not seen by the bounded load, but by padding_problem
    # (which the loader asks of an index that should have been trimmed).
    path2 = tmp_path / "00000000000000000100.index"
    crashed_index(OffsetIndex, path2, 100, [(105, 100)])
    with open(path2, "r+b") as f:
        f.seek(TEN_MIB // 2)
        f.write(b"\x07" * 8)
    idx = OffsetIndex(path2, 100, TEN_MIB, writable=False)
    try:
        assert idx.entries == 1 and idx.load_problem is None
        assert idx.padding_problem() == "entry 1 is out of order"
    finally:
        idx.close()


def _append(lg: Log, n: int, size: int = 20) -> None:
    first = lg.log_end_offset
    recs = [Record(i, T0 + first + i, b"k%d" % (first + i), b"v" * size) for i in range(n)]
    data = bytearray(encode_batch(recs))
    lg.append_as_leader(data, validate_batches(data), now_ms=T0 + first)


def test_restart_after_a_crash_does_not_scan_the_preallocated_indexes(tmp_path, counting):
    config = LogConfig(None, {"segment.index.bytes": TEN_MIB, "index.interval.bytes": 100})
    lg = Log(tmp_path / "t-0", "t", 0, config)
    for _ in range(40):
        _append(lg, 2)
    end = lg.log_end_offset
    # kill -9: nothing trimmed, no clean close (the descriptors just go away).
    for seg in lg.segments:
        for fd in (seg._fd, seg.offset_index._fd, seg.time_index._fd):
            if fd is not None and fd >= 0:
                os.close(fd)
    counting.read.clear()
    lg2 = Log(tmp_path / "t-0", "t", 0, config, recovery_point=0, clean_shutdown=False)
    try:
        assert lg2.log_end_offset == end
        index_bytes = counting.read.get(".index", 0) + counting.read.get(".timeindex", 0)
        assert index_bytes < 64 * 1024, counting.read  # not the 20 MiB of preallocated files
        assert lg2.read(0, 1 << 20, True).size > 0
        assert lg2.segments[-1].offset_index.entries > 0  # rebuilt by the recovery
    finally:
        lg2.close()


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="needs /proc")
def test_an_idle_partition_keeps_one_file_open(tmp_path):
    config = LogConfig(None, {"segment.bytes": 400, "segment.index.bytes": 1 << 16})
    lg = Log(tmp_path / "t-0", "t", 0, config)
    for _ in range(30):
        _append(lg, 3)
    assert len(lg.segments) >= 10
    lg.close()
    before = _open_fds()
    lg = Log(tmp_path / "t-0", "t", 0, config)
    try:
        assert _open_fds() - before == 1  # the active segment's .log
        assert sum(s.open_file_count() for s in lg.segments) == 1
        # A read of the oldest segment opens that .log (and keeps it for the slices handed out).
        data = lg.read(0, 100, True)
        assert data is not None and data.size > 0
        assert sum(s.open_file_count() for s in lg.segments) == 2
        # An append opens the active segment's indexes as it needs them.
        _append(lg, 3, size=200)
        assert lg.log_end_offset == 93
    finally:
        lg.close()
    assert _open_fds() == before


def test_an_idle_partition_restarts_and_stops_without_rewriting_its_files(tmp_path):
    """A loaded log grows its active indexes to segment.index.bytes at their first write (Kafka
    does it at load), and a clean stop with nothing appended since the last snapshot writes
    none (Kafka's takeSnapshot skips an unchanged offset): a start and a stop of an idle
    partition change no file."""
    config = LogConfig(None, {"segment.index.bytes": 1 << 16, "index.interval.bytes": 100})
    d = tmp_path / "t-0"
    lg = Log(d, "t", 0, config)
    for _ in range(5):
        _append(lg, 2)
    lg.close()

    def files() -> dict[str, tuple[int, int]]:
        return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in d.iterdir()}

    stopped = files()
    active_index = d / f"{lg.segments[-1].base_offset:020d}.index"
    assert stopped[active_index.name][0] < 1 << 16  # trimmed by the clean close
    lg = Log(d, "t", 0, config)
    lg.close()
    assert files() == stopped  # nothing grown, trimmed, or rewritten
    lg = Log(d, "t", 0, config)
    try:
        _append(lg, 2, size=300)
        _append(lg, 2, size=300)  # past index.interval.bytes since the last entry: an index entry
        assert active_index.stat().st_size == 1 << 16  # preallocated by the first index write
    finally:
        lg.close()
    assert active_index.stat().st_size < 1 << 16
    snapshots = sorted(p.name for p in d.iterdir() if p.suffix == ".snapshot")
    assert snapshots[-1] == f"{lg.log_end_offset:020d}.snapshot"  # a new offset: a new snapshot
