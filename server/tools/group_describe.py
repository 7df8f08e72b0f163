"""What the ``groups`` tool knows of a group, whatever its type, from the Kafka protocol.

Kafka 4 has four group types, each with its own describe API: classic (DescribeGroups, 15),
consumer (KIP-848, ConsumerGroupDescribe, 69), share (KIP-932, ShareGroupDescribe, 77) and
streams (KIP-1071, StreamsGroupDescribe, 89). ListGroups v5 says which type a group is. Each
describer turns its answer into one ``GroupDescription``; ``DESCRIBERS`` maps a type to its
describer, so a new type is one function and one entry. As Kafka's admin client does, a
consumer-group describe that the broker answers GROUP_ID_NOT_FOUND (a classic group, or a broker
without KIP-848) is retried as DescribeGroups.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from kafka_sidecar.client import KafkaClient, KafkaClientError

from .admin import DESCRIBE_GROUPS, LIST_GROUPS, coordinator, java_exception, request, retrying

CONSUMER_GROUP_DESCRIBE, SHARE_GROUP_DESCRIBE = 69, 77
GROUP_ID_NOT_FOUND, UNSUPPORTED_VERSION = 69, 35

TopicPartition = tuple[str, int]


class GroupCommandError(Exception):
    pass


@dataclass
class MemberDescription:
    member_id: str
    client_id: str
    host: str
    assignment: list[TopicPartition]
    instance_id: str | None = None
    member_epoch: int | None = None  # consumer and share members
    target_assignment: list[TopicPartition] = field(default_factory=list)
    upgraded: bool | None = None  # consumer groups: a consumer-protocol (True) or classic (False) member


@dataclass
class GroupDescription:
    group_id: str
    group_type: str  # "classic", "consumer", "share" or "streams"
    state: str
    members: list[MemberDescription]
    assignor: str = ""
    group_epoch: int | None = None
    assignment_epoch: int | None = None


def list_groups(client: KafkaClient, types: list[str]) -> list[tuple[str, str, str, str]]:
    """(group id, state, type, protocol type) of the groups of ``types``, in the broker's order
    (ListGroups v5; older brokers: v4, every group taken as classic)."""
    conn = client.bootstrap
    try:
        _, body = conn.request(LIST_GROUPS, {"states_filter": [], "types_filter": types}, max_version=5, min_version=5)
        typed = True
    except KafkaClientError:  # a broker without v5 (before Kafka 3.8)
        body = request(conn, LIST_GROUPS, 4, {"states_filter": []})
        typed = False
    if body.error_code.value:
        raise GroupCommandError(f"Executing consumer group command failed due to {java_exception(body.error_code.value)}")
    return [(g.group_id, g.group_state, (g.group_type.lower() if typed else "classic"), g.protocol_type) for g in body.groups]


def print_list(client: KafkaClient, group_type: str, with_state: bool, out: TextIO) -> None:
    """kafka-share-groups.sh / kafka-streams-groups.sh --list [--state]: the groups of one type in
    the broker's order, with their states in a GROUP column at least 15 wide."""
    groups = [(g, s) for g, s, _, _ in list_groups(client, [group_type])]
    if with_state:
        width = max([15, *(len(g) for g, _ in groups)])
        out.write(f"{'GROUP':<{width}} STATE\n")
        for g, s in groups:
            out.write(f"{g:<{width}} {s}\n")
    else:
        for g, _ in groups:
            out.write(g + "\n")


def decode_assignment(data: bytes | None) -> list[TopicPartition]:
    """ConsumerProtocolAssignment (any version): the assigned (topic, partition)s."""
    if not data or len(data) < 6:
        return []
    out: list[TopicPartition] = []
    try:
        pos = 2  # version
        (n_topics,) = struct.unpack_from(">i", data, pos)
        pos += 4
        for _ in range(max(0, n_topics)):
            (ln,) = struct.unpack_from(">h", data, pos)
            pos += 2
            topic = data[pos:pos + ln].decode()
            pos += ln
            (n_parts,) = struct.unpack_from(">i", data, pos)
            pos += 4
            for _ in range(max(0, n_parts)):
                (p,) = struct.unpack_from(">i", data, pos)
                pos += 4
                out.append((topic, p))
    except (struct.error, UnicodeDecodeError):
        return out
    return out


def _partitions(assignment: Any) -> list[TopicPartition]:
    if assignment is None:
        return []
    return sorted((t.topic_name, p) for t in assignment.topic_partitions for p in t.partitions)


def describe_classic(client: KafkaClient, group: str) -> GroupDescription | None:
    body = retrying(
        lambda: request(coordinator(client, group), DESCRIBE_GROUPS, 5, {"groups": [group], "include_authorized_operations": False}),
        lambda b: b.groups[0].error_code.value,
    )
    (g,) = body.groups
    code = g.error_code.value
    if code == GROUP_ID_NOT_FOUND or (not code and g.group_state == "Dead"):
        return None
    if code:
        raise GroupCommandError(f"Executing consumer group command failed due to {java_exception(code)}")
    members = [MemberDescription(m.member_id, m.client_id, m.client_host, decode_assignment(m.member_assignment),
                                 instance_id=m.group_instance_id) for m in g.members]
    return GroupDescription(group, "classic", g.group_state, members, assignor=g.protocol_data or "")


def describe_consumer(client: KafkaClient, group: str) -> GroupDescription | None:
    """ConsumerGroupDescribe (KIP-848); a classic group (GROUP_ID_NOT_FOUND) through DescribeGroups."""
    def ask() -> Any:
        _, body = coordinator(client, group).request(
            CONSUMER_GROUP_DESCRIBE, {"group_ids": [group], "include_authorized_operations": False}, max_version=1)
        return body

    try:
        body = retrying(ask, lambda b: b.groups[0].error_code.value)
    except KafkaClientError:  # a broker without ConsumerGroupDescribe
        return describe_classic(client, group)
    (g,) = body.groups
    code = g.error_code.value
    if code in (GROUP_ID_NOT_FOUND, UNSUPPORTED_VERSION):
        return describe_classic(client, group)
    if code:
        raise GroupCommandError(f"Executing consumer group command failed due to {java_exception(code, g.error_message)}")
    members = [MemberDescription(
        m.member_id, m.client_id, m.client_host, _partitions(m.assignment), instance_id=m.instance_id,
        member_epoch=m.member_epoch, target_assignment=_partitions(m.target_assignment),
        upgraded=None if getattr(m, "member_type", -1) == -1 else m.member_type == 1,
    ) for m in g.members]
    return GroupDescription(group, "consumer", g.group_state, members, assignor=g.assignor_name,
                            group_epoch=g.group_epoch, assignment_epoch=g.assignment_epoch)


def describe_one(client: KafkaClient, group: str, api_key: int, kind: str, version: int) -> Any:
    """One group from a ShareGroupDescribe/StreamsGroupDescribe at ``version`` (retried while the
    coordinator loads); GroupCommandError with Kafka's message for an error."""
    def ask() -> Any:
        _, body = coordinator(client, group).request(
            api_key, {"group_ids": [group], "include_authorized_operations": False}, max_version=version, min_version=version)
        return body

    body = retrying(ask, lambda b: b.groups[0].error_code.value)
    (g,) = body.groups
    code = g.error_code.value
    if code:
        raise GroupCommandError(f"Executing {kind} group command failed due to {java_exception(code, g.error_message)}")
    return g


def describe_share(client: KafkaClient, group: str) -> GroupDescription:
    """ShareGroupDescribe (KIP-932); GroupCommandError with Kafka's message if there is none."""
    g = describe_one(client, group, SHARE_GROUP_DESCRIBE, "share", 1)
    members = [MemberDescription(m.member_id, m.client_id, m.client_host, _partitions(m.assignment), member_epoch=m.member_epoch)
               for m in g.members]
    return GroupDescription(group, "share", g.group_state, members, assignor=g.assignor_name,
                            group_epoch=g.group_epoch, assignment_epoch=g.assignment_epoch)


# group type (ListGroups v5's) -> describer. A streams describer (StreamsGroupDescribe) is one more entry.
DESCRIBERS: dict[str, Callable[[KafkaClient, str], GroupDescription | None]] = {
    "classic": describe_classic,
    "consumer": describe_consumer,
    "share": describe_share,
}


def assignment_string(tps: list[TopicPartition]) -> str:
    """Kafka's tools' ``t1:0,1;t2:3`` (topics sorted; ``-`` when empty)."""
    if not tps:
        return "-"
    by_topic: dict[str, list[int]] = {}
    for t, p in tps:
        by_topic.setdefault(t, []).append(p)
    return ";".join(sorted(f"{t}:{','.join(str(p) for p in sorted(ps))}" for t, ps in by_topic.items()))
