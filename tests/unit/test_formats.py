"""storage/formats.py: Kafka's on-disk layouts and their read-only readers, against files the
real storage writes (a Log in a temporary directory), and proof that readers (and the tools
built on them) never open a file for writing nor create one."""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import crc32c
import pytest
from kafka_sidecar.protocol.record_batch import validate_batches
from kafka_sidecar.protocol.records import Record, decode_batches, encode_batch
from kafka_sidecar.server.tools import dump_log
from kafka_sidecar.spark import _logdir
from kafka_sidecar.storage import formats, verify
from kafka_sidecar.storage.formats import (
    ABORTED_TXN_VERSION,
    PRODUCER_SNAPSHOT_COUNT,
    PRODUCER_SNAPSHOT_HEADER,
    PRODUCER_SNAPSHOT_VERSION,
    AbortedTxnEntry,
    ProducerSnapshotError,
    decode_producer_snapshot,
    encode_producer_snapshot,
    iter_log_batches,
    read_offset_index,
    read_producer_snapshot,
    read_time_index,
    read_txn_index,
    split_padding,
)
from kafka_sidecar.storage.log import Log
from kafka_sidecar.storage.log_config import LogConfig
from kafka_sidecar.storage.producer_state import list_snapshots, snapshot_path

T0 = 1_700_000_000_000


def make_log(root: Path, **overrides: Any) -> Log:
    cfg = {"segment.index.bytes": 4096, "segment.bytes": 3000, "index.interval.bytes": 200, **overrides}
    return Log(root / "t-0", "t", 0, LogConfig(None, cfg))


def append(lg: Log, n: int, *, pid: int = -1, seq: int = 0, transactional: bool = False, size: int = 40) -> None:
    first = lg.log_end_offset
    recs = [Record(i, T0 + first + i, b"k%d" % i, b"v" * size) for i in range(n)]
    kw: dict[str, Any] = {}
    if pid >= 0:
        kw = {"producer_id": pid, "producer_epoch": 0, "base_sequence": seq, "is_transactional": transactional}
    data = bytearray(encode_batch(recs, **kw))
    lg.append_as_leader(data, validate_batches(data), now_ms=T0 + first)


@pytest.fixture
def written(tmp_path: Path) -> Iterator[Log]:
    """A Log with several segments, a rolled-and-snapshotted history, an aborted transaction."""
    lg = make_log(tmp_path)
    seq = 0
    for i in range(30):
        append(lg, 1 + i % 4)
        if i % 7 == 3:
            append(lg, 2, pid=7, seq=seq, transactional=True)
            seq += 2
            lg.append_transaction_marker(7, 0, 0, commit=i % 2 == 0, now_ms=T0 + lg.log_end_offset)
    lg.roll()
    append(lg, 3)
    yield lg
    if not getattr(lg, "closed_by_test", False):
        lg.close()


def close(lg: Log) -> None:
    """A clean close: snapshot at the log end, last time index entry, indexes trimmed."""
    lg.close()
    lg.closed_by_test = True  # type: ignore[attr-defined]


# ---- round trips against what storage holds --------------------------------------------------------


def test_index_and_time_index_readers_match_storage_while_open_and_after_close(written: Log) -> None:
    lg = written
    assert len(lg.segments) >= 3

    def expected() -> list[tuple[Path, Path, list[tuple[int, int]], list[tuple[int, int]]]]:
        out = []
        for seg in lg.segments:
            base = seg.base_offset
            idx = [(k - base, v) for k, v in zip(seg.offset_index.keys, seg.offset_index.values, strict=True)]
            tix = [(k, v - base) for k, v in zip(seg.time_index.keys, seg.time_index.values, strict=True)]
            out.append((seg.offset_index.path, seg.time_index.path, idx, tix))
        return out

    open_state = expected()
    assert any(idx for _, _, idx, _ in open_state) and any(tix for _, _, _, tix in open_state)
    for index_path, time_path, idx, tix in open_state:
        # The active segment's files are preallocated: what follows the entries is zero padding.
        entries, padding = split_padding(read_offset_index(index_path))
        assert entries == idx and all(e == (0, 0) for e in padding)
        entries, padding = split_padding(read_time_index(time_path))
        assert entries == tix and all(e == (0, 0) for e in padding)
    assert split_padding(read_offset_index(open_state[-1][0]))[1], "the active index is preallocated"

    close(lg)
    for (index_path, time_path, idx, tix), (_, _, idx_after, tix_after) in zip(open_state, expected(), strict=True):
        assert idx_after == idx
        assert tix_after[: len(tix)] == tix  # close may add the active segment's largest timestamp
        assert read_offset_index(index_path) == idx  # trimmed at close: no padding left
        assert read_time_index(time_path) == tix_after


def test_log_batches_match_storage_and_index_positions(written: Log) -> None:
    for seg in written.segments:
        raw = seg.read_batch_bytes(0, seg.size)
        stored = decode_batches(raw, verify_crc=True)
        seen = [(pos, h) for _, pos, h in iter_log_batches(seg.log_path)]
        # One chunk: positions are file positions, each header the batch storage wrote.
        assert [h.base_offset for _, h in seen] == [b.base_offset for b in stored]
        assert [h.last_offset for _, h in seen] == [b.base_offset + b.last_offset_delta for b in stored]
        assert sum(h.size for _, h in seen) == seg.size
        by_position = {pos: h for pos, h in seen}
        for rel, pos in split_padding(read_offset_index(seg.offset_index.path))[0]:
            assert by_position[pos].last_offset == seg.base_offset + rel


def test_log_batches_in_small_chunks_and_from_a_position(written: Log) -> None:
    seg = written.segments[0]
    whole = [(h.base_offset, h.size) for _, _, h in iter_log_batches(seg.log_path)]
    # Chunks smaller than a batch: each batch is read whole all the same.
    assert [(h.base_offset, h.size) for _, _, h in iter_log_batches(seg.log_path, chunk_size=50)] == whole
    second = whole[0][1]
    assert [(h.base_offset, h.size) for _, _, h in iter_log_batches(seg.log_path, second)] == whole[1:]


def test_log_batches_stop_cleanly_at_a_torn_tail(written: Log, tmp_path: Path) -> None:
    seg = written.segments[0]
    whole = [h.base_offset for _, _, h in iter_log_batches(seg.log_path)]
    torn = tmp_path / "00000000000000000000.log"
    data = seg.log_path.read_bytes()
    for cut in (1, 11, 12, 61, 70):  # inside the framing, inside the header, inside the records
        torn.write_bytes(data[:-cut])
        assert [h.base_offset for _, _, h in iter_log_batches(torn)] == whole[:-1]
    torn.write_bytes(b"")
    assert list(iter_log_batches(torn)) == []


def test_torn_index_entries_are_left_out(written: Log, tmp_path: Path) -> None:
    close(written)
    seg = written.segments[0]
    entries = read_offset_index(seg.offset_index.path)
    assert entries
    torn = tmp_path / "x.index"
    torn.write_bytes(seg.offset_index.path.read_bytes() + b"\x00\x00\x00")
    assert read_offset_index(torn) == entries


def test_txn_index_reader_matches_storage(written: Log) -> None:
    with_txn = [seg for seg in written.segments if seg.txn_index.entries]
    assert with_txn, "the fixture aborts transactions"
    for seg in with_txn:
        got = read_txn_index(seg.txn_index.path)
        assert got == [AbortedTxnEntry(ABORTED_TXN_VERSION, *t) for t in seg.txn_index.entries]


def test_producer_snapshot_reader_matches_storage(written: Log) -> None:
    psm = written.producer_state
    offsets = list_snapshots(written.dir)
    assert offsets, "roll takes a snapshot"
    path = snapshot_path(written.dir, offsets[-1])
    entries = read_producer_snapshot(path)
    assert [e.producer_id for e in entries] == [7]
    (e,) = entries
    state = psm.producers[7]
    assert (e.producer_epoch, e.coordinator_epoch, e.last_sequence) == (state.producer_epoch, state.coordinator_epoch, state.last_seq)
    assert e.current_txn_first_offset == -1
    # The writer and the reader agree byte for byte.
    assert encode_producer_snapshot(entries) == path.read_bytes()
    assert psm.encode_snapshot() == path.read_bytes()


def test_producer_snapshot_errors_are_kafkas(written: Log) -> None:
    path = snapshot_path(written.dir, list_snapshots(written.dir)[-1])
    data = bytearray(path.read_bytes())
    with pytest.raises(ProducerSnapshotError, match=r"^Snapshot file s is too short \(5 bytes\)$"):
        decode_producer_snapshot(bytes(data[:5]), "s")
    bad_crc = bytearray(data)
    bad_crc[-1] ^= 1
    with pytest.raises(ProducerSnapshotError, match=r"^Snapshot is corrupt \(CRC is no longer valid\)\. Stored crc: \d+\. Computed crc: \d+$"):
        decode_producer_snapshot(bytes(bad_crc), "s")
    with pytest.raises(ProducerSnapshotError, match="unknown file version 2"):
        decode_producer_snapshot(b"\x00\x02" + bytes(data[2:]), "s")
    assert decode_producer_snapshot(encode_producer_snapshot([]), "s") == []
    body = PRODUCER_SNAPSHOT_COUNT.pack(1)  # one entry announced, none there
    lying = PRODUCER_SNAPSHOT_HEADER.pack(PRODUCER_SNAPSHOT_VERSION, crc32c.crc32c(body)) + body
    with pytest.raises(ProducerSnapshotError, match="^Snapshot s holds 0 bytes of entries for 1 entries$"):
        decode_producer_snapshot(lying, "s")


# ---- read-only --------------------------------------------------------------------------------


def _readers(d: Path) -> list[tuple[str, Any]]:
    log = d / "00000000000000000000.log"
    snap = sorted(d.glob("*.snapshot"))[-1]
    txn = sorted(d.glob("*.txnindex"))[0]
    return [
        ("offset index", lambda: read_offset_index(log.with_suffix(".index"))),
        ("time index", lambda: read_time_index(log.with_suffix(".timeindex"))),
        ("txn index", lambda: read_txn_index(txn)),
        ("snapshot", lambda: read_producer_snapshot(snap)),
        ("log", lambda: list(iter_log_batches(log))),
        ("file", lambda: formats.read_file(log)),
    ]


def _snapshot_dir(d: Path) -> dict[str, tuple[int, int, int]]:
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns, stat.S_IMODE(p.stat().st_mode)) for p in sorted(d.iterdir())}


def test_readers_work_on_read_only_files_and_directories(written: Log, tmp_path: Path) -> None:
    close(written)
    d = tmp_path / "ro" / "t-0"
    shutil.copytree(written.dir, d)
    expected = {name: read() for name, read in _readers(d)}
    for p in d.iterdir():
        p.chmod(0o444)
    d.chmod(0o555)
    try:
        before = _snapshot_dir(d)
        for name, read in _readers(d):
            assert read() == expected[name], name
        assert _snapshot_dir(d) == before  # nothing created, grown, truncated or touched
    finally:
        d.chmod(0o755)


_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_opens: list[tuple[str, str | None, int]] | None = None


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "open" and _opens is not None and isinstance(args[0], (str, bytes, os.PathLike)):
        path, mode, flags = args
        _opens.append((os.fsdecode(path), mode, flags))


sys.addaudithook(_audit)


@contextlib.contextmanager
def recorded_opens(under: Path) -> Iterator[list[tuple[str, str | None, int]]]:
    """Every open() of a file under ``under`` meanwhile (Python's audit hook: even as root,
    where permission bits prove nothing, a write-mode open shows here)."""
    global _opens
    _opens = []
    got: list[tuple[str, str | None, int]] = []
    try:
        yield got
    finally:
        got.extend(o for o in _opens if o[0].startswith(str(under)))
        _opens = None


def _writes(opens: list[tuple[str, str | None, int]]) -> list[tuple[str, str | None, int]]:
    return [o for o in opens if (o[1] is not None and any(c in o[1] for c in "wax+")) or (o[2] & _WRITE_FLAGS)]


def test_readers_and_tools_open_files_read_only(written: Log, tmp_path: Path) -> None:
    close(written)
    d = tmp_path / "data" / "t-0"
    shutil.copytree(written.dir, d)
    before = _snapshot_dir(d)
    with recorded_opens(tmp_path / "data") as opens:
        for _, read in _readers(d):
            read()
    assert opens and not _writes(opens)

    ns = argparse.Namespace(files=str(d), print_data_log=True, deep_iteration=True, verify_index_only=False,
                            index_sanity_check=False, max_message_size=5 << 20, max_bytes=dump_log.INT_MAX,
                            skip_record_metadata=False, verify=False)
    with recorded_opens(tmp_path / "data") as opens, contextlib.redirect_stdout(io.StringIO()):
        assert dump_log.main(ns, io.StringIO(), io.StringIO()) == 0
        ns.verify = True
        assert dump_log.main(ns, io.StringIO(), io.StringIO()) == 0
        assert verify.main([str(d), "--strict"]) == 0
        (pd,) = _logdir.discover(tmp_path / "data")
        for seg in _logdir.segments(pd):
            list(_logdir.read_segment(seg))
    assert len(opens) > 10 and not _writes(opens)
    assert _snapshot_dir(d) == before


def test_a_missing_file_is_file_not_found_and_is_not_created(tmp_path: Path) -> None:
    missing = tmp_path / "00000000000000000000"
    for suffix, read in [
        (".index", read_offset_index),
        (".timeindex", read_time_index),
        (".txnindex", read_txn_index),
        (".snapshot", read_producer_snapshot),
        (".log", lambda p: list(iter_log_batches(p))),
        (".log", formats.read_file),
    ]:
        with pytest.raises(FileNotFoundError):
            read(missing.with_suffix(suffix))
    assert list(tmp_path.iterdir()) == []
