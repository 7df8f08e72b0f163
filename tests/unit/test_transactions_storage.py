"""Transactions on the partition side (storage): Kafka's ProducerStateManager ongoing
transactions, last stable offset, EndTransactionMarker control batches, ``.txnindex``
(AbortedTxn, 34 bytes), snapshots with currentTxnFirstOffset, recovery, READ_COMMITTED
reads, retention and the cleaner's transaction rules. Real files in a temporary directory.
"""

from __future__ import annotations

import shutil
import struct
from pathlib import Path
from typing import Any

import pytest
from kafka_sidecar.protocol.record_batch import validate_batches
from kafka_sidecar.protocol.records import Record, RecordBatch, decode_batches, encode_batch
from kafka_sidecar.storage.cleaner import Cleaner, LogCleaner, SkimpyOffsetMap
from kafka_sidecar.storage.log import Log
from kafka_sidecar.storage.log_config import LogConfig
from kafka_sidecar.storage.producer_state import ProducerStateError
from kafka_sidecar.storage.txn_index import AbortedTxn
from kafka_sidecar.storage.verify import problems, verify_partition

T0 = 1_700_000_000_000
DAY = 86_400_000
ABORTED_TXN = struct.Struct(">hqqqq")
SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")


def make_log(root: Path, overrides: dict[str, Any] | None = None, **kw: Any) -> Log:
    return Log(root / "t-0", "t", 0, LogConfig(None, {"segment.index.bytes": 1 << 16, **(overrides or {})}), **kw)


class Producer:
    """A producer's batches with the right sequences."""

    def __init__(self, pid: int, epoch: int = 0) -> None:
        self.pid, self.epoch, self.seq = pid, epoch, 0

    def send(self, lg: Log, kvs: list[tuple[bytes | None, bytes | None]], *, transactional: bool = True) -> tuple[int, int]:
        first = lg.log_end_offset
        recs = [Record(i, T0 + first + i, k, v) for i, (k, v) in enumerate(kvs)]
        data = bytearray(encode_batch(recs, producer_id=self.pid, producer_epoch=self.epoch, base_sequence=self.seq, is_transactional=transactional))
        info = lg.append_as_leader(data, validate_batches(data), now_ms=T0 + first)
        self.seq += len(kvs)
        return info.first_offset, info.last_offset

    def end(self, lg: Log, commit: bool, coordinator_epoch: int = 0) -> int:
        return lg.append_transaction_marker(self.pid, self.epoch, coordinator_epoch, commit, now_ms=T0 + lg.log_end_offset)


def plain(lg: Log, kvs: list[tuple[bytes | None, bytes | None]]) -> int:
    first = lg.log_end_offset
    data = bytearray(encode_batch([Record(i, T0 + first + i, k, v) for i, (k, v) in enumerate(kvs)]))
    return lg.append_as_leader(data, validate_batches(data), now_ms=T0 + first).first_offset


def all_batches(lg: Log) -> list[RecordBatch]:
    out: list[RecordBatch] = []
    for seg in lg.segments:
        out += decode_batches(seg.read_batch_bytes(0, seg.size), verify_crc=True)
    return out


def assert_verified(lg: Log) -> None:
    """storage/verify.py finds nothing wrong (it checks each .txnindex entry names a marker)."""
    assert problems(verify_partition(lg.dir)) == []


def txnindex_bytes(lg: Log) -> dict[int, bytes]:
    return {seg.base_offset: seg.txn_index.path.read_bytes() for seg in lg.segments if seg.txn_index.path.exists()}


def committed_view(lg: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    """What a READ_COMMITTED consumer sees: read_committed from the log start, dropping records
    of aborted transactions (as Kafka's consumer does with the aborted list) and control batches."""
    out = []
    offset = lg.log_start_offset
    aborted: list[AbortedTxn] = []
    aborted_pids: set[int] = set()
    while True:
        lso, data, found = lg.read_committed(offset, 1 << 20, True)
        if data is None:
            break
        aborted = sorted(set(aborted) | set(found), key=lambda t: t.first_offset)
        for b in decode_batches(data.read()):
            for t in list(aborted):
                if t.first_offset <= b.last_offset:
                    aborted.remove(t)
                    aborted_pids.add(t.producer_id)
            if b.is_control:
                aborted_pids.discard(b.producer_id)
            elif not (b.is_transactional and b.producer_id in aborted_pids):
                out += [(r.offset, r.key, r.value) for r in b.records if r.offset >= offset]
            offset = b.last_offset + 1
    return out


# ----------------------------------------------------------------------------------- LSO, markers


def test_lso_follows_ongoing_transactions_and_markers_are_kafka_control_batches(tmp_path):
    lg = make_log(tmp_path)
    a, b = Producer(1), Producer(2)
    assert plain(lg, [(b"k", b"0")]) == 0
    assert lg.last_stable_offset == 1
    assert a.send(lg, [(b"a", b"1"), (b"a", b"2")]) == (1, 2)
    assert lg.has_ongoing_transaction(1) and not lg.has_ongoing_transaction(2)
    assert lg.last_stable_offset == 1
    assert b.send(lg, [(b"b", b"3")]) == (3, 3)
    a.send(lg, [(b"a", b"4")])  # continues a's transaction: its first offset stays 1
    assert lg.last_stable_offset == 1 and lg.high_watermark == 5
    assert a.end(lg, commit=True, coordinator_epoch=7) == 5
    assert not lg.has_ongoing_transaction(1)
    assert lg.last_stable_offset == 3  # b's transaction is still open
    assert txnindex_bytes(lg) == {}  # a commit adds no index entry; the file is created lazily
    assert b.end(lg, commit=False, coordinator_epoch=7) == 6
    assert lg.last_stable_offset == lg.log_end_offset == 7

    marker = all_batches(lg)[-1]
    assert marker.attributes & 0x30 == 0x30  # transactional + control
    assert (marker.producer_id, marker.producer_epoch, marker.base_sequence, marker.base_offset) == (2, 0, -1, 6)
    assert marker.partition_leader_epoch == 0 and marker.record_count == 1
    r = marker.records[0]
    assert r.key == struct.pack(">hh", 0, 0) and r.value == struct.pack(">hi", 0, 7)  # ABORT, coordinator epoch 7
    assert all_batches(lg)[-2].records[0].key == struct.pack(">hh", 0, 1)  # COMMIT
    # The abort's AbortedTxn: version 0, producer 2, first 3, last (marker) 6, LSO after it 7.
    assert txnindex_bytes(lg) == {0: ABORTED_TXN.pack(0, 2, 3, 6, 7)}
    assert len(txnindex_bytes(lg)[0]) == 34
    assert_verified(lg)


def test_aborted_entry_lso_is_the_next_ongoing_transaction(tmp_path):
    lg = make_log(tmp_path)
    a, b = Producer(10), Producer(11)
    a.send(lg, [(b"x", b"1")])  # 0
    b.send(lg, [(b"y", b"2")])  # 1
    assert a.end(lg, commit=False) == 2
    assert lg.last_stable_offset == 1
    assert txnindex_bytes(lg) == {0: ABORTED_TXN.pack(0, 10, 0, 2, 1)}
    b.end(lg, commit=False)
    assert txnindex_bytes(lg)[0][34:] == ABORTED_TXN.pack(0, 11, 1, 3, 4)


def test_marker_epoch_checks_and_marker_without_transaction(tmp_path):
    lg = make_log(tmp_path)
    p = Producer(5, epoch=3)
    p.send(lg, [(b"k", b"v")])
    end = lg.log_end_offset
    with pytest.raises(ProducerStateError) as e:
        lg.append_transaction_marker(5, 2, 0, True, now_ms=T0)
    assert e.value.error_code == 47  # INVALID_PRODUCER_EPOCH
    lg.append_transaction_marker(5, 3, 4, True, now_ms=T0)
    with pytest.raises(ProducerStateError) as e:
        lg.append_transaction_marker(5, 3, 3, False, now_ms=T0)
    assert e.value.error_code == 52  # TRANSACTION_COORDINATOR_FENCED
    assert lg.log_end_offset == end + 1
    # No ongoing transaction (or an unknown producer): the marker is written, no index entry.
    assert lg.append_transaction_marker(5, 3, 4, False, now_ms=T0) == end + 1
    assert lg.append_transaction_marker(99, 0, 0, False, now_ms=T0) == end + 2
    assert txnindex_bytes(lg) == {}
    assert lg.last_stable_offset == lg.log_end_offset
    # A higher epoch (the coordinator aborting after an epoch bump) is accepted.
    q = Producer(6, epoch=0)
    q.send(lg, [(b"k", b"v")])
    first = lg.log_end_offset - 1
    assert lg.append_transaction_marker(6, 1, 0, False, now_ms=T0) == first + 1
    assert txnindex_bytes(lg) == {0: ABORTED_TXN.pack(0, 6, first, first + 1, first + 2)}


def test_non_transactional_write_during_a_transaction_is_invalid_txn_state(tmp_path):
    lg = make_log(tmp_path)
    p = Producer(7)
    p.send(lg, [(b"k", b"v")])
    with pytest.raises(ProducerStateError) as e:
        p.send(lg, [(b"k", b"w")], transactional=False)
    assert e.value.error_code == 48


# ----------------------------------------------------------------------------------- read_committed


def test_read_committed_stops_at_the_lso_and_lists_aborted_transactions(tmp_path):
    lg = make_log(tmp_path)
    a, b = Producer(1), Producer(2)
    plain(lg, [(b"k", b"0")])                 # 0
    a.send(lg, [(b"a", b"1")])                # 1
    a.end(lg, commit=False)                   # 2
    plain(lg, [(b"k", b"3")])                 # 3
    b.send(lg, [(b"b", b"4")])                # 4 (open)
    plain(lg, [(b"k", b"5")])                 # 5
    lso, data, aborted = lg.read_committed(0, 1 << 20, True)
    assert lso == 4
    offsets = [bt.base_offset for bt in decode_batches(data.read())]
    assert offsets == [0, 1, 2, 3]
    assert aborted == [AbortedTxn(1, 1, 2, 3)]
    assert lg.read_committed(4, 1 << 20, True)[1] is None  # at the LSO: nothing
    assert lg.read_committed(3, 1 << 20, True)[2] == []  # the abort ends before offset 3
    # read_uncommitted is unchanged
    assert [bt.base_offset for bt in decode_batches(lg.read(0, 1 << 20, True).read())] == [0, 1, 2, 3, 4, 5]
    b.end(lg, commit=True)
    assert committed_view(lg) == [(0, b"k", b"0"), (3, b"k", b"3"), (4, b"b", b"4"), (5, b"k", b"5")]


def test_read_committed_across_segments(tmp_path):
    lg = make_log(tmp_path)
    a = Producer(1)
    a.send(lg, [(b"a", b"1")])  # 0
    lg.roll()
    a.send(lg, [(b"a", b"2")])  # 1
    a.end(lg, commit=False)     # 2, entry in segment 1's index
    plain(lg, [(b"k", b"3")])   # 3
    lso, data, aborted = lg.read_committed(0, 1 << 20, True)
    assert lso == 4 and [bt.base_offset for bt in decode_batches(data.read())] == [0]
    assert aborted == [AbortedTxn(1, 0, 2, 3)]  # found in the next segment's index
    assert sorted(txnindex_bytes(lg)) == [1]
    assert committed_view(lg) == [(3, b"k", b"3")]


# ----------------------------------------------------------------------------------- snapshots, recovery


def test_snapshot_round_trip_with_an_ongoing_transaction(tmp_path):
    lg = make_log(tmp_path)
    a, b = Producer(1, epoch=2), Producer(2)
    plain(lg, [(b"k", b"0")])
    a.send(lg, [(b"a", b"1"), (b"a", b"2")])  # 1-2, open
    b.send(lg, [(b"b", b"3")])
    b.end(lg, commit=False, coordinator_epoch=4)  # 4
    lg.close()
    snap = (tmp_path / "t-0" / f"{5:020d}.snapshot").read_bytes()
    entries = {e[0]: e for e in SNAPSHOT_ENTRY.iter_unpack(snap[10:])}
    assert entries[1][-1] == 1 and entries[1][1] == 2  # currentTxnFirstOffset of the open transaction
    assert entries[2][-1] == -1 and entries[2][-2] == 4  # ended; coordinator epoch kept
    lg2 = make_log(tmp_path)
    assert lg2.has_ongoing_transaction(1) and not lg2.has_ongoing_transaction(2)
    assert lg2.last_stable_offset == 1
    assert lg2.producer_state.producers[2].coordinator_epoch == 4
    assert lg2.append_transaction_marker(1, 2, 4, commit=True, now_ms=T0) == 5
    assert lg2.last_stable_offset == 6
    lg2.close()


def _crash_copy(src: Path, dst: Path, drop: tuple[str, ...] = ()) -> Path:
    """Copy a partition dir as a crash would leave it (no clean close), minus some files."""
    shutil.copytree(src, dst)
    for p in list(dst.iterdir()):
        if p.name.endswith(drop) and drop:
            p.unlink()
    return dst


@pytest.mark.parametrize("drop", [(), (".snapshot",), (".snapshot", ".txnindex")])
def test_recovery_after_a_crash_mid_transaction(tmp_path, drop):
    lg = make_log(tmp_path / "a")
    a, b, c = Producer(1), Producer(2), Producer(3)
    plain(lg, [(b"k", b"0")])       # 0
    a.send(lg, [(b"a", b"1")])      # 1
    a.end(lg, commit=False)         # 2 -> entry in segment 0
    lg.roll()
    c.send(lg, [(b"c", b"3")])      # 3 open (c)
    b.send(lg, [(b"b", b"4")])      # 4
    b.end(lg, commit=False)         # 5 -> entry in segment 3, LSO 3 (c still open)
    plain(lg, [(b"k", b"6")])       # 6
    c.send(lg, [(b"c", b"7")])      # 7 (c continues)
    expected_index = txnindex_bytes(lg)
    assert expected_index == {0: ABORTED_TXN.pack(0, 1, 1, 2, 3), 3: ABORTED_TXN.pack(0, 2, 4, 5, 3)}
    expected_read = lg.read_committed(0, 1 << 20, True)[2]
    for seg in lg.segments:
        seg.flush()
    d = _crash_copy(tmp_path / "a" / "t-0", tmp_path / "b" / "t-0", drop)
    rec = Log(d, "t", 0, lg.config, recovery_point=0, clean_shutdown=False)
    assert rec.log_end_offset == 8
    assert rec.has_ongoing_transaction(3) and not rec.has_ongoing_transaction(2)
    assert rec.last_stable_offset == 3
    assert txnindex_bytes(rec) == expected_index
    assert_verified(rec)
    assert rec.read_committed(0, 1 << 20, True)[2] == expected_read == [AbortedTxn(1, 1, 2, 3)]
    assert rec.append_transaction_marker(3, 0, 0, commit=True, now_ms=T0) == 8
    assert rec.last_stable_offset == 9
    rec.close()
    lg.close()


def test_recovery_truncates_a_torn_marker_and_its_index_entry(tmp_path):
    lg = make_log(tmp_path)
    a = Producer(1)
    a.send(lg, [(b"a", b"1")])  # 0
    a.end(lg, commit=False)     # 1
    seg = lg.active_segment
    size_before_marker = seg.size - all_batches(lg)[-1].size
    lg.close(trim=False)
    # Tear the marker: the log loses it, so the transaction is open again and the entry must go.
    with open(seg.log_path, "r+b") as f:
        f.truncate(size_before_marker + 10)
    rec = make_log(tmp_path, recovery_point=0, clean_shutdown=False)
    assert rec.log_end_offset == 1
    assert rec.has_ongoing_transaction(1) and rec.last_stable_offset == 0
    assert rec.active_segment.txn_index.entries == []
    assert rec.active_segment.txn_index.path.read_bytes() == b""
    rec.close()


# ----------------------------------------------------------------------------------- retention


def test_retention_deletes_the_txnindex_with_its_segment(tmp_path):
    lg = make_log(tmp_path)
    a = Producer(1)
    a.send(lg, [(b"a", b"1")])
    a.end(lg, commit=False)
    lg.roll()
    plain(lg, [(b"k", b"2")])
    old = lg.segments[0]
    assert old.txn_index.path.exists()
    lg.maybe_increment_log_start_offset(2)
    removed = lg.delete_old_segments(T0 + 10)
    assert removed == [old]
    d = tmp_path / "t-0"
    assert (d / f"{0:020d}.txnindex.deleted").exists() and not (d / f"{0:020d}.txnindex").exists()
    for seg in removed:
        seg.close()
        for p in seg.paths():
            p.unlink(missing_ok=True)
    assert not any(p.name.startswith(f"{0:020d}") for p in d.iterdir())
    lg.close()


# ----------------------------------------------------------------------------------- cleaner


def _clean(lg: Log, now: int) -> None:
    lc = LogCleaner(lg.dir.parent, lambda: [lg], enabled=False)
    lc.clean_one(Cleaner(SkimpyOffsetMap(lc.map_memory, lc.load_factor), lc.manager.check_aborted, now=lambda: now), now_ms=now)
    for seg in lg.take_retired_segments():
        seg.close()
        for p in seg.paths():
            p.unlink(missing_ok=True)


def test_cleaner_drops_aborted_records_and_keeps_committed_ones(tmp_path):
    lg = make_log(tmp_path, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": 0.01, "delete.retention.ms": DAY})
    a, b = Producer(1), Producer(2)
    a.send(lg, [(b"k", b"committed")])  # 0
    a.end(lg, commit=True)              # 1
    b.send(lg, [(b"k", b"aborted")])    # 2: a later value of k, but aborted
    b.end(lg, commit=False)             # 3
    plain(lg, [(b"j", b"x")])           # 4
    lg.roll()
    plain(lg, [(b"z", b"active")])      # 5
    before = committed_view(lg)
    assert before == [(0, b"k", b"committed"), (4, b"j", b"x"), (5, b"z", b"active")]
    now = T0 + DAY
    _clean(lg, now)
    assert committed_view(lg) == before
    batches = all_batches(lg)
    data_values = [r.value for bt in batches if not bt.is_control for r in bt.records]
    assert b"aborted" not in data_values and b"committed" in data_values
    # The abort marker stays while the aborted batch (kept empty: b's last batch) is in the log;
    # the cleaned segment's index holds its entry.
    assert [AbortedTxn(2, 2, 3, 4)] == lg.segments[0].txn_index.entries
    assert lg.segments[0].txn_index.path.read_bytes() == ABORTED_TXN.pack(0, 2, 2, 3, 4)
    # Later rounds, past the delete horizons: committed data still there, aborted never back.
    for i in range(1, 4):
        _clean(lg, now + i * 2 * DAY)
        assert committed_view(lg) == before
        assert_verified(lg)
    # A restart (clean) still agrees.
    lg.close()
    lg2 = make_log(tmp_path, {"cleanup.policy": "compact"})
    assert committed_view(lg2) == before
    lg2.close()


def test_cleaner_does_not_clean_past_the_lso(tmp_path):
    lg = make_log(tmp_path, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": 0.01})
    a = Producer(1)
    plain(lg, [(b"k", b"1")])           # 0
    a.send(lg, [(b"k", b"open")])       # 1 open
    plain(lg, [(b"k", b"2")])           # 2
    lg.roll()
    plain(lg, [(b"z", b"3")])           # 3
    assert lg.last_stable_offset == 1
    _clean(lg, T0 + DAY)
    # Only [0, 1) was cleanable: nothing removed (k@0 is superseded only past the LSO).
    assert [r.offset for bt in all_batches(lg) for r in bt.records] == [0, 1, 2, 3]
    lg.close()


def test_cleaner_marker_lifecycle_delete_horizon_then_removed(tmp_path):
    """Kafka's CleanedTransactionMetadata: an ABORT marker stays (with its index entry) while its
    transaction's data is in the log; once the data is gone it gets a delete horizon (0x40) and
    the index entry goes; after the horizon the marker goes too. Commit markers with data stay."""
    lg = make_log(tmp_path, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": 0.01, "delete.retention.ms": DAY})
    a, b = Producer(1), Producer(2)
    a.send(lg, [(b"k", b"committed")])  # 0
    a.end(lg, commit=True)              # 1
    b.send(lg, [(b"k", b"aborted")])    # 2
    b.end(lg, commit=False)             # 3
    b.send(lg, [(b"m", b"b2")])         # 4 (b's last data batch: the aborted one is not kept empty)
    b.end(lg, commit=True)              # 5
    lg.roll()
    plain(lg, [(b"z", b"active")])      # 6

    def batch_at(offset: int) -> RecordBatch | None:
        return next((bt for bt in all_batches(lg) if bt.base_offset == offset), None)

    def dirty_more() -> None:
        plain(lg, [(b"j", b"x")])
        lg.roll()
        plain(lg, [(b"z", b"active")])

    expected = [(0, b"k", b"committed"), (4, b"m", b"b2")]
    now = T0 + DAY
    _clean(lg, now)  # aborted data removed in this round: marker and entry kept
    assert batch_at(2) is None and batch_at(3) is not None and batch_at(3).delete_horizon_ms is None
    assert lg.segments[0].txn_index.entries == [AbortedTxn(2, 2, 3, 4)]
    assert committed_view(lg)[:2] == expected
    dirty_more()
    _clean(lg, now + DAY)  # no data left: the marker gets its delete horizon, the entry goes
    marker = batch_at(3)
    assert marker is not None and marker.attributes & 0x70 == 0x70 and marker.delete_horizon_ms == now + 2 * DAY
    assert marker.records[0].key == struct.pack(">hh", 0, 0)
    assert all(seg.txn_index.entries == [] for seg in lg.segments)
    assert lg.latest_delete_horizon == now + 2 * DAY
    dirty_more()
    _clean(lg, now + 3 * DAY)  # past the horizon: the marker is removed
    assert batch_at(3) is None
    assert batch_at(1) is not None and batch_at(5) is not None  # commit markers of kept data
    assert_verified(lg)
    assert committed_view(lg)[:2] == expected
    lg.close()


def test_verify_reports_a_txnindex_entry_without_its_marker(tmp_path):
    lg = make_log(tmp_path)
    a = Producer(1)
    a.send(lg, [(b"a", b"1")])
    a.end(lg, commit=False)
    lg.close()
    path = tmp_path / "t-0" / f"{0:020d}.txnindex"
    path.write_bytes(path.read_bytes() + ABORTED_TXN.pack(0, 1, 0, 7, 8))
    found = problems(verify_partition(tmp_path / "t-0"))
    assert len(found) == 1 and "not a control batch" in found[0]


def test_a_torn_txnindex_is_rebuilt_at_load(tmp_path):
    lg = make_log(tmp_path)
    a, b = Producer(1), Producer(2)
    a.send(lg, [(b"a", b"1")])
    a.end(lg, commit=False)
    lg.roll()
    b.send(lg, [(b"b", b"2")])
    b.end(lg, commit=False)
    plain(lg, [(b"k", b"x")])
    expected = txnindex_bytes(lg)
    lg.close()
    path = tmp_path / "t-0" / f"{0:020d}.txnindex"
    path.write_bytes(path.read_bytes()[:20])
    lg2 = make_log(tmp_path)  # clean shutdown, but the index fails its check: rebuilt from the log
    assert txnindex_bytes(lg2) == expected
    assert lg2.read_committed(0, 1 << 20, True)[2] == [AbortedTxn(1, 0, 1, 2)]
    lg2.close()


def test_a_crash_at_any_rename_of_a_cleaning_keeps_txnindex_consistent(tmp_path, monkeypatch):
    """Copies the partition dir before every rename of a cleaning (what a crash leaves) and
    reopens each copy: the READ_COMMITTED view and the .txnindex files stay consistent."""
    import os

    lg = make_log(tmp_path / "live", {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": 0.01,
                                      "segment.bytes": 1 << 20})
    n = 0
    for _seg in range(3):
        for i in range(3):
            p = Producer(100 + n)
            p.send(lg, [(b"t%d" % n, b"v%d" % n)])
            p.end(lg, commit=i != 1)  # one aborted transaction per segment
            plain(lg, [(b"p%d" % n, b"w%d" % n)])
            n += 1
        lg.roll()
    plain(lg, [(b"z", b"active")])
    before = committed_view(lg)
    states: list[Path] = []
    real_rename = os.rename

    def crashing_rename(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        if Path(src).parent == lg.dir:
            d = tmp_path / "states" / f"{len(states):02d}" / lg.dir.name
            shutil.copytree(lg.dir, d)
            states.append(d)
        real_rename(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "rename", crashing_rename)
    _clean(lg, T0 + DAY)
    monkeypatch.undo()
    assert len(states) >= 4
    assert committed_view(lg) == before
    assert not any(b"v" in (r.value or b"") and bt.is_transactional and bt.producer_id in (101, 104, 107)
                   for bt in all_batches(lg) for r in bt.records)
    assert_verified(lg)
    for d in [*states, lg.dir]:
        rec = Log(d, "t", 0, lg.config, recovery_point=lg.log_end_offset, clean_shutdown=False)
        assert committed_view(rec) == before, d
        assert_verified(rec)
        assert sum(len(s.txn_index.entries) for s in rec.segments) == 3, (d, sorted(x.name for x in d.iterdir()))
        rec.close()
    lg.close()
