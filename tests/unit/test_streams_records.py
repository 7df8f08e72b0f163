"""Streams group records (server/groups/streams_records.py) against the bytes Kafka 4.3.1's own
generated classes write (StreamsGroupMemberMetadataValue & co., serialized with kafka-clients'
ObjectSerializationCache; the version prefix is the record's), and round trips; plus the
topology configuration and the sticky assignor on small cases."""

from __future__ import annotations

from kafka_sidecar.server.groups.streams_assignor import AssignmentMember, assign
from kafka_sidecar.server.groups.streams_group import (
    MemberState,
    StreamsGroupMember,
    StreamsTopology,
    Subtopology,
    TasksTuple,
    TopicInfo,
)
from kafka_sidecar.server.groups.streams_records import (
    current_assignment_value,
    decode_current_assignment_value,
    decode_group_metadata_value,
    decode_member_metadata_value,
    decode_topology_value,
    group_metadata_value,
    member_metadata_value,
    target_assignment_metadata_value,
    topology_value,
)
from kafka_sidecar.server.groups.streams_topics import (
    MISSING_INTERNAL_TOPICS,
    MISSING_SOURCE_TOPICS,
    configure_topology,
)

V0 = b"\x00\x00"


def test_values_as_kafka_writes_them() -> None:
    # the Java objects' defaults: instanceId and rackId "" (not null)
    m = StreamsGroupMember("m", instance_id="", rack_id="", client_id="c", client_host="h", process_id="p", topology_epoch=0)
    assert member_metadata_value(m) == V0 + bytes.fromhex("010102630268ffffffff000000000270ff0100")
    assert member_metadata_value(StreamsGroupMember("m", instance_id="", rack_id="", client_id="c", client_host="h", process_id="p", topology_epoch=0,
                                                    user_endpoint=("x", 1))) == V0 + bytes.fromhex("010102630268ffffffff0000000002700102780001000100")
    assert group_metadata_value(1, 0, -1, {}) == V0 + bytes.fromhex("00000001000000000000000000")
    assert group_metadata_value(1, 5, 0, {}) == V0 + bytes.fromhex("00000001000000000000000501000400000000")
    assert target_assignment_metadata_value(1, 0) == V0 + bytes.fromhex("0000000100")


def test_round_trips() -> None:
    m = StreamsGroupMember("m", member_epoch=5, previous_member_epoch=4, state=MemberState.UNREVOKED_TASKS, client_id="c",
                           client_host="/127.0.0.1", rebalance_timeout_ms=300000, topology_epoch=0, process_id="p",
                           user_endpoint=("h", 8080), client_tags=(("rack", "a"),),
                           assigned=TasksTuple({"0": frozenset({0, 2})}, {"1": frozenset({1})}, {}),
                           pending_revocation=TasksTuple({"0": frozenset({1})}, {}, {}), active_epochs={("0", 0): 3, ("0", 2): 5})
    back = decode_current_assignment_value(decode_member_metadata_value(StreamsGroupMember("m"), member_metadata_value(m)),
                                           current_assignment_value(m))
    assert back == m
    assert decode_group_metadata_value(group_metadata_value(7, -3, 2, {"num.standby.replicas": "1"})) == (7, -3, 2, {"num.standby.replicas": "1"})
    t = StreamsTopology(0, (Subtopology("0", ("in",), (), (), ("r",), (), ((( 0,), (), ()),)),
                            Subtopology("1", (), (), (TopicInfo("c", 0, 0, (("cleanup.policy", "compact"),)),), (),
                                        (TopicInfo("r", 0, 0, ()),))))
    assert decode_topology_value(topology_value(t)) == t


def test_configure_topology_and_assign() -> None:
    t = StreamsTopology(0, (Subtopology("0", ("in",), repartition_sink_topics=("app-r",)),
                            Subtopology("1", state_changelog_topics=(TopicInfo("app-c"),), repartition_source_topics=(TopicInfo("app-r"),))))
    sizes = {"in": 3}
    configured = configure_topology(t, sizes.get)
    assert configured.status == (MISSING_INTERNAL_TOPICS, "Internal topics are missing: [app-c, app-r]")
    assert [(x.name, x.partitions) for x in configured.to_create] == [("app-c", 3), ("app-r", 3)]
    sizes.update({"app-c": 3, "app-r": 3})
    configured = configure_topology(t, sizes.get)
    assert configured.ready and configured.tasks == {"0": 3, "1": 3}
    assert configure_topology(t, {}.get).status == (MISSING_SOURCE_TOPICS, "Source topics in are missing.")
    # two members: 3 tasks each, balanced; a third keeps the first two's tasks where it can
    two = assign([AssignmentMember("a", "p1", TasksTuple()), AssignmentMember("b", "p2", TasksTuple())], configured.tasks, 1)
    assert sorted(sum(len(ps) for ps in x.active.values()) for x in two.values()) == [3, 3]
    for x in two.values():  # a standby never sits with its active task
        assert not any(set(x.active.get(s, ())) & set(ps) for s, ps in x.standby.items())
    three = assign([AssignmentMember("a", "p1", two["a"]), AssignmentMember("b", "p2", two["b"]),
                    AssignmentMember("c", "p3", TasksTuple())], configured.tasks, 0)
    assert sorted(sum(len(ps) for ps in x.active.values()) for x in three.values()) == [2, 2, 2]
    for mid in ("a", "b"):
        assert all(set(ps) <= set(two[mid].active.get(s, ())) for s, ps in three[mid].active.items())
