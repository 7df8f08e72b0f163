"""``preallocate=true`` as Kafka's FileRecords does it: a new active segment's ``.log`` is
created at ``segment.bytes`` (sparse), appended at positions from its logical size, cut back to
its bytes when it rolls or the log closes cleanly, and a crash's zero tail is cut by recovery.
Real files; the logical size (what reads, DescribeLogDirs and retention see) never counts the
preallocated zeros."""

from __future__ import annotations

import os
from pathlib import Path

from kafka_sidecar.protocol.record_batch import validate_batches
from kafka_sidecar.protocol.records import Record, decode_batches, encode_batch
from kafka_sidecar.storage.log import Log
from kafka_sidecar.storage.log_config import LogConfig

T0 = 1_700_000_000_000
SEGMENT = 1 << 20
CONFIG = {"segment.bytes": SEGMENT, "preallocate": True}


def _append(lg: Log, n: int, size: int = 1000) -> None:
    first = lg.log_end_offset
    data = bytearray(encode_batch([Record(i, T0 + first + i, b"k%d" % (first + i), b"v" * size) for i in range(n)]))
    lg.append_as_leader(data, validate_batches(data), now_ms=T0 + first)


def _log_files(d: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in sorted(d.iterdir()) if p.suffix == ".log"}


def _values(lg: Log) -> list[bytes]:
    out: list[bytes] = []
    pos = 0
    while (chunk := lg.read(pos, 1 << 22, True)) is not None and chunk.size:
        batches = decode_batches(chunk.read())
        out += [r.value for b in batches for r in b.records]
        pos = batches[-1].last_offset + 1
    return out


def test_a_new_segment_is_preallocated_and_cut_back_when_it_rolls_and_closes(tmp_path):
    d = tmp_path / "t-0"
    lg = Log(d, "t", 0, LogConfig(None, CONFIG))
    assert _log_files(d) == {"00000000000000000000.log": SEGMENT}  # created at segment.bytes
    _append(lg, 5)
    seg = lg.segments[-1]
    assert os.path.getsize(seg.log_path) == SEGMENT and 0 < seg.size < SEGMENT  # logical size only
    while len(lg.segments) == 1:
        _append(lg, 50)
    files = _log_files(d)
    old, new = lg.segments[0], lg.segments[1]
    assert files[old.log_path.name] == old.size < SEGMENT  # trimmed at the roll
    assert files[new.log_path.name] == SEGMENT  # the new active segment is preallocated
    values = _values(lg)
    end = lg.log_end_offset
    assert len(values) == end
    lg.close()
    assert _log_files(d)[new.log_path.name] == new.size  # a clean close trims
    lg = Log(d, "t", 0, LogConfig(None, CONFIG))
    try:
        assert lg.log_end_offset == end and _values(lg) == values
        _append(lg, 3)  # an existing active segment is appended as it is (Kafka: fileAlreadyExists)
        assert lg.log_end_offset == end + 3
        assert os.path.getsize(lg.segments[-1].log_path) == lg.segments[-1].size
    finally:
        lg.close()


def test_a_crash_leaves_a_zero_tail_that_recovery_cuts(tmp_path):
    d = tmp_path / "t-0"
    lg = Log(d, "t", 0, LogConfig(None, CONFIG))
    for _ in range(4):
        _append(lg, 10)
    lg.flush()
    end, size = lg.log_end_offset, lg.segments[-1].size
    values = _values(lg)
    # kill -9: no trim, no clean close; the descriptors just go away.
    for seg in lg.segments:
        for fd in (seg._fd, seg.offset_index._fd, seg.time_index._fd):
            if fd is not None and fd >= 0:
                os.close(fd)
    assert os.path.getsize(d / "00000000000000000000.log") == SEGMENT
    lg = Log(d, "t", 0, LogConfig(None, CONFIG), recovery_point=0, clean_shutdown=False)
    try:
        assert lg.log_end_offset == end and _values(lg) == values
        assert os.path.getsize(d / "00000000000000000000.log") == size  # the zeros are cut
        _append(lg, 2)
        assert _values(lg)[-2:] == [b"v" * 1000] * 2
    finally:
        lg.close()


def test_a_failed_append_leaves_zeros_not_its_bytes(tmp_path):
    d = tmp_path / "t-0"
    lg = Log(d, "t", 0, LogConfig(None, CONFIG))
    try:
        _append(lg, 2)
        seg = lg.segments[-1]
        size = seg.size
        seg._cut(size)  # what an undone append does past the logical size
        with open(seg.log_path, "rb") as f:
            f.seek(size)
            assert f.read(4096) == b"\0" * 4096
        assert os.path.getsize(seg.log_path) == SEGMENT
        _append(lg, 2)
        assert lg.log_end_offset == 4 and len(_values(lg)) == 4
    finally:
        lg.close()
