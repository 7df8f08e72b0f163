"""The schema-driven coordinator record codec (protocol/coordinator_records.py): every schema of
Kafka 4.3.1 round-trips at every version, and bytes Kafka wrote decode to what they say."""

from __future__ import annotations

import itertools
import uuid

import pytest
from kafka_sidecar.protocol import coordinator_records as codec
from kafka_sidecar.protocol.coordinator_records import (
    Field,
    RecordFormatError,
    schema,
    schema_names,
)

_INT_RANGES = {"int8": 127, "int16": 32767, "uint16": 65535, "int32": 2**31 - 1, "int64": 2**63 - 1}


def _sample(fields: tuple[Field, ...], version: int, seed: itertools.count, null: bool) -> dict:
    """A value for every field of ``version``, none of them its default (``null``: the nullable
    ones null instead), so a field dropped or misplaced by the codec shows."""
    out = {}
    for f in fields:
        if version not in f.versions:
            continue
        n = next(seed)
        if null and version in f.nullable:
            out[f.name] = None
            continue
        out[f.name] = _one(f, f.element, version, seed, null, n) if not f.is_array else [
            _one(f, f.element, version, seed, null, n + i) for i in range(2)]
    return out


def _one(f: Field, kind: str, version: int, seed: itertools.count, null: bool, n: int):
    if kind in _INT_RANGES:
        return (n * 7919 + 3) % _INT_RANGES[kind] - (1 if kind == "int8" else 0)
    if kind == "float64":
        return n + 0.5
    if kind == "bool":
        return True
    if kind == "string":
        return f"{f.name}-{n}-é"
    if kind == "bytes":
        return bytes([n % 256]) * (n % 5 + 1)
    if kind == "uuid":
        return uuid.UUID(int=n * 0x9E3779B97F4A7C15 + 1)
    return _sample(f.fields or (), version, seed, null)


def _assert_holds(decoded, data) -> None:
    """``decoded`` has every value of ``data`` (nested structs may hold defaults besides)."""
    if isinstance(data, dict):
        for k, v in data.items():
            _assert_holds(decoded[k], v)
    elif isinstance(data, list):
        assert len(decoded) == len(data)
        for d, v in zip(decoded, data, strict=True):
            _assert_holds(d, v)
    else:
        assert decoded == data


CASES = [(name, v) for name in schema_names() for v in range(schema(name).valid.low, schema(name).valid.high + 1)]


def test_every_schema_of_the_three_coordinators_is_there():
    names = set(schema_names())
    assert len(names) == 50
    assert {"OffsetCommitKey", "OffsetCommitValue", "GroupMetadataValue", "TransactionLogValue",
            "ShareSnapshotValue", "ShareUpdateValue", "StreamsGroupTopologyValue",
            "ConsumerGroupCurrentMemberAssignmentValue", "ShareGroupStatePartitionMetadataValue"} <= names
    for name in names:  # a key and its value share the record type
        s = schema(name)
        if name.endswith("Key"):
            assert s.is_key and s.valid.high == 0 and not s.flexible.low <= 0 <= s.flexible.high
            assert schema(name[:-3] + "Value").api_key == s.api_key


@pytest.mark.parametrize(("name", "version"), CASES, ids=[f"{n}-v{v}" for n, v in CASES])
@pytest.mark.parametrize("null", [False, True], ids=["values", "nulls"])
def test_every_schema_round_trips_at_every_version(name: str, version: int, null: bool):
    s = schema(name)
    data = _sample(s.fields, version, itertools.count(1), null)
    raw = codec.encode_key(name, data) if s.is_key else codec.encode_value(name, data, version)
    assert raw[:2] == (s.api_key if s.is_key else version).to_bytes(2, "big", signed=True)
    if s.is_key:
        decoded = codec.decode_key(name, raw)
    else:
        got_version, decoded = codec.decode_value(name, raw)
        assert got_version == version
    assert set(decoded) == {f.name for f in s.fields}  # absent fields decode to their defaults
    _assert_holds(decoded, data)
    again = codec.encode_key(name, decoded) if s.is_key else codec.encode_value(name, decoded, version)
    assert again == raw
    for cut in range(2, len(raw)):  # any truncation is a RecordFormatError, never another error
        with pytest.raises(RecordFormatError):
            codec.decode_key(name, raw[:cut]) if s.is_key else codec.decode_value(name, raw[:cut])


def test_tagged_fields_are_written_only_when_not_their_default_and_unknown_tags_skipped():
    base = {"SnapshotEpoch": 1, "LeaderEpoch": 2, "StartOffset": 3, "StateBatches": []}
    plain = codec.encode_value("ShareUpdateValue", base, 0)
    assert plain.endswith(b"\x00")  # no tagged fields
    tagged = codec.encode_value("ShareUpdateValue", base | {"DeliveryCompleteCount": 9}, 0)
    assert tagged == plain[:-1] + b"\x01\x00\x04\x00\x00\x00\x09"
    # a tag this version does not know (a newer Kafka's) is skipped
    unknown = plain[:-1] + b"\x02\x00\x04\x00\x00\x00\x09\x05\x01\xff"
    assert codec.decode_value("ShareUpdateValue", unknown)[1]["DeliveryCompleteCount"] == 9


def test_kafkas_bytes_decode():
    """Bytes written by Kafka 4.1.0 (tests/unit/test_groups.py) and Kafka 4.x share state."""
    key = bytes.fromhex("0001000147000b70726f62652d746f70696300000000")
    assert codec.record_type(key) == 1
    assert codec.decode_key("OffsetCommitKey", key) == {"group": "G", "topic": "probe-topic", "partition": 0}
    value = bytes.fromhex("0004000000000000000b00000000056d657461000001a2075d232000")
    version, v = codec.decode_value("OffsetCommitValue", value)
    assert version == 4
    assert v == {"offset": 11, "leaderEpoch": 0, "metadata": "meta", "commitTimestamp": 0x1A2075D2320,
                 "expireTimestamp": -1, "topicId": uuid.UUID(int=0)}
    assert codec.encode_value("OffsetCommitValue", v, 4) == value


def test_bad_input_is_a_record_format_error():
    with pytest.raises(RecordFormatError, match="unknown OffsetCommitValue version 9"):
        codec.decode_value("OffsetCommitValue", b"\x00\x09")
    with pytest.raises(RecordFormatError, match="left over"):
        codec.decode_key("GroupMetadataKey", bytes.fromhex("0002000147") + b"\x00")
    with pytest.raises(RecordFormatError, match="null where"):
        codec.decode_key("GroupMetadataKey", bytes.fromhex("0002ffff"))
    with pytest.raises(KeyError, match="no field"):
        codec.encode_key("GroupMetadataKey", {"grup": "g"})
