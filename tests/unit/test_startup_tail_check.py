"""The load's check of the active segment's tail after a clean stop (storage/log_segment.py
``segment_tail_problem``): the tail is read in TAIL_READ-byte buffers, a batch past the buffer
with a read of its own. Whatever the layout (batches inside one buffer, across buffers, larger
than one), an intact tail loads as it is and a damaged byte anywhere in it is found (the
segment is recovered: the damaged batch and what follows are cut off). Real files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from kafka_sidecar.protocol.record_batch import iter_headers, validate_batches
from kafka_sidecar.protocol.records import Record, encode_batch
from kafka_sidecar.storage import log_segment
from kafka_sidecar.storage.log import Log
from kafka_sidecar.storage.log_config import LogConfig

T0 = 1_700_000_000_000
# No offset index entry: the check walks the whole active segment from position 0.
CONFIG = {"index.interval.bytes": 1 << 30, "segment.bytes": 1 << 30}


def _batch(value_size: int, records: int = 1) -> bytes:
    return encode_batch([Record(offset=i, timestamp=T0 + i, key=None, value=os.urandom(value_size)) for i in range(records)])


def _write(d: Path, sizes: list[int]) -> list[tuple[int, int]]:
    """A cleanly closed log of one batch per size; (position, size) of each batch in the file."""
    lg = Log(d, "t", 0, LogConfig(None, CONFIG))
    for size in sizes:
        raw = bytearray(_batch(size))
        lg.append_as_leader(raw, validate_batches(raw), now_ms=T0)
    lg.close()
    return [(pos, h.size) for pos, h in iter_headers((d / "00000000000000000000.log").read_bytes())]


def _flip(path: Path, position: int) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        b = f.read(1)
        f.seek(position)
        f.write(bytes([b[0] ^ 0x5A]))


LAYOUTS = {
    "small batches in one buffer": [100] * 20,
    "small batches across buffers": [3000] * 60,  # ~180 KiB: three reads of TAIL_READ
    "a batch larger than the buffer last": [100, 200, 150_000],
    "a batch larger than the buffer first": [150_000, 100, 100],
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_an_intact_tail_loads_as_it_is(tmp_path: Path, layout: str) -> None:
    sizes = LAYOUTS[layout]
    _write(tmp_path / "t-0", sizes)
    lg = Log(tmp_path / "t-0", "t", 0, LogConfig(None, CONFIG), clean_shutdown=True)
    try:
        assert lg.recovered_at_load == 0
        assert lg.log_end_offset == len(sizes)
    finally:
        lg.close()


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("which", ["first", "middle", "last"])
def test_a_damaged_byte_anywhere_in_the_tail_is_found(tmp_path: Path, layout: str, which: str) -> None:
    sizes = LAYOUTS[layout]
    d = tmp_path / "t-0"
    batches = _write(d, sizes)
    i = {"first": 0, "middle": len(batches) // 2, "last": len(batches) - 1}[which]
    position, size = batches[i]
    _flip(d / "00000000000000000000.log", position + size - 7)  # inside the records: covered by the CRC
    lg = Log(d, "t", 0, LogConfig(None, CONFIG), clean_shutdown=True)
    try:
        assert lg.recovered_at_load == 1
        assert lg.log_end_offset == i  # the damaged batch and every later one cut off
        assert os.path.getsize(d / "00000000000000000000.log") == position
    finally:
        lg.close()


def test_stray_bytes_shorter_than_a_header_are_found(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    batches = _write(d, [100, 100])
    with open(d / "00000000000000000000.log", "ab") as f:
        f.write(b"\1" * 20)
    seg_problem = _tail_problem(d)
    assert seg_problem == "20 stray bytes at the end of 00000000000000000000.log"
    lg = Log(d, "t", 0, LogConfig(None, CONFIG), clean_shutdown=True)
    try:
        assert lg.log_end_offset == 2
        assert os.path.getsize(d / "00000000000000000000.log") == sum(size for _, size in batches)
    finally:
        lg.close()


def test_the_buffer_is_smaller_than_the_tail_walked(tmp_path: Path) -> None:
    # The layouts above do cross the buffer: the walk reads more than one TAIL_READ.
    batches = _write(tmp_path / "t-0", LAYOUTS["small batches across buffers"])
    assert batches[-1][0] + batches[-1][1] > 2 * log_segment.TAIL_READ


def _tail_problem(d: Path) -> str | None:
    seg = log_segment.LogSegment(d, 0, 1 << 30, 1 << 20, active=True, loaded=True)
    try:
        return seg.tail_problem()
    finally:
        seg.close()
