"""Kafka's LazyIndex: after a clean stop a segment's .index/.timeindex are neither opened nor
read until first used, and the sanity check the loader used to run at start runs then, before
any entry serves a read: a damaged index is still found and rebuilt from the log."""

from __future__ import annotations

import logging
import struct
from pathlib import Path

from kafka_sidecar.protocol.record_batch import validate_batches
from kafka_sidecar.protocol.records import Record, encode_batch
from kafka_sidecar.storage.log import Log
from kafka_sidecar.storage.log_config import LogConfig

T0 = 1_700_000_000_000
CONFIG = LogConfig(None, {"segment.bytes": 2000, "index.interval.bytes": 100, "segment.index.bytes": 1 << 12})


def _append(lg: Log, n: int = 2) -> None:
    first = lg.log_end_offset
    data = bytearray(encode_batch([Record(i, T0 + 10 * (first + i), b"k%d" % (first + i), b"v" * 60) for i in range(n)]))
    lg.append_as_leader(data, validate_batches(data), now_ms=T0)


def _filled(path: Path) -> Log:
    lg = Log(path, "t", 0, CONFIG)
    for _ in range(40):
        _append(lg)
    assert len(lg.segments) >= 3
    return lg


def _answers(lg: Log) -> tuple[list[int], list[tuple[int, int, int] | None]]:
    positions = []
    for off in range(0, lg.log_end_offset, 3):
        data = lg.read(off, 1, True)
        assert data is not None
        positions.append(data.position)
    by_time = [lg.fetch_offset_by_timestamp(T0 + 10 * off + 5) for off in range(0, lg.log_end_offset, 5)]
    return positions, by_time


def test_a_clean_load_reads_no_index_until_first_use(tmp_path):
    lg = _filled(tmp_path / "t-0")
    expected = _answers(lg)
    end = lg.log_end_offset
    lg.close()
    lg = Log(tmp_path / "t-0", "t", 0, CONFIG, clean_shutdown=True)
    try:
        assert lg.log_end_offset == end
        # Not one time index read, no older segment's offset index read; checks pending.
        assert not any(s.time_index.is_loaded for s in lg.segments)
        assert not any(s.offset_index.is_loaded for s in lg.segments[:-1])
        assert all(s.index_check_pending for s in lg.segments)
        assert _answers(lg) == expected
        assert not any(s.index_check_pending for s in lg.segments)
        _append(lg)
        assert lg.log_end_offset == end + 2
    finally:
        lg.close()


def test_a_damaged_index_found_at_first_use_is_rebuilt_before_it_answers(tmp_path, caplog):
    lg = _filled(tmp_path / "t-0")
    expected = _answers(lg)
    first, last = lg.segments[0], lg.segments[-1]
    lg.close()
    good = {p: p.read_bytes() for p in (first.offset_index.path, first.time_index.path, last.time_index.path)}
    # An offset index entry one byte into its batch, a time index entry one offset off.
    raw = bytearray(good[first.offset_index.path])
    a, b = struct.unpack_from(">ii", raw, 0)
    struct.pack_into(">ii", raw, 0, a, b + 1)
    first.offset_index.path.write_bytes(bytes(raw))
    for path in (first.time_index.path, last.time_index.path):
        raw = bytearray(good[path])
        ts, rel = struct.unpack_from(">qi", raw, 0)
        struct.pack_into(">qi", raw, 0, ts, rel + 1)
        path.write_bytes(bytes(raw))
    with caplog.at_level(logging.WARNING):
        lg = Log(tmp_path / "t-0", "t", 0, CONFIG, clean_shutdown=True)
        try:
            assert not [r for r in caplog.records if "rebuilding the indexes" in r.getMessage()]  # deferred
            assert _answers(lg) == expected  # right from the first answer
            rebuilt = [r.getMessage() for r in caplog.records if "rebuilding the indexes" in r.getMessage()]
            assert any(f"segment {first.base_offset}" in m and m.startswith("t-0: ") for m in rebuilt), rebuilt
            assert any(f"segment {last.base_offset}" in m for m in rebuilt), rebuilt
        finally:
            lg.close()
    # Rebuilt files are what the log gives: byte for byte what was there before the damage.
    for path, data in good.items():
        assert path.read_bytes() == data, path.name


def test_an_untouched_partition_stops_without_touching_its_indexes(tmp_path):
    lg = _filled(tmp_path / "t-0")
    lg.close()
    lg = Log(tmp_path / "t-0", "t", 0, CONFIG, clean_shutdown=True)
    lg.close()
    assert not any(s.time_index.is_loaded for s in lg.segments)
