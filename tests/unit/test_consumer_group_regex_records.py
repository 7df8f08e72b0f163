"""ConsumerGroupRegularExpression records (type 16) in Kafka 4.3.1's byte layout, and their replay."""

from __future__ import annotations

import struct

from kafka_sidecar.server.groups.consumer_group import ResolvedRegularExpression
from kafka_sidecar.server.groups.consumer_records import (
    CONSUMER_GROUP_REGULAR_EXPRESSION,
    decode_consumer_key,
    decode_regex_value,
    regex_key,
    regex_value,
)


def test_key_layout_and_decode() -> None:
    key = regex_key("g", "t-.*")
    # int16 type, then GroupId and RegularExpression as int16-length strings (keys are not flexible)
    assert key == struct.pack(">h", 16) + b"\x00\x01g" + b"\x00\x04t-.*"
    k = decode_consumer_key(key)
    assert k is not None and (k.record_type, k.group, k.regex, k.member) == (CONSUMER_GROUP_REGULAR_EXPRESSION, "g", "t-.*", None)


def test_value_layout_and_round_trip() -> None:
    resolved = ResolvedRegularExpression(frozenset({"b", "a"}), 7, 1_700_000_000_000)
    value = regex_value(resolved)
    # version 0, compact array of compact strings (sorted), int64 version, int64 timestamp, no tagged fields
    assert value == b"\x00\x00" + b"\x03" + b"\x02a" + b"\x02b" + struct.pack(">qq", 7, 1_700_000_000_000) + b"\x00"
    assert decode_regex_value(value) == resolved
    assert decode_regex_value(regex_value(ResolvedRegularExpression(frozenset(), 1, 0))).topics == frozenset()
