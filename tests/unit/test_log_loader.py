"""LogLoader (storage/log_loader.py) and LocalLog (storage/local_log.py) on their own: the
pieces a Log is built from (Kafka's LogLoader / LocalLog / UnifiedLog split). Real files in a
temporary directory, written by a real Log; the loader and the segment list are driven
directly, without a Log around them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka_sidecar.protocol.record_batch import validate_batches
from kafka_sidecar.protocol.records import Record, encode_batch
from kafka_sidecar.storage.local_log import LocalLog, open_segment
from kafka_sidecar.storage.log import Log
from kafka_sidecar.storage.log_config import LogConfig
from kafka_sidecar.storage.log_loader import LoadedLogOffsets, LogLoader, read_marker
from kafka_sidecar.storage.log_segment import StorageError
from kafka_sidecar.storage.producer_state import ProducerStateManager

T0 = 1_700_000_000_000
CONFIG = LogConfig(None, {"segment.index.bytes": 1 << 16, "segment.bytes": 400})


def append(lg: Log, n: int, *, pid: int = -1, seq: int = 0, transactional: bool = False) -> None:
    first = lg.log_end_offset
    recs = [Record(i, T0 + first + i, b"k%d" % (first + i), b"v" * 20) for i in range(n)]
    kw = {"producer_id": pid, "producer_epoch": 0, "base_sequence": seq, "is_transactional": transactional} if pid >= 0 else {}
    data = bytearray(encode_batch(recs, **kw))
    lg.append_as_leader(data, validate_batches(data), now_ms=T0 + first)


def written_log(root: Path) -> Path:
    """A closed log with several segments, an aborted transaction and one still open."""
    lg = Log(root / "t-0", "t", 0, CONFIG)
    for _ in range(6):
        append(lg, 3)
    append(lg, 2, pid=7, transactional=True)
    lg.append_transaction_marker(7, 0, 0, False, now_ms=T0)
    append(lg, 2, pid=9, transactional=True)  # ongoing at close
    lg.close()
    return lg.dir


def load(dir: Path, **kw) -> tuple[LoadedLogOffsets, LocalLog, ProducerStateManager]:
    segments = LocalLog(dir, "t", 0)
    psm = ProducerStateManager(dir, "t-0")
    args = {"recovery_point": 0, "log_start_offset": None, "clean_shutdown": True, **kw}
    offsets = LogLoader(dir, "t", 0, CONFIG, segments, psm, **args).load()
    return offsets, segments, psm


def test_an_empty_directory_loads_as_one_empty_segment(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    d.mkdir()
    offsets, segments, psm = load(d)
    assert offsets == LoadedLogOffsets(0, 0, 0)
    assert [s.base_offset for s in segments.segments] == [0]
    assert segments.active_segment.active and psm.first_unstable_offset() is None


def test_offsets_are_clamped_to_the_loaded_log(tmp_path: Path) -> None:
    d = written_log(tmp_path)
    end = Log(d, "t", 0, CONFIG).log_end_offset
    offsets, segments, _ = load(d, recovery_point=10_000, log_start_offset=5)
    assert offsets == LoadedLogOffsets(5, end, end)
    assert len(segments.segments) > 2 and segments.segments[0].base_offset == 0
    # A checkpointed start above the log end (the files went away) is capped at the end.
    offsets, _, _ = load(d, log_start_offset=10_000)
    assert offsets.log_start_offset == end


def test_producer_state_is_rebuilt_in_place(tmp_path: Path) -> None:
    d = written_log(tmp_path)
    for snap in d.glob("*.snapshot"):
        snap.unlink()  # nothing to start from: the whole log is replayed
    _, _, psm = load(d)
    ref = Log(d, "t", 0, CONFIG)
    assert psm.first_unstable_offset() == ref.producer_state.first_unstable_offset() is not None
    assert psm.has_ongoing_txn(9) and not psm.has_ongoing_txn(7)


def test_unclean_load_truncates_a_torn_tail_and_rebuilds_the_txn_index(tmp_path: Path) -> None:
    d = written_log(tmp_path)
    txn = {p.name: p.read_bytes() for p in d.glob("*.txnindex")}
    assert txn, "the abort wrote an index entry"
    for p in d.glob("*.txnindex"):
        p.unlink()
    active = sorted(d.glob("*.log"))[-1]
    good = active.stat().st_size
    with active.open("ab") as f:
        f.write(b"\x00\x01torn")
    offsets, segments, _ = load(d, clean_shutdown=False)
    assert active.stat().st_size == good
    assert offsets.log_end_offset == segments.active_segment.read_next_offset()
    for seg in segments.segments:
        seg.close()
    assert {p.name: p.read_bytes() for p in d.glob("*.txnindex")} == txn


def test_leftovers_of_unfinished_work_are_removed(tmp_path: Path) -> None:
    d = written_log(tmp_path)
    left = [d / "00000000000000000003.log.deleted", d / "00000000000000000003.log.cleaned", d / "x.tmp", d / "00000000000000099999.index"]
    for p in left:
        p.write_bytes(b"junk")
    load(d)
    assert not any(p.exists() for p in left)


def test_read_marker_reads_what_the_log_writes(tmp_path: Path) -> None:
    lg = Log(tmp_path / "t-0", "t", 0, CONFIG)
    append(lg, 1, pid=5, transactional=True)
    commit_at = lg.append_transaction_marker(5, 0, 3, True, now_ms=T0)
    append(lg, 1, pid=6, transactional=True)
    abort_at = lg.append_transaction_marker(6, 0, 4, False, now_ms=T0)
    markers = {h.base_offset: read_marker(seg, p, h) for seg in lg.segments for p, h in seg.iter_batches(0) if h.is_control}
    assert markers == {commit_at: (True, 3), abort_at: (False, 4)}
    lg.close()


def test_local_log_keeps_a_copy_on_write_list(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    d.mkdir()
    local = LocalLog(d, "t", 0)
    local.add_segment(open_segment(d, 0, CONFIG, active=True))
    before = local.segments
    local.roll(10, CONFIG)
    local.roll(20, CONFIG)
    assert before == local.segments[:1] and len(before) == 1  # a reader's snapshot never changes
    assert [s.base_offset for s in local.segments] == [0, 10, 20]
    assert local.segment_for(15).base_offset == 10 and local.segment_for(-1).base_offset == 0
    assert local.segment_index(25) == 2
    doomed = local.remove_oldest(2)
    assert [s.base_offset for s in doomed] == [0, 10] and all(s.deleted for s in doomed)
    assert sorted(p.name for p in d.glob("*.log.deleted")) == ["00000000000000000000.log.deleted", "00000000000000000010.log.deleted"]
    assert [s.base_offset for s in local.segments] == [20]
    with pytest.raises(ValueError):
        local.replace_segments(local.active_segment, doomed)  # no longer in the log: nothing changes
    assert [s.base_offset for s in local.segments] == [20]
    local.delete_all()
    assert not d.exists()


def test_a_failed_roll_leaves_the_old_segment_active(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    d.mkdir()
    local = LocalLog(d, "t", 0)
    local.add_segment(open_segment(d, 0, CONFIG, active=True))
    local.active_segment.active = False  # as on_become_inactive leaves it before the roll
    (d / f"{5:020d}.index").mkdir()  # the new segment's index cannot be opened
    with pytest.raises(StorageError):
        local.roll(5, CONFIG)
    assert [s.base_offset for s in local.segments] == [0] and local.active_segment.active
    assert not (d / f"{5:020d}.log").exists()
