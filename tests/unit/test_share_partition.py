"""The share-partition state machine (server/share/partition.py), the simple assignor and share
sessions, without a broker: acquire, acknowledge types, lock expiry, delivery count limit."""

from __future__ import annotations

import uuid

import pytest
from kafka_sidecar.server.share.group import ShareGroup, ShareGroupMember, simple_assign
from kafka_sidecar.server.share.partition import (
    INVALID_RECORD_STATE,
    AcknowledgeType,
    AcquiredRecords,
    RecordState,
    SharePartition,
)
from kafka_sidecar.server.share.session import (
    INVALID_SHARE_SESSION_EPOCH,
    SHARE_SESSION_LIMIT_REACHED,
    SHARE_SESSION_NOT_FOUND,
    ShareSessionCache,
    ShareSessionError,
)

ACCEPT, RELEASE, REJECT, RENEW, GAP = (int(t) for t in (AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE,
                                                         AcknowledgeType.REJECT, AcknowledgeType.RENEW, AcknowledgeType.GAP))


def _sp(start: int = 0, **kw: int) -> SharePartition:
    return SharePartition(start, lock_duration_ms=kw.pop("lock", 1000), delivery_count_limit=kw.pop("limit", 3), **kw)


def test_acquire_is_batch_aligned_and_skips_acquired_records() -> None:
    sp = _sp()
    assert sp.acquire("a", [(0, 4), (5, 9)], max_records=3, now_ms=0) == [AcquiredRecords(0, 4, 1)]
    # b reads from the same offset: only the records a does not hold are acquired.
    assert sp.next_fetch_offset() == 5
    assert sp.acquire("b", [(0, 4), (5, 9)], max_records=100, now_ms=0) == [AcquiredRecords(5, 9, 1)]
    assert sp.acquire("c", [(5, 9)], max_records=100, now_ms=0) == []


def test_record_limit_mode_is_a_hard_limit() -> None:
    sp = _sp()
    assert sp.acquire("a", [(0, 9)], max_records=3, now_ms=0, record_limit=True) == [AcquiredRecords(0, 2, 1)]
    assert sp.next_fetch_offset() == 3


def test_start_offset_below_the_fetched_batch() -> None:
    sp = _sp(start=7)
    assert sp.acquire("a", [(5, 9)], max_records=10, now_ms=0) == [AcquiredRecords(7, 9, 1)]


def test_accept_advances_start_offset_and_release_redelivers() -> None:
    sp = _sp()
    sp.acquire("a", [(0, 4)], 10, 0)
    assert sp.acknowledge("a", 0, 1, [ACCEPT], 0) == 0
    assert sp.start_offset == 2
    # Per-offset types: 2 released, 3 rejected, 4 accepted.
    assert sp.acknowledge("a", 2, 4, [RELEASE, REJECT, ACCEPT], 0) == 0
    assert (sp.state_of(2), sp.state_of(3), sp.state_of(4)) == (RecordState.AVAILABLE, RecordState.ARCHIVED, RecordState.ACKNOWLEDGED)
    assert sp.start_offset == 2 and sp.next_fetch_offset() == 2
    assert sp.acquire("b", [(0, 4)], 10, 0) == [AcquiredRecords(2, 2, 2)]
    assert sp.acknowledge("b", 2, 2, [ACCEPT], 0) == 0
    assert sp.start_offset == 5 and sp.batches == []


def test_acknowledge_checks_owner_and_state_atomically() -> None:
    sp = _sp()
    sp.acquire("a", [(0, 4)], 10, 0)
    assert sp.acknowledge("b", 0, 4, [ACCEPT], 0) == INVALID_RECORD_STATE
    assert sp.acknowledge("a", 3, 6, [ACCEPT], 0) == INVALID_RECORD_STATE  # 5, 6 were never acquired
    assert all(sp.state_of(o) == RecordState.ACQUIRED for o in range(5))
    assert sp.acknowledge("a", 0, 1, [ACCEPT, ACCEPT, ACCEPT], 0) != 0  # one type per offset or one for all


def test_lock_expiry_and_renew() -> None:
    sp = _sp(lock=1000)
    sp.acquire("a", [(0, 1)], 10, now_ms=0)
    assert sp.acknowledge("a", 1, 1, [RENEW], now_ms=900) == 0
    assert sp.expire_locks(now_ms=1000) == 1  # offset 0's lock ran out, 1 was renewed until 1900
    assert (sp.state_of(0), sp.state_of(1)) == (RecordState.AVAILABLE, RecordState.ACQUIRED)
    assert sp.acknowledge("a", 0, 0, [ACCEPT], 1000) == INVALID_RECORD_STATE
    assert sp.acquire("b", [(0, 1)], 10, now_ms=1000) == [AcquiredRecords(0, 0, 2)]


def test_delivery_count_limit_archives() -> None:
    sp = _sp(limit=3)
    for delivery in range(1, 4):
        assert sp.acquire("a", [(0, 0)], 10, now_ms=delivery * 10_000) == [AcquiredRecords(0, 0, delivery)]
        sp.expire_locks(now_ms=delivery * 10_000 + 1000)
    # Three deliveries: archived, never handed out again, and the start offset moves past it.
    assert sp.state_of(0) == RecordState.ACKNOWLEDGED and sp.start_offset == 1
    assert sp.acquire("a", [(0, 0)], 10, now_ms=50_000) == []


def test_release_member_and_in_flight_limit() -> None:
    sp = _sp(max_in_flight_records=4)
    assert sp.acquire("a", [(0, 9)], 100, 0) == [AcquiredRecords(0, 3, 1)]
    assert not sp.can_acquire()
    assert sp.release_member("a") == 4 and sp.can_acquire()
    assert sp.acquire("b", [(0, 9)], 100, 0) == [AcquiredRecords(0, 3, 2)]


def test_gap_acknowledgement_archives() -> None:
    sp = _sp()
    sp.acquire("a", [(0, 2)], 10, 0)
    assert sp.acknowledge("a", 0, 2, [GAP, ACCEPT, ACCEPT], 0) == 0
    assert sp.start_offset == 3


def _state(sp: SharePartition) -> tuple:
    return (sp.start_offset, sp.next_fetch_offset_new, sp.write_start_offset, sp.lock_floor_ms, sp.archived_since_write,
            [(b.first_offset, b.last_offset, b.state, b.delivery_count, b.member_id, b.lock_deadline_ms) for b in sp.batches],
            [(b.first_offset, b.last_offset, b.state) for b in sp.done_since_write], list(sp._pending_archive))


def test_rollback_restores_the_in_flight_state_of_the_checkpoint() -> None:
    """What a failed state write undoes (the coordinator checkpoints before acquire, acknowledge, release)."""
    sp = _sp()
    sp.acquire("a", [(0, 9)], 100, 0)
    assert sp.acknowledge("a", 0, 1, [ACCEPT], 0) == 0
    before = _state(sp)
    checkpoint = sp.checkpoint()
    assert sp.acknowledge("a", 2, 6, [ACCEPT, REJECT, RELEASE, ACCEPT, RENEW], 500) == 0
    sp.archive([(12, 13)])
    assert sp.acquire("b", [(0, 14)], 100, 600) == [AcquiredRecords(4, 4, 2), AcquiredRecords(10, 11, 1), AcquiredRecords(14, 14, 1)]
    assert sp.release_member("a") == 4
    assert _state(sp) != before
    sp.rollback(checkpoint)
    assert _state(sp) == before
    # and it works on from there as if nothing happened
    assert sp.acknowledge("a", 2, 9, [ACCEPT], 700) == 0 and sp.start_offset == 10 and sp.batches == []


def test_simple_assignor_spreads_and_shares() -> None:
    t = uuid.uuid4()
    assert simple_assign(["a", "b"], [(t, 0), (t, 1), (t, 2)]) == {"a": {t: [0, 2]}, "b": {t: [1]}}
    assert simple_assign(["a", "b", "c"], [(t, 0)]) == {"a": {t: [0]}, "b": {t: [0]}, "c": {t: [0]}}


def test_group_epochs_move_at_each_members_heartbeat() -> None:
    t = uuid.uuid4()
    g = ShareGroup("g")
    g.members["a"] = ShareGroupMember("a", 0, "c", "/h", None, ["t"], 0)
    g.compute_assignment({"t": (t, 2)})
    assert g.reconcile(g.members["a"]) and g.members["a"].assignment == {t: [0, 1]}
    g.members["b"] = ShareGroupMember("b", 0, "c", "/h", None, ["t"], 0)
    g.compute_assignment({"t": (t, 2)})
    # a keeps epoch 1 and its old partitions until it heartbeats.
    assert g.members["a"].member_epoch == 1 and g.assignment_epoch == 2
    assert g.reconcile(g.members["a"]) and g.members["a"].assignment == {t: [0]}


def test_share_sessions() -> None:
    def code(fn, *args):
        with pytest.raises(ShareSessionError) as e:
            fn(*args)
        return e.value.code

    t = uuid.uuid4()
    cache = ShareSessionCache()
    assert code(cache.subsequent, "g", "m", 1) == SHARE_SESSION_NOT_FOUND
    assert code(cache.existing, "g", "m") == SHARE_SESSION_NOT_FOUND
    conn = object()
    s = cache.create("g", "m", [((t, 0), "t"), ((t, 1), "t")], conn, 10)
    assert s.epoch == 1 and list(s.partitions) == [(t, 0), (t, 1)]
    assert code(cache.subsequent, "g", "m", 2) == INVALID_SHARE_SESSION_EPOCH
    assert cache.subsequent("g", "m", 1) is s and s.epoch == 2
    assert cache.existing("g", "m") is s and s.epoch == 2  # epoch -1 needs only the session
    # Kafka's ShareSession.update: added first, then forgotten: a partition in both is gone.
    s.update([((t, 1), "t"), ((t, 2), "t")], [(t, 1)])
    assert list(s.partitions) == [(t, 0), (t, 2)] and s.partitions[(t, 2)].requires_update
    assert code(cache.create, "h", "m", [], object(), 1) == SHARE_SESSION_LIMIT_REACHED
    # The connection that opened the session owns it until the session is removed.
    assert cache.disconnected(conn) == (("g", "m"), "g") and cache.disconnected(conn) == (None, None)
    other = object()
    cache.create("g", "m", [], other, 10)
    cache.remove("g", "m")
    assert cache.disconnected(other) == (None, "g") and not cache.group_has_sessions("g")
