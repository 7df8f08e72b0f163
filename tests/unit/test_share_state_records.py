"""__share_group_state records (server/share/records.py) in Kafka's formats, and the durable
view of a share-partition (server/share/persister.py): what a restart brings back."""

from __future__ import annotations

import uuid

from kafka_sidecar.server.share.partition import AcknowledgeType, RecordState, SharePartition
from kafka_sidecar.server.share.persister import persisted_state
from kafka_sidecar.server.share.records import (
    SHARE_SNAPSHOT_TYPE,
    SHARE_UPDATE_TYPE,
    ShareStateValue,
    StateBatch,
    decode_share_key,
    decode_value,
    kafka_uuid_string,
    partition_for,
    share_key,
    snapshot_value,
    update_value,
)

TOPIC_ID = uuid.UUID("0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9")


def test_key_layout_is_kafkas() -> None:
    key = share_key(SHARE_SNAPSHOT_TYPE, "g", TOPIC_ID, 7)
    # int16 record type 0, GroupId as int16-length string, 16 uuid bytes, int32 partition.
    assert key == b"\x00\x00" + b"\x00\x01g" + TOPIC_ID.bytes + b"\x00\x00\x00\x07"
    assert decode_share_key(key) == (SHARE_SNAPSHOT_TYPE, "g", TOPIC_ID, 7)
    assert decode_share_key(share_key(SHARE_UPDATE_TYPE, "g", TOPIC_ID, 7))[0] == SHARE_UPDATE_TYPE
    assert decode_share_key(b"\x00\x05\x00\x01g") is None  # a key of another coordinator


def test_snapshot_value_layout_and_round_trip() -> None:
    v = ShareStateValue(3, 0, 10, [StateBatch(10, 12, 2, 1), StateBatch(13, 13, 0, 2)], 1, 1000, 2000)
    raw = snapshot_value(v)
    # version, SnapshotEpoch, StateEpoch, LeaderEpoch, StartOffset, Create/WriteTimestamp,
    # compact array of 2 (3), each batch 8+8+1+2 bytes and an empty tagged-field section, no tags.
    assert raw[:2] == b"\x00\x00" and raw[2:6] == b"\x00\x00\x00\x03" and raw[6:10] == b"\x00\x00\x00\x01"
    assert raw[38] == 3 and len(raw) == 39 + 2 * 20 + 1
    assert decode_value(SHARE_SNAPSHOT_TYPE, raw) == v
    with_count = ShareStateValue(3, 0, 10, [], delivery_complete_count=4)
    assert decode_value(SHARE_UPDATE_TYPE, update_value(with_count)) == with_count
    assert update_value(with_count).endswith(b"\x01\x00\x04\x00\x00\x00\x04")  # tag 0, 4 bytes


def test_partition_for_uses_kafkas_coordinator_key() -> None:
    assert kafka_uuid_string(TOPIC_ID) == "ChssPU5fYHGCk6S1xtfo-Q"
    assert 0 <= partition_for("g", TOPIC_ID, 0, 50) < 50
    assert partition_for("g", TOPIC_ID, 0, 1) == 0


def test_persisted_view_keeps_acks_and_counts_not_acquisitions() -> None:
    sp = SharePartition(0, lock_duration_ms=1000, delivery_count_limit=5)
    sp.acquire("a", [(0, 9)], 100, now_ms=0)
    # Nothing acknowledged yet: an acquisition alone is not durable.
    assert persisted_state(sp) == (0, ())
    sp.acknowledge("a", 0, 1, [int(AcknowledgeType.ACCEPT)], now_ms=1)
    sp.acknowledge("a", 4, 4, [int(AcknowledgeType.ACCEPT)], now_ms=1)
    sp.acknowledge("a", 5, 6, [int(AcknowledgeType.RELEASE)], now_ms=1)
    sp.acknowledge("a", 7, 7, [int(AcknowledgeType.REJECT)], now_ms=1)
    assert persisted_state(sp) == (2, (StateBatch(4, 4, 2, 1), StateBatch(5, 6, 0, 1), StateBatch(7, 7, 4, 1)))
    # 5-6 delivered again: still written as delivered once until acknowledged or released.
    sp.acquire("b", [(5, 6)], 100, now_ms=2)
    assert sp.state_of(5) == RecordState.ACQUIRED
    assert persisted_state(sp)[1][1] == StateBatch(5, 6, 0, 1)
