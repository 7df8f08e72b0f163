"""The ``__consumer_offsets`` records of consumer groups (KIP-848), in Kafka 4's formats.

A key starts with its record type as an int16 (Kafka's CoordinatorRecordType), then the key's
fields, not flexible. A value starts with its version (0) as an int16, then the value's fields
in the flexible encoding (compact strings and arrays, tagged fields); both encoded by
``protocol/coordinator_records.py`` from Kafka's schemas. A null value is a tombstone.

=====  ========================================  ===========================================
type   key fields                                value (version 0)
=====  ========================================  ===========================================
3      ConsumerGroupMetadata: group              epoch int32 (+ tagged metadataHash)
5      ConsumerGroupMemberMetadata: group,       instanceId, rackId, clientId, clientHost,
       member                                    subscribedTopicNames, subscribedTopicRegex,
                                                 rebalanceTimeoutMs, serverAssignor
6      ConsumerGroupTargetAssignmentMetadata:    assignmentEpoch int32 (+ tagged timestamp)
       group
7      ConsumerGroupTargetAssignmentMember:      topicPartitions [topicId uuid, partitions]
       group, member
8      ConsumerGroupCurrentMemberAssignment:     memberEpoch, previousMemberEpoch, state int8,
       group, member                             assignedPartitions, partitionsPendingRevocation
16     ConsumerGroupRegularExpression: group,    topics []string, version int64, timestamp int64
       regularExpression
=====  ========================================  ===========================================
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace

from kafka_sidecar.protocol.coordinator_records import (
    decode_value,
    encode_key,
    encode_value,
    record_type,
)

from .consumer_group import (
    ClassicMemberMetadata,
    ConsumerGroupMember,
    MemberState,
    Partitions,
    ResolvedRegularExpression,
)
from .records import decode_group_key, group_record_key

CONSUMER_GROUP_METADATA = 3
CONSUMER_GROUP_PARTITION_METADATA = 4
CONSUMER_GROUP_MEMBER_METADATA = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8
CONSUMER_GROUP_REGULAR_EXPRESSION = 16
_WITH_MEMBER = (CONSUMER_GROUP_MEMBER_METADATA, CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT)
CONSUMER_GROUP_RECORD_TYPES = frozenset({
    CONSUMER_GROUP_METADATA, CONSUMER_GROUP_PARTITION_METADATA, CONSUMER_GROUP_MEMBER_METADATA,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, CONSUMER_GROUP_REGULAR_EXPRESSION,
})



@dataclass(frozen=True)
class ConsumerGroupKey:
    """A decoded key: its record type, the group, and the member for member records."""

    record_type: int
    group: str
    member: str | None = None
    regex: str | None = None  # ConsumerGroupRegularExpressionKey's regularExpression


# ---- keys (not flexible) ---------------------------------------------------------------


def consumer_key(record_type: int, group: str, member: str | None = None) -> bytes:
    return group_record_key(record_type, group, (member or "") if record_type in _WITH_MEMBER else None)


def regex_key(group: str, regex: str) -> bytes:
    """ConsumerGroupRegularExpressionKey (type 16): group id, regular expression."""
    return encode_key("ConsumerGroupRegularExpressionKey", {"GroupId": group, "RegularExpression": regex})


def decode_consumer_key(key: bytes) -> ConsumerGroupKey | None:
    """The key if it is a consumer group record, else None."""
    kind = record_type(key)
    if kind not in CONSUMER_GROUP_RECORD_TYPES:
        return None
    k = decode_group_key(key)
    if kind == CONSUMER_GROUP_REGULAR_EXPRESSION:
        return ConsumerGroupKey(kind, k["GroupId"], regex=k["RegularExpression"])
    return ConsumerGroupKey(kind, k["GroupId"], k.get("MemberId"))


# ---- values (flexible, version 0) ------------------------------------------------------


def _topic_partitions(parts: Partitions, epochs: Callable[[uuid.UUID, int], int] | None = None) -> list[dict]:
    """[]TopicPartitions, topics by id and partitions sorted; with ``epochs``, each topic's
    AssignmentEpochs (KIP-1251)."""
    out = []
    for t in sorted(parts, key=str):
        ps = sorted(parts[t])
        out.append({"TopicId": t, "Partitions": ps, "AssignmentEpochs": None if epochs is None else [epochs(t, p) for p in ps]})
    return out


def group_metadata_value(epoch: int) -> bytes:
    return encode_value("ConsumerGroupMetadataValue", {"Epoch": epoch}, 0)


def target_assignment_metadata_value(epoch: int) -> bytes:
    return encode_value("ConsumerGroupTargetAssignmentMetadataValue", {"AssignmentEpoch": epoch}, 0)


def target_assignment_member_value(parts: Partitions) -> bytes:
    topics = [{"TopicId": t, "Partitions": sorted(parts[t])} for t in sorted(parts, key=str)]
    return encode_value("ConsumerGroupTargetAssignmentMemberValue", {"TopicPartitions": topics}, 0)


def member_metadata_value(m: ConsumerGroupMember) -> bytes:
    classic = None if m.classic is None else {
        "SessionTimeoutMs": m.classic.session_timeout_ms,
        "SupportedProtocols": [{"Name": name, "Metadata": metadata} for name, metadata in m.classic.supported_protocols]}
    return encode_value("ConsumerGroupMemberMetadataValue", {
        "InstanceId": m.instance_id, "RackId": m.rack_id, "ClientId": m.client_id, "ClientHost": m.client_host,
        "SubscribedTopicNames": list(m.subscribed_topic_names), "SubscribedTopicRegex": m.subscribed_topic_regex,
        "RebalanceTimeoutMs": m.rebalance_timeout_ms, "ServerAssignor": m.server_assignor,
        "ClassicMemberMetadata": classic}, 0)


def current_assignment_value(m: ConsumerGroupMember) -> bytes:
    return encode_value("ConsumerGroupCurrentMemberAssignmentValue", {
        "MemberEpoch": m.member_epoch, "PreviousMemberEpoch": m.previous_member_epoch, "State": int(m.state),
        "AssignedPartitions": _topic_partitions(m.assigned, m.assignment_epoch),
        "PartitionsPendingRevocation": _topic_partitions(m.pending_revocation)}, 0)


def regex_value(resolved: ResolvedRegularExpression) -> bytes:
    """ConsumerGroupRegularExpressionValue v0: topics (sorted), version, timestamp."""
    return encode_value("ConsumerGroupRegularExpressionValue", {
        "Topics": sorted(resolved.topics), "Version": resolved.version, "Timestamp": resolved.timestamp_ms}, 0)


def decode_regex_value(value: bytes) -> ResolvedRegularExpression:
    v = decode_value("ConsumerGroupRegularExpressionValue", value)[1]
    return ResolvedRegularExpression(frozenset(v["Topics"]), v["Version"], v["Timestamp"])


def _read_topic_partitions(topics: list[dict], epochs: dict[tuple[uuid.UUID, int], int] | None = None) -> Partitions:
    """[]TopicPartitions; each topic's AssignmentEpochs go into ``epochs``."""
    out: dict[uuid.UUID, frozenset[int]] = {}
    for t in topics:
        tid, ps = t["TopicId"], t["Partitions"]
        out[tid] = frozenset(ps)
        if epochs is not None and t["AssignmentEpochs"] is not None:
            for p, e in zip(ps, t["AssignmentEpochs"], strict=False):
                epochs[(tid, p)] = e
    return out


def decode_epoch_value(value: bytes) -> int:
    """ConsumerGroupMetadataValue: the group epoch."""
    return decode_value("ConsumerGroupMetadataValue", value)[1]["Epoch"]


def decode_assignment_epoch_value(value: bytes) -> int:
    """ConsumerGroupTargetAssignmentMetadataValue: the assignment epoch."""
    return decode_value("ConsumerGroupTargetAssignmentMetadataValue", value)[1]["AssignmentEpoch"]


def decode_target_assignment_member_value(value: bytes) -> Partitions:
    return _read_topic_partitions(decode_value("ConsumerGroupTargetAssignmentMemberValue", value)[1]["TopicPartitions"])


def decode_member_metadata_value(member: ConsumerGroupMember, value: bytes) -> ConsumerGroupMember:
    """``member`` with the metadata of the record."""
    v = decode_value("ConsumerGroupMemberMetadataValue", value)[1]
    c = v["ClassicMemberMetadata"]
    classic = None if c is None else ClassicMemberMetadata(
        c["SessionTimeoutMs"], tuple((p["Name"], p["Metadata"]) for p in c["SupportedProtocols"]))
    return replace(member, instance_id=v["InstanceId"], rack_id=v["RackId"], client_id=v["ClientId"],
                   client_host=v["ClientHost"], subscribed_topic_names=tuple(v["SubscribedTopicNames"]),
                   subscribed_topic_regex=v["SubscribedTopicRegex"], server_assignor=v["ServerAssignor"],
                   rebalance_timeout_ms=v["RebalanceTimeoutMs"], classic=classic)


def decode_current_assignment_value(member: ConsumerGroupMember, value: bytes) -> ConsumerGroupMember:
    """``member`` with the current assignment of the record."""
    v = decode_value("ConsumerGroupCurrentMemberAssignmentValue", value)[1]
    raw_state = v["State"]
    state = MemberState(raw_state) if raw_state in MemberState._value2member_map_ else MemberState.UNKNOWN
    epochs: dict[tuple[uuid.UUID, int], int] = {}
    assigned = _read_topic_partitions(v["AssignedPartitions"], epochs)
    pending = _read_topic_partitions(v["PartitionsPendingRevocation"])
    return replace(member, member_epoch=v["MemberEpoch"], previous_member_epoch=v["PreviousMemberEpoch"], state=state,
                   assigned=assigned, pending_revocation=pending, assignment_epochs=epochs)
