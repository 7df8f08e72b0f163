"""The share-partition pieces Kafka 4.3 behaves by: a start offset resolved after initialization,
the state written with the start offset from before the change being written, aborted records
archived, and assignments over initialized partitions only."""

from __future__ import annotations

import uuid

from kafka_sidecar.server.share.group import ShareGroup, ShareGroupMember
from kafka_sidecar.server.share.partition import AcknowledgeType, RecordState, SharePartition
from kafka_sidecar.server.share.persister import persisted_state
from kafka_sidecar.server.share.records import StateBatch

ACCEPT, RELEASE = int(AcknowledgeType.ACCEPT), int(AcknowledgeType.RELEASE)


def test_uninitialized_until_resolved() -> None:
    sp = SharePartition(-1)
    assert not sp.initialized and persisted_state(sp, as_written=True) == (-1, ())
    sp.initialize(7)
    assert sp.initialized and (sp.start_offset, sp.next_fetch_offset(), sp.write_start_offset) == (7, 7, 7)
    assert sp.acquire("m", [(7, 8)], 10, now_ms=0)[0].first_offset == 7


def test_written_start_offset_is_the_one_before_the_change() -> None:
    sp = SharePartition(0)
    sp.acquire("m", [(0, 5)], 10, now_ms=0)
    sp.acknowledge("m", 0, 1, [ACCEPT], now_ms=1)
    sp.acknowledge("m", 3, 3, [ACCEPT], now_ms=1)
    # In memory the start offset moved to 2; the write carries 0 and the finished records.
    assert sp.start_offset == 2
    assert persisted_state(sp, as_written=True) == (0, (StateBatch(0, 1, 2, 1), StateBatch(3, 3, 2, 1)))
    # After that write (the persister moves these), the next one starts from 2.
    sp.write_start_offset, sp.done_since_write = sp.start_offset, []
    sp.acknowledge("m", 2, 2, [ACCEPT], now_ms=2)
    sp.acknowledge("m", 4, 4, [RELEASE], now_ms=2)
    assert sp.start_offset == 4
    assert persisted_state(sp, as_written=True) == (2, (StateBatch(2, 3, 2, 1), StateBatch(4, 4, 0, 1)))


def test_archive_never_delivers() -> None:
    sp = SharePartition(0)
    sp.archive([(0, 1)])
    assert sp.state_of(0) == RecordState.ACKNOWLEDGED and sp.start_offset == 2  # below the start: done
    got = sp.acquire("m", [(0, 1), (2, 3)], 10, now_ms=0)
    assert [(a.first_offset, a.last_offset) for a in got] == [(2, 3)]


def test_assign_only_the_given_partitions_at_the_current_epoch() -> None:
    t = uuid.uuid4()
    g = ShareGroup("g")
    g.group_epoch = 2
    g.members["a"] = ShareGroupMember("a", 0, "c", "/h", None, ["t"], 0)
    g.assign({"t": (t, [])}, now_ms=5)
    assert (g.assignment_epoch, g.last_assignment_ms) == (2, 5)
    assert g.reconcile(g.members["a"]) and g.members["a"].assignment == {}
    g.group_epoch = 3
    g.assign({"t": (t, [0, 1])}, now_ms=6)
    assert g.reconcile(g.members["a"]) and (g.members["a"].member_epoch, g.members["a"].assignment) == (3, {t: [0, 1]})
