"""Classic members of consumer groups: their member metadata record (Kafka 4.3.1's tagged
ClassicMemberMetadata) and the embedded consumer protocol they speak."""

from __future__ import annotations

import struct

from kafka_sidecar.server.groups.consumer_group import (
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerGroupMember,
)
from kafka_sidecar.server.groups.consumer_protocol import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    subscription_version,
)
from kafka_sidecar.server.groups.consumer_records import (
    decode_member_metadata_value,
    member_metadata_value,
)


def _subscription_v1(topics: list[str], owned: dict[str, list[int]]) -> bytes:
    out = struct.pack(">hi", 1, len(topics)) + b"".join(struct.pack(">h", len(t)) + t.encode() for t in topics) + struct.pack(">i", -1)
    out += struct.pack(">i", len(owned))
    for t, ps in owned.items():
        out += struct.pack(">h", len(t)) + t.encode() + struct.pack(">i", len(ps)) + b"".join(struct.pack(">i", p) for p in ps)
    return out


def test_classic_member_metadata_is_a_present_nullable_struct_in_tag_0() -> None:
    classic = ClassicMemberMetadata(30000, (("range", b"\x00\x00"), ("cooperative-sticky", b"\x00\x01")))
    m = ConsumerGroupMember("m", client_id="c", client_host="/h", subscribed_topic_names=("t",), rebalance_timeout_ms=5, classic=classic)
    value = member_metadata_value(m)
    tagged = value[value.index(b"\x00\x00\x00\x05\x00") + 5:]  # after rebalanceTimeoutMs and a null serverAssignor
    body = b"\x01" + struct.pack(">i", 30000) + b"\x03" + b"\x06range\x03\x00\x00\x00" + b"\x13cooperative-sticky\x03\x00\x01\x00" + b"\x00"
    assert tagged == b"\x01\x00" + bytes([len(body)]) + body
    assert decode_member_metadata_value(ConsumerGroupMember("m"), value).classic == classic
    plain = member_metadata_value(ConsumerGroupMember("m"))
    assert plain.endswith(b"\xff\xff\xff\xff\x00\x00") and decode_member_metadata_value(ConsumerGroupMember("m"), plain).classic is None


def test_subscription_and_assignment() -> None:
    sub = decode_subscription(_subscription_v1(["a", "b"], {"a": [1, 2]}))
    assert (sub.version, sub.topics, sub.owned, sub.rack_id) == (1, ("a", "b"), {"a": (1, 2)}, None)
    data = encode_assignment({"a": [0, 3]}, 3)
    assert data == struct.pack(">hih", 3, 1, 1) + b"a" + struct.pack(">iiii", 2, 0, 3, -1)
    assert decode_assignment(data) == ({"a": (0, 3)}, None)
    assert decode_assignment(b"") == ({}, None)
    assert subscription_version(struct.pack(">h", 7)) == 3  # capped at the highest version known


def test_classic_protocol_support_and_downgrade_condition() -> None:
    classic = ClassicMemberMetadata(1000, (("range", b""),))
    g = ConsumerGroup("g")
    assert g.supports_classic_protocols("consumer", {"range"}) and not g.supports_classic_protocols("connect", {"range"})
    g.update_member(ConsumerGroupMember("c1", classic=classic))
    g.update_member(ConsumerGroupMember("m1"))
    assert g.supports_classic_protocols("consumer", {"range", "x"}) and not g.supports_classic_protocols("consumer", {"roundrobin"})
    assert g.all_members_use_classic_protocol_except("m1") and not g.all_members_use_classic_protocol_except("c1")
