"""Share groups' metadata in ``__consumer_offsets``, in Kafka 4.3's record formats (the group
coordinator's share group record types), so a restart keeps a group's epochs, members and
assignments and which share-partitions are initialized.

A key is its record type as an int16, then its fields (not flexible). A value is its version (0)
as an int16, then its fields in the flexible encoding (both by ``protocol/coordinator_records.py``
from Kafka's schemas). A null value is a tombstone.

=====  ====================================  =================================================
type   key                                   value (version 0)
=====  ====================================  =================================================
10     ShareGroupMemberMetadata: group,      rackId (nullable), clientId, clientHost,
       member                                subscribedTopicNames
11     ShareGroupMetadata: group             epoch int32, metadataHash int64
12     ShareGroupTargetAssignmentMetadata    assignmentEpoch int32 (+ tag 0 assignmentTimestamp)
13     ShareGroupTargetAssignmentMember      topicPartitions [topicId, partitions]
14     ShareGroupCurrentMemberAssignment     memberEpoch, previousMemberEpoch, state int8,
                                             assignedPartitions [topicId, partitions]
15     ShareGroupStatePartitionMetadata      initializingTopics, initializedTopics
                                             [topicId, topicName, partitions], deletingTopics
                                             [topicId, topicName]
=====  ====================================  =================================================

The coordinator's state is written as the difference between what it is and what was last
written (``GroupView``), in the order Kafka's shareGroupHeartbeat writes it: a removed member's
tombstones, member metadata, the group epoch, target assignment, current assignments, then the
initialized share-partitions. metadataHash is written 0 (as the consumer group records here).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from kafka_sidecar.protocol.coordinator_records import decode_value, encode_value, record_type

from ..groups.records import decode_group_key, group_record_key

SHARE_GROUP_MEMBER_METADATA = 10
SHARE_GROUP_METADATA = 11
SHARE_GROUP_TARGET_ASSIGNMENT_METADATA = 12
SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER = 13
SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT = 14
SHARE_GROUP_STATE_PARTITION_METADATA = 15
SHARE_GROUP_RECORD_TYPES = frozenset(range(10, 16))
_WITH_MEMBER = frozenset({SHARE_GROUP_MEMBER_METADATA, SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER, SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT})
# Kafka's MemberState.STABLE: a share group member is always stable (no revocation).
STABLE_STATE = 0


Record = tuple[bytes, bytes | None]
# topic id -> sorted partitions, as the records carry them
Assignment = tuple[tuple[uuid.UUID, tuple[int, ...]], ...]


def is_share_group_record(key: bytes) -> bool:
    return len(key) >= 2 and record_type(key) in SHARE_GROUP_RECORD_TYPES


# ---- keys ------------------------------------------------------------------------------------


def share_key(record_type: int, group: str, member: str | None = None) -> bytes:
    return group_record_key(record_type, group, (member or "") if record_type in _WITH_MEMBER else None)


@dataclass(frozen=True)
class ShareGroupKey:
    record_type: int
    group: str
    member: str | None = None


def decode_share_key(key: bytes) -> ShareGroupKey | None:
    kind = record_type(key)
    if kind not in SHARE_GROUP_RECORD_TYPES:
        return None
    k = decode_group_key(key)
    return ShareGroupKey(kind, k["GroupId"], k.get("MemberId"))


# ---- values ----------------------------------------------------------------------------------


def _assignment(parts: Assignment) -> list[dict]:
    return [{"TopicId": t, "Partitions": list(ps)} for t, ps in parts]


def member_metadata_value(rack_id: str | None, client_id: str, client_host: str, topics: tuple[str, ...]) -> bytes:
    return encode_value("ShareGroupMemberMetadataValue", {
        "RackId": rack_id, "ClientId": client_id, "ClientHost": client_host, "SubscribedTopicNames": list(topics)}, 0)


def group_metadata_value(epoch: int, metadata_hash: int = 0) -> bytes:
    return encode_value("ShareGroupMetadataValue", {"Epoch": epoch, "MetadataHash": metadata_hash}, 0)


def target_assignment_metadata_value(epoch: int, timestamp_ms: int) -> bytes:
    return encode_value("ShareGroupTargetAssignmentMetadataValue",
                        {"AssignmentEpoch": epoch, "AssignmentTimestamp": timestamp_ms}, 0)


def target_assignment_member_value(parts: Assignment) -> bytes:
    return encode_value("ShareGroupTargetAssignmentMemberValue", {"TopicPartitions": _assignment(parts)}, 0)


def current_assignment_value(epoch: int, previous_epoch: int, parts: Assignment) -> bytes:
    return encode_value("ShareGroupCurrentMemberAssignmentValue", {
        "MemberEpoch": epoch, "PreviousMemberEpoch": previous_epoch, "State": STABLE_STATE,
        "AssignedPartitions": _assignment(parts)}, 0)


def state_partition_metadata_value(initialized: tuple[tuple[uuid.UUID, str, tuple[int, ...]], ...]) -> bytes:
    """No topic initializing (the state is written at once here) nor being deleted."""
    return encode_value("ShareGroupStatePartitionMetadataValue", {
        "InitializingTopics": [], "DeletingTopics": [],
        "InitializedTopics": [{"TopicId": t, "TopicName": name, "Partitions": list(ps)} for t, name, ps in initialized]}, 0)


def _read_assignment(topics: list[dict]) -> Assignment:
    return tuple((t["TopicId"], tuple(t["Partitions"])) for t in topics)


def decode_member_metadata_value(value: bytes) -> tuple[str | None, str, str, tuple[str, ...]]:
    v = decode_value("ShareGroupMemberMetadataValue", value)[1]
    return v["RackId"], v["ClientId"], v["ClientHost"], tuple(v["SubscribedTopicNames"])


def decode_epoch_value(value: bytes) -> int:
    """ShareGroupMetadataValue: the group epoch."""
    return decode_value("ShareGroupMetadataValue", value)[1]["Epoch"]


def decode_target_assignment_metadata_value(value: bytes) -> tuple[int, int]:
    """(assignment epoch, assignment timestamp)."""
    v = decode_value("ShareGroupTargetAssignmentMetadataValue", value)[1]
    return v["AssignmentEpoch"], v["AssignmentTimestamp"]


def decode_target_assignment_member_value(value: bytes) -> Assignment:
    return _read_assignment(decode_value("ShareGroupTargetAssignmentMemberValue", value)[1]["TopicPartitions"])


def decode_current_assignment_value(value: bytes) -> tuple[int, int, Assignment]:
    v = decode_value("ShareGroupCurrentMemberAssignmentValue", value)[1]  # State: always stable
    return v["MemberEpoch"], v["PreviousMemberEpoch"], _read_assignment(v["AssignedPartitions"])


def decode_state_partition_metadata_value(value: bytes) -> set[tuple[uuid.UUID, int]]:
    """The initialized share-partitions (initializing ones too: their state was being written)."""
    v = decode_value("ShareGroupStatePartitionMetadataValue", value)[1]
    return {(t["TopicId"], p) for t in v["InitializingTopics"] + v["InitializedTopics"] for p in t["Partitions"]}


# ---- the state as written ----------------------------------------------------------------------


def assignment_of(parts: dict[uuid.UUID, list[int]]) -> Assignment:
    return tuple((t, tuple(sorted(ps))) for t, ps in sorted(parts.items(), key=lambda kv: str(kv[0])))


@dataclass(frozen=True)
class MemberView:
    metadata: tuple[str | None, str, str, tuple[str, ...]]
    target: Assignment
    current: tuple[int, int, Assignment]


@dataclass
class GroupView:
    """What was last written of a share group (or replayed): the records are the difference."""

    group_epoch: int = 0
    assignment_epoch: int = 0
    assignment_timestamp_ms: int = 0
    members: dict[str, MemberView] = field(default_factory=dict)
    initialized: tuple[tuple[uuid.UUID, str, tuple[int, ...]], ...] = ()


def diff_records(group_id: str, before: GroupView | None, after: GroupView) -> list[Record]:
    """The records that take what was written from ``before`` to ``after``."""
    old = before or GroupView(group_epoch=-1, assignment_epoch=-1)
    out: list[Record] = []
    for mid in old.members:
        if mid not in after.members:
            out += [(share_key(SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT, group_id, mid), None),
                    (share_key(SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER, group_id, mid), None),
                    (share_key(SHARE_GROUP_MEMBER_METADATA, group_id, mid), None)]
    for mid, m in after.members.items():
        was = old.members.get(mid)
        if was is None or was.metadata != m.metadata:
            out.append((share_key(SHARE_GROUP_MEMBER_METADATA, group_id, mid), member_metadata_value(*m.metadata)))
    if after.group_epoch != old.group_epoch:
        out.append((share_key(SHARE_GROUP_METADATA, group_id), group_metadata_value(after.group_epoch)))
    for mid, m in after.members.items():
        was = old.members.get(mid)
        if was is None or was.target != m.target:
            out.append((share_key(SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER, group_id, mid), target_assignment_member_value(m.target)))
    if after.assignment_epoch != old.assignment_epoch:
        out.append((share_key(SHARE_GROUP_TARGET_ASSIGNMENT_METADATA, group_id),
                    target_assignment_metadata_value(after.assignment_epoch, after.assignment_timestamp_ms)))
    for mid, m in after.members.items():
        was = old.members.get(mid)
        if was is None or was.current != m.current:
            out.append((share_key(SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT, group_id, mid), current_assignment_value(*m.current)))
    if after.initialized != old.initialized and (before is not None or after.initialized):
        out.append((share_key(SHARE_GROUP_STATE_PARTITION_METADATA, group_id), state_partition_metadata_value(after.initialized)))
    return out


def tombstones(group_id: str, before: GroupView) -> list[Record]:
    """A deleted group's tombstones, in the order of Kafka's ShareGroup.createGroupTombstoneRecords
    (the share-partition state metadata last)."""
    out: list[Record] = []
    out += [(share_key(SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT, group_id, mid), None) for mid in before.members]
    out += [(share_key(SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER, group_id, mid), None) for mid in before.members]
    out.append((share_key(SHARE_GROUP_TARGET_ASSIGNMENT_METADATA, group_id), None))
    out += [(share_key(SHARE_GROUP_MEMBER_METADATA, group_id, mid), None) for mid in before.members]
    out.append((share_key(SHARE_GROUP_METADATA, group_id), None))
    out.append((share_key(SHARE_GROUP_STATE_PARTITION_METADATA, group_id), None))
    return out
