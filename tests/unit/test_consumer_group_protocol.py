"""KIP-848 consumer groups without I/O: the server-side assignors, the reconciliation of a member
towards its target (revoke before assign, member epochs) and the records' formats."""

from __future__ import annotations

import uuid

from kafka_sidecar.server.groups.assignors import MemberSubscription, range_assign, uniform_assign
from kafka_sidecar.server.groups.consumer_group import (
    ConsumerGroup,
    ConsumerGroupMember,
    ConsumerGroupState,
    MemberState,
    reconcile,
)
from kafka_sidecar.server.groups.consumer_records import (
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    CONSUMER_GROUP_METADATA,
    consumer_key,
    current_assignment_value,
    decode_consumer_key,
    decode_current_assignment_value,
    decode_epoch_value,
    decode_member_metadata_value,
    decode_target_assignment_member_value,
    group_metadata_value,
    member_metadata_value,
    target_assignment_member_value,
)

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)


def _count(assignment: dict[uuid.UUID, set[int]]) -> int:
    return sum(len(ps) for ps in assignment.values())


def test_uniform_balances_and_covers_every_partition() -> None:
    members = {m: MemberSubscription(frozenset({T1, T2})) for m in ("a", "b", "c")}
    out = uniform_assign(members, {T1: 4, T2: 3})
    assert sorted(_count(a) for a in out.values()) == [2, 2, 3]
    owned = [(t, p) for a in out.values() for t, ps in a.items() for p in ps]
    assert sorted(owned) == sorted([(T1, p) for p in range(4)] + [(T2, p) for p in range(3)])


def test_uniform_is_sticky_when_a_member_joins() -> None:
    before = uniform_assign({m: MemberSubscription(frozenset({T1})) for m in ("a", "b")}, {T1: 4})
    members = {m: MemberSubscription(frozenset({T1}), assignment=before[m]) for m in ("a", "b")}
    members["c"] = MemberSubscription(frozenset({T1}))
    after = uniform_assign(members, {T1: 4})
    assert sorted(_count(a) for a in after.values()) == [1, 1, 2]
    # a and b only lose partitions: nothing moves between them
    for m in ("a", "b"):
        assert after[m].get(T1, set()) <= before[m][T1]


def test_uniform_heterogeneous_subscriptions() -> None:
    members = {"a": MemberSubscription(frozenset({T1})), "b": MemberSubscription(frozenset({T1, T2}))}
    out = uniform_assign(members, {T1: 2, T2: 2})
    assert out["a"] == {T1: {0, 1}}
    assert _count(out["a"]) + _count(out["b"]) == 4
    assert T2 not in out["a"]


def test_range_gives_contiguous_ranges_in_member_order() -> None:
    members = {m: MemberSubscription(frozenset({T1})) for m in ("b", "a")}
    assert range_assign(members, {T1: 5}) == {"a": {T1: {0, 1, 2}}, "b": {T1: {3, 4}}}


def _member(mid: str, epoch: int, assigned: dict[uuid.UUID, frozenset[int]]) -> ConsumerGroupMember:
    return ConsumerGroupMember(mid, subscribed_topic_names=("t",), member_epoch=epoch, previous_member_epoch=epoch - 1,
                               assigned=assigned)


def test_reconcile_revokes_before_assigning() -> None:
    m = _member("a", 1, {T1: frozenset({0, 1, 2, 3})})
    # target epoch 2 takes 2 and 3 away: the member keeps epoch 1 until it stops owning them
    step = reconcile(m, 2, {T1: frozenset({0, 1})}, {T1}, {T1: frozenset({0, 1, 2, 3})}, lambda t, p: 1)
    assert (step.state, step.member_epoch, step.assigned, step.pending_revocation) == (
        MemberState.UNREVOKED_PARTITIONS, 1, {T1: frozenset({0, 1})}, {T1: frozenset({2, 3})})
    # still owned: no progress
    assert reconcile(step, 2, {T1: frozenset({0, 1})}, {T1}, {T1: frozenset({0, 1, 2, 3})}, lambda t, p: 1) == step
    # revoked: the member moves to the target epoch
    done = reconcile(step, 2, {T1: frozenset({0, 1})}, {T1}, {T1: frozenset({0, 1})}, lambda t, p: 1)
    assert (done.state, done.member_epoch, done.previous_member_epoch, done.assigned) == (MemberState.STABLE, 2, 1, {T1: frozenset({0, 1})})
    assert done.assignment_epoch(T1, 0) == 1  # kept partitions keep the epoch they were assigned at


def test_reconcile_waits_for_partitions_still_owned_by_another_member() -> None:
    new = _member("b", 0, {})
    owners = {(T1, 2): 1}  # partition 2 still owned (pending revocation) by another member
    step = reconcile(new, 2, {T1: frozenset({2, 3})}, {T1}, {}, lambda t, p: owners.get((t, p), -1))
    assert (step.state, step.member_epoch, step.assigned) == (MemberState.UNRELEASED_PARTITIONS, 2, {T1: frozenset({3})})
    owners.clear()
    done = reconcile(step, 2, {T1: frozenset({2, 3})}, {T1}, {T1: frozenset({3})}, lambda t, p: -1)
    assert (done.state, done.assigned) == (MemberState.STABLE, {T1: frozenset({2, 3})})
    assert (done.assignment_epoch(T1, 2), done.assignment_epoch(T1, 3)) == (2, 2)


def test_group_state_and_partition_epochs() -> None:
    g = ConsumerGroup("g", group_epoch=2, assignment_epoch=1)
    assert g.state == ConsumerGroupState.EMPTY
    g.update_member(_member("a", 1, {T1: frozenset({0})}))
    assert g.state == ConsumerGroupState.ASSIGNING
    g.assignment_epoch = 2
    assert g.state == ConsumerGroupState.RECONCILING
    g.update_member(_member("a", 2, {T1: frozenset({0})}))
    assert g.state == ConsumerGroupState.STABLE
    assert g.current_partition_epoch(T1, 0) == 2 and g.current_partition_epoch(T1, 1) == -1
    g.remove_member("a")
    assert g.current_partition_epoch(T1, 0) == -1 and g.state == ConsumerGroupState.EMPTY


def test_records_round_trip() -> None:
    key = decode_consumer_key(consumer_key(CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, "g", "m1"))
    assert key is not None and (key.record_type, key.group, key.member) == (8, "g", "m1")
    assert consumer_key(CONSUMER_GROUP_METADATA, "g") == b"\x00\x03\x00\x01g"
    assert decode_epoch_value(group_metadata_value(7)) == 7
    # ConsumerGroupMetadataValue v0: version, epoch, no tagged fields
    assert group_metadata_value(7) == b"\x00\x00\x00\x00\x00\x07\x00"
    m = ConsumerGroupMember("m1", "i1", None, "client", "/127.0.0.1", ("a", "b"), None, "range", 30000, 3, 2,
                            MemberState.UNREVOKED_PARTITIONS, {T1: frozenset({0, 2})}, {T2: frozenset({1})})
    back = decode_current_assignment_value(decode_member_metadata_value(ConsumerGroupMember("m1"), member_metadata_value(m)),
                                           current_assignment_value(m))
    assert back == m
    assert back.assignment_epoch(T1, 0) == 3  # the tagged AssignmentEpochs (KIP-1251) default to the member epoch
    m2 = ConsumerGroupMember("m1", member_epoch=5, assigned={T1: frozenset({0, 1})}, assignment_epochs={(T1, 0): 2, (T1, 1): 5})
    back2 = decode_current_assignment_value(ConsumerGroupMember("m1"), current_assignment_value(m2))
    assert back2.assignment_epochs == {(T1, 0): 2, (T1, 1): 5}
    assert decode_target_assignment_member_value(target_assignment_member_value({T1: frozenset({3, 1})})) == {T1: frozenset({1, 3})}
    assert decode_consumer_key(b"\x00\x01\x00\x01g\x00\x01t\x00\x00\x00\x00") is None  # an offset commit key
