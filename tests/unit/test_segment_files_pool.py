"""The bounded pool of open ``.log`` files of inactive segments (SEGMENT_FILES): reads of many
inactive segments keep the process's descriptors under the cap, every read still returns the
right bytes, and a FileSlice handed out keeps its file open even after the pool retired it.
Real files in a temporary directory; descriptors counted in /proc/self/fd."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from kafka_sidecar.protocol.record_batch import iter_headers, validate_batches
from kafka_sidecar.protocol.records import Record, encode_batch
from kafka_sidecar.storage import log_segment
from kafka_sidecar.storage.log import Log
from kafka_sidecar.storage.log_config import LogConfig

T0 = 1_700_000_000_000
CAP = 4

pytestmark = pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="needs /proc")


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def small_pool():
    pool = log_segment.SEGMENT_FILES
    before = pool.cap
    pool.set_cap(CAP)
    yield pool
    pool.set_cap(before)


def _log_with_segments(path: Path, segments: int) -> Log:
    config = LogConfig(None, {"segment.bytes": 300, "segment.index.bytes": 1 << 12})
    lg = Log(path, "t", 0, config)
    while len(lg.segments) < segments:
        first = lg.log_end_offset
        data = bytearray(encode_batch([Record(i, T0 + first + i, b"k%d" % (first + i), b"v%d" % (first + i) * 20) for i in range(2)]))
        lg.append_as_leader(data, validate_batches(data), now_ms=T0 + first)
    return lg


def _expected(seg) -> bytes:
    """The segment's first batch, read from the file by name (not through the segment)."""
    raw = seg.log_path.read_bytes()
    h = next(h for _, h in iter_headers(raw))
    return raw[: h.size]


def test_reads_of_many_inactive_segments_stay_under_the_cap(tmp_path, small_pool):
    lg = _log_with_segments(tmp_path / "t-0", 40)
    lg.close()
    baseline = _open_fds()
    lg = Log(tmp_path / "t-0", "t", 0, lg.config)
    try:
        inactive = lg.segments[:-1]
        assert len(inactive) >= 30
        for _ in range(2):  # twice: the second round reopens what the pool closed
            for seg in inactive:
                data = lg.read(seg.base_offset, 1 << 16, True)
                assert data is not None and data.position == 0
                assert data.read()[: len(_expected(seg))] == _expected(seg)
                del data
                # The active .log, plus at most CAP inactive ones.
                assert _open_fds() - baseline <= 1 + CAP
                assert len(small_pool) <= CAP
        assert sum(s.open_file_count() for s in inactive) <= CAP
        assert lg.segments[-1].open_file_count() >= 1  # the active segment is never closed by the pool
    finally:
        lg.close()
    assert _open_fds() == baseline


def test_a_slice_keeps_its_file_open_after_the_pool_closed_it(tmp_path, small_pool):
    lg = _log_with_segments(tmp_path / "t-0", 12)
    try:
        first = lg.segments[0]
        held = lg.read(first.base_offset, 1 << 16, True)
        assert held is not None
        expected = _expected(first)
        for seg in lg.segments[1:-1]:  # enough reads to retire the first segment's file
            lg.read(seg.base_offset, 1 << 16, True)
        assert first.open_file_count() == 0  # retired by the pool...
        # ...but the slice's descriptor is still that file (not closed, not reused).
        assert os.readlink(f"/proc/self/fd/{held.fd}") == str(first.log_path)
        assert held.read()[: len(expected)] == expected
        fd = held.fd
        del held  # the last holder lets go: now it is closed
        assert not os.path.exists(f"/proc/self/fd/{fd}") or os.readlink(f"/proc/self/fd/{fd}") != str(first.log_path)
        # A new read reopens it transparently.
        again = lg.read(first.base_offset, 1 << 16, True)
        assert again is not None and again.read()[: len(expected)] == expected
    finally:
        lg.close()


def test_reads_from_threads_while_the_pool_evicts(tmp_path, small_pool):
    lg = _log_with_segments(tmp_path / "t-0", 20)
    try:
        segments = lg.segments[:-1]
        expected = {s.base_offset: _expected(s) for s in segments}
        errors: list[str] = []

        def reader(shift: int) -> None:
            for i in range(300):
                seg = segments[(i * 7 + shift) % len(segments)]
                data = lg.read(seg.base_offset, 1 << 16, True)
                if data is None or data.read()[: len(expected[seg.base_offset])] != expected[seg.base_offset]:
                    errors.append(f"segment {seg.base_offset}: wrong bytes")

        threads = [threading.Thread(target=reader, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert len(small_pool) <= CAP
    finally:
        lg.close()


def test_the_default_cap_is_a_fraction_of_the_descriptor_limit():
    import resource

    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    cap = log_segment.default_open_segment_files()
    assert 16 <= cap <= 10_000
    if soft != resource.RLIM_INFINITY:
        assert cap <= max(16, soft // 4)
