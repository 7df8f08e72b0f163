"""server/share/group_records.py: the share group record types of Kafka 4.3's group coordinator
encode and decode back; the difference of two views is the records Kafka's order writes."""

from __future__ import annotations

import uuid

from kafka_sidecar.server.share import group_records as rec

T = uuid.UUID("12345678-1234-5678-1234-567812345678")


def test_keys_and_values_round_trip() -> None:
    assert rec.decode_share_key(rec.share_key(10, "g", "m")) == rec.ShareGroupKey(10, "g", "m")
    assert rec.decode_share_key(rec.share_key(11, "g")) == rec.ShareGroupKey(11, "g")
    assert rec.decode_share_key(rec.share_key(3, "g")) is None and rec.is_share_group_record(rec.share_key(15, "g"))
    assert rec.decode_member_metadata_value(rec.member_metadata_value(None, "c", "/h", ("a", "b"))) == (None, "c", "/h", ("a", "b"))
    assert rec.group_metadata_value(7) == b"\x00\x00" + (7).to_bytes(4, "big") + bytes(8) + b"\x00"
    assert rec.decode_epoch_value(rec.group_metadata_value(7)) == 7
    assert rec.decode_target_assignment_metadata_value(rec.target_assignment_metadata_value(3, 99)) == (3, 99)
    assert rec.decode_target_assignment_metadata_value(rec.target_assignment_metadata_value(3, 0)) == (3, 0)
    parts = ((T, (0, 2)),)
    assert rec.decode_target_assignment_member_value(rec.target_assignment_member_value(parts)) == parts
    assert rec.decode_current_assignment_value(rec.current_assignment_value(5, 4, parts)) == (5, 4, parts)
    value = rec.state_partition_metadata_value(((T, "t", (0, 1)),))
    assert rec.decode_state_partition_metadata_value(value) == {(T, 0), (T, 1)}


def test_diff_writes_only_what_changed_in_kafkas_order() -> None:
    member = rec.MemberView((None, "c", "/h", ("t",)), ((T, (0,)),), (2, 0, ((T, (0,)),)))
    first = rec.GroupView(2, 2, 0, {"m": member}, ((T, "t", (0,)),))
    types = [k[1] for k, _ in rec.diff_records("g", None, first)]
    assert types == [10, 11, 13, 12, 14, 15]
    assert rec.diff_records("g", first, first) == []
    left = rec.GroupView(3, 2, 0, {}, first.initialized)
    assert [(k[1], v is None) for k, v in rec.diff_records("g", first, left)] == [(14, True), (13, True), (10, True), (11, False)]
    assert [k[1] for k, _ in rec.tombstones("g", left)] == [12, 11, 15]
