"""Records of ``__share_group_state`` in Kafka's formats (its ``ShareSnapshot{Key,Value}`` and
``ShareUpdate{Key,Value}`` schemas, encoded by ``protocol/coordinator_records.py``).

A key is an int16 record type (0 ShareSnapshot, 1 ShareUpdate) followed by the key struct
(version 0, not flexible): GroupId string, TopicId uuid, Partition int32. A value is an
int16 version (0) and a flexible struct: ShareSnapshotValue = SnapshotEpoch int32,
StateEpoch int32, LeaderEpoch int32, StartOffset int64, CreateTimestamp int64,
WriteTimestamp int64, StateBatches; ShareUpdateValue = SnapshotEpoch int32, LeaderEpoch
int32, StartOffset int64 (-1: unchanged), StateBatches; both with the tagged
DeliveryCompleteCount (tag 0, default -1, KIP-1226). A StateBatch is FirstOffset int64,
LastOffset int64, DeliveryState int8 (0 available, 2 acknowledged, 4 archived),
DeliveryCount int16. A tombstone (null value) deletes the share-partition's state.
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass, field

from kafka_sidecar.protocol.coordinator_records import (
    decode_key,
    encode_key,
    encode_value,
    record_type,
)
from kafka_sidecar.protocol.coordinator_records import decode_value as _decode_value
from kafka_sidecar.protocol.topic import SHARE_GROUP_STATE_TOPIC  # noqa: F401 (re-exported)

from ..groups.records import java_string_hash

SHARE_SNAPSHOT_TYPE = 0
SHARE_UPDATE_TYPE = 1
NO_DELIVERY_COMPLETE_COUNT = -1



@dataclass(frozen=True)
class StateBatch:
    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass
class ShareStateValue:
    """A ShareSnapshotValue, or a ShareUpdateValue (no state epoch, create/write timestamps)."""

    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: list[StateBatch] = field(default_factory=list)
    state_epoch: int = 0
    create_timestamp: int = -1
    write_timestamp: int = -1
    delivery_complete_count: int = NO_DELIVERY_COMPLETE_COUNT


def kafka_uuid_string(u: uuid.UUID | None) -> str:
    """Kafka's Uuid.toString(): URL-safe base64 without padding. None is the zero id as the
    request decoder gives it (Kafka keys a share partition of topic id 0 like any other)."""
    return base64.urlsafe_b64encode(u.bytes if u is not None else bytes(16)).decode().rstrip("=")


def partition_for(group_id: str, topic_id: uuid.UUID, partition: int, num_partitions: int) -> int:
    """Kafka's ShareCoordinatorService.partitionFor: abs(SharePartitionKey.asCoordinatorKey()
    .hashCode()) % share.coordinator.state.topic.num.partitions, the key "group:topicId:partition"."""
    h = java_string_hash(f"{group_id}:{kafka_uuid_string(topic_id)}:{partition}")
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


_KEYS = {SHARE_SNAPSHOT_TYPE: "ShareSnapshotKey", SHARE_UPDATE_TYPE: "ShareUpdateKey"}


def share_key(record_type: int, group_id: str, topic_id: uuid.UUID, partition: int) -> bytes:
    return encode_key(_KEYS[record_type], {"GroupId": group_id, "TopicId": topic_id, "Partition": partition})


def decode_share_key(key: bytes) -> tuple[int, str, uuid.UUID, int] | None:
    """(record type, group id, topic id, partition), or None for a key of another coordinator."""
    kind = record_type(key)
    name = _KEYS.get(kind)
    if name is None:
        return None
    k = decode_key(name, key)
    return kind, k["GroupId"], k["TopicId"], k["Partition"]


def _batches(batches: list[StateBatch]) -> list[dict]:
    return [{"FirstOffset": b.first_offset, "LastOffset": b.last_offset, "DeliveryState": b.delivery_state,
             "DeliveryCount": b.delivery_count} for b in batches]


def snapshot_value(v: ShareStateValue) -> bytes:
    return encode_value("ShareSnapshotValue", {
        "SnapshotEpoch": v.snapshot_epoch, "StateEpoch": v.state_epoch, "LeaderEpoch": v.leader_epoch,
        "StartOffset": v.start_offset, "DeliveryCompleteCount": v.delivery_complete_count,
        "CreateTimestamp": v.create_timestamp, "WriteTimestamp": v.write_timestamp,
        "StateBatches": _batches(v.state_batches)}, 0)


def update_value(v: ShareStateValue) -> bytes:
    return encode_value("ShareUpdateValue", {
        "SnapshotEpoch": v.snapshot_epoch, "LeaderEpoch": v.leader_epoch, "StartOffset": v.start_offset,
        "DeliveryCompleteCount": v.delivery_complete_count, "StateBatches": _batches(v.state_batches)}, 0)


def decode_value(record_type: int, value: bytes) -> ShareStateValue:
    snapshot = record_type == SHARE_SNAPSHOT_TYPE
    _version, v = _decode_value("ShareSnapshotValue" if snapshot else "ShareUpdateValue", value)
    batches = [StateBatch(b["FirstOffset"], b["LastOffset"], b["DeliveryState"], b["DeliveryCount"]) for b in v["StateBatches"]]
    if snapshot:
        return ShareStateValue(v["SnapshotEpoch"], v["LeaderEpoch"], v["StartOffset"], batches, v["StateEpoch"],
                               v["CreateTimestamp"], v["WriteTimestamp"], v["DeliveryCompleteCount"])
    return ShareStateValue(v["SnapshotEpoch"], v["LeaderEpoch"], v["StartOffset"], batches,
                           delivery_complete_count=v["DeliveryCompleteCount"])
