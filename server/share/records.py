"""Records of ``__share_group_state`` in Kafka's formats (apache/kafka share-coordinator
``common/message/ShareSnapshot{Key,Value}.json`` and ``ShareUpdate{Key,Value}.json``).

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
import struct
import uuid
from dataclasses import dataclass, field

from kafka_sidecar.protocol.records import encode_uvarint
from kafka_sidecar.protocol.topic import SHARE_GROUP_STATE_TOPIC  # noqa: F401 (re-exported)

from ..groups.records import RecordFormatError, _Reader, java_string_hash

SHARE_SNAPSHOT_TYPE = 0
SHARE_UPDATE_TYPE = 1
NO_DELIVERY_COMPLETE_COUNT = -1

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_BATCH = struct.Struct(">qqbh")


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


def kafka_uuid_string(u: uuid.UUID) -> str:
    """Kafka's Uuid.toString(): URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def partition_for(group_id: str, topic_id: uuid.UUID, partition: int, num_partitions: int) -> int:
    """Kafka's ShareCoordinatorService.partitionFor: abs(SharePartitionKey.asCoordinatorKey()
    .hashCode()) % share.coordinator.state.topic.num.partitions, the key "group:topicId:partition"."""
    h = java_string_hash(f"{group_id}:{kafka_uuid_string(topic_id)}:{partition}")
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


def share_key(record_type: int, group_id: str, topic_id: uuid.UUID, partition: int) -> bytes:
    g = group_id.encode("utf-8")
    return _I16.pack(record_type) + _I16.pack(len(g)) + g + topic_id.bytes + _I32.pack(partition)


def decode_share_key(key: bytes) -> tuple[int, str, uuid.UUID, int] | None:
    """(record type, group id, topic id, partition), or None for a key of another coordinator."""
    r = _Reader(key)
    record_type = r.i16()
    if record_type not in (SHARE_SNAPSHOT_TYPE, SHARE_UPDATE_TYPE):
        return None
    group_id = r.string()
    topic_id = uuid.UUID(bytes=r._take(16))
    return record_type, group_id, topic_id, r.i32()


def _batches(batches: list[StateBatch]) -> bytes:
    # Each StateBatch is a flexible struct: its fields, then no tagged fields.
    return encode_uvarint(len(batches) + 1) + b"".join(
        _BATCH.pack(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) + b"\x00" for b in batches)


def _tagged(delivery_complete_count: int) -> bytes:
    if delivery_complete_count == NO_DELIVERY_COMPLETE_COUNT:
        return b"\x00"
    return b"\x01\x00\x04" + _I32.pack(delivery_complete_count)


def snapshot_value(v: ShareStateValue) -> bytes:
    return b"".join([
        _I16.pack(0), _I32.pack(v.snapshot_epoch), _I32.pack(v.state_epoch), _I32.pack(v.leader_epoch),
        _I64.pack(v.start_offset), _I64.pack(v.create_timestamp), _I64.pack(v.write_timestamp),
        _batches(v.state_batches), _tagged(v.delivery_complete_count)])


def update_value(v: ShareStateValue) -> bytes:
    return b"".join([
        _I16.pack(0), _I32.pack(v.snapshot_epoch), _I32.pack(v.leader_epoch), _I64.pack(v.start_offset),
        _batches(v.state_batches), _tagged(v.delivery_complete_count)])


def _read_tagged(r: _Reader) -> int:
    count = NO_DELIVERY_COMPLETE_COUNT
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        data = r._take(size)
        if tag == 0:
            (count,) = _I32.unpack(data)
    return count


def _read_batches(r: _Reader) -> list[StateBatch]:
    n = r.uvarint() - 1
    out = []
    for _ in range(max(n, 0)):
        first, last, state, count = _BATCH.unpack(r._take(_BATCH.size))
        _read_tagged(r)
        out.append(StateBatch(first, last, state, count))
    return out


def decode_value(record_type: int, value: bytes) -> ShareStateValue:
    r = _Reader(value)
    version = r.i16()
    if version != 0:
        raise RecordFormatError(f"unknown share state value version {version}")
    if record_type == SHARE_SNAPSHOT_TYPE:
        snapshot_epoch, state_epoch, leader_epoch = r.i32(), r.i32(), r.i32()
        start, created, written = r.i64(), r.i64(), r.i64()
        batches = _read_batches(r)
        return ShareStateValue(snapshot_epoch, leader_epoch, start, batches, state_epoch, created, written, _read_tagged(r))
    snapshot_epoch, leader_epoch, start = r.i32(), r.i32(), r.i64()
    batches = _read_batches(r)
    return ShareStateValue(snapshot_epoch, leader_epoch, start, batches, delivery_complete_count=_read_tagged(r))
