"""Records of the internal topic ``__consumer_offsets``, in Kafka's exact formats.

Keys and values are Kafka's coordinator records, encoded by the one schema-driven codec
(``protocol/coordinator_records.py`` over Kafka's JSON schemas): the key's int16 record type
(0/1 OffsetCommitKey, 2 GroupMetadataKey) or the value's int16 version, then the struct. This
module maps them to the classic group coordinator's types and picks the versions Kafka writes:
``OffsetCommitValue`` v3 (v1 when the commit carried a retention time: the only version with
an expire timestamp), ``GroupMetadataValue`` v3; every valid version is read.

A tombstone is a record with a null value. Batches are written the way Kafka's
coordinator runtime writes them: magic 2, no producer id (-1/-1), base sequence
0, CreateTime = the write time, one batch per coordinator write.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

from kafka_sidecar.protocol.coordinator_records import (
    RecordFormatError,
    decode_value,
    encode_key,
    encode_value,
    record_type,
)
from kafka_sidecar.protocol.coordinator_records import decode_key as _decode_key
from kafka_sidecar.protocol.record_batch import CONTROL_MASK
from kafka_sidecar.protocol.records import decode_records, iter_batches
from kafka_sidecar.protocol.topic import OFFSETS_TOPIC  # noqa: F401 (re-exported: the group modules import it from here)
from kafka_sidecar.protocol.varint import VarintError, read_uvarint

from ..coordinator.batches import build_batch  # noqa: F401 (re-exported: tests and the share persister import it from here)

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRE = 1
GROUP_METADATA_VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


# ---------------------------------------------------------------- java hashing


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units), as a signed int32."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions``."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


# ------------------------------------------------------------------- values


@dataclass
class OffsetAndMetadata:
    """A committed offset (Kafka's OffsetAndMetadata)."""

    offset: int
    leader_epoch: int  # -1 = none
    metadata: str
    commit_timestamp: int
    expire_timestamp: int | None = None  # only from OffsetCommit v2-v4 with a retention time
    record_offset: int = -1  # offset of the record in __consumer_offsets


@dataclass
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: list[MemberMetadata] = field(default_factory=list)


@dataclass(frozen=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupMetadataKey:
    group: str


# ------------------------------------------------------------------- writers


def _string(s: str) -> bytes:
    b = s.encode("utf-8")
    return _I16.pack(len(b)) + b


def group_record_key(record_type: int, group: str, member: str | None = None) -> bytes:
    """The key of a group coordinator record (non-flexible): its type, the group id, and the
    member id for the per-member record types (``member`` None: none in the key)."""
    out = _I16.pack(record_type) + _string(group)
    return out if member is None else out + _string(member)


def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    return encode_key("OffsetCommitKey", {"group": group, "topic": topic, "partition": partition})


def group_metadata_key(group: str) -> bytes:
    return encode_key("GroupMetadataKey", {"group": group})


def offset_commit_value(o: OffsetAndMetadata) -> bytes:
    """Version 3, or version 1 (the only one with an expire timestamp) when the commit carried a
    retention time, as Kafka's OffsetCommitValue choice."""
    if o.expire_timestamp is not None:
        return encode_value("OffsetCommitValue", {
            "offset": o.offset, "metadata": o.metadata, "commitTimestamp": o.commit_timestamp,
            "expireTimestamp": o.expire_timestamp}, OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRE)
    return encode_value("OffsetCommitValue", {
        "offset": o.offset, "leaderEpoch": o.leader_epoch, "metadata": o.metadata,
        "commitTimestamp": o.commit_timestamp}, OFFSET_COMMIT_VALUE_VERSION)


def group_metadata_value(v: GroupMetadataValue) -> bytes:
    return encode_value("GroupMetadataValue", {
        "protocolType": v.protocol_type, "generation": v.generation, "protocol": v.protocol,
        "leader": v.leader, "currentStateTimestamp": v.current_state_timestamp,
        "members": [{
            "memberId": m.member_id, "groupInstanceId": m.group_instance_id, "clientId": m.client_id,
            "clientHost": m.client_host, "rebalanceTimeout": m.rebalance_timeout,
            "sessionTimeout": m.session_timeout, "subscription": m.subscription, "assignment": m.assignment,
        } for m in v.members],
    }, GROUP_METADATA_VALUE_VERSION)


# ------------------------------------------------------------------- readers


class _Reader:
    __slots__ = ("buf", "pos", "flexible")

    def __init__(self, buf: bytes, pos: int = 0, flexible: bool = False) -> None:
        self.buf = buf
        self.pos = pos
        self.flexible = flexible

    def _take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.buf):
            raise RecordFormatError(f"truncated record: need {n} bytes at {self.pos} of {len(self.buf)}")
        b = self.buf[self.pos : end]
        self.pos = end
        return b

    def i16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def i32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def i64(self) -> int:
        return _I64.unpack(self._take(8))[0]

    def uvarint(self) -> int:
        try:
            value, self.pos = read_uvarint(self.buf, self.pos, -1, 10)
        except VarintError as e:
            raise RecordFormatError(f"truncated record: {e}" if isinstance(e, IndexError) else str(e)) from None
        return value

    def nullable_string(self) -> str | None:
        n = self.uvarint() - 1 if self.flexible else self.i16()
        if n < 0:
            return None
        return self._take(n).decode("utf-8")

    def string(self) -> str:
        s = self.nullable_string()
        if s is None:
            raise RecordFormatError("null where a string is required")
        return s

    def bytes_(self) -> bytes:
        n = self.uvarint() - 1 if self.flexible else self.i32()
        if n < 0:
            raise RecordFormatError("null where bytes are required")
        return bytes(self._take(n))

    def array_len(self) -> int:
        n = self.uvarint() - 1 if self.flexible else self.i32()
        return max(n, 0)

    def tagged_fields(self) -> None:
        if self.flexible:
            for _ in range(self.uvarint()):
                self.uvarint()
                self._take(self.uvarint())


def flexible_value_reader(value: bytes, what: str) -> _Reader:
    """A reader past the version of a flexible v0 record value (KIP-848 and share group records)."""
    r = _Reader(value)
    version = r.i16()
    if version != 0:
        raise RecordFormatError(f"unknown {what} record value version {version}")
    r.flexible = True
    return r


def decode_key(key: bytes) -> OffsetCommitKey | GroupMetadataKey | None:
    """The key of a __consumer_offsets record; None for record types this broker does not use."""
    kind = record_type(key)
    if kind in (0, 1):  # LegacyOffsetCommitKey and OffsetCommitKey share one layout
        k = _decode_key("OffsetCommitKey", key)
        return OffsetCommitKey(k["group"], k["topic"], k["partition"])
    if kind == 2:
        return GroupMetadataKey(_decode_key("GroupMetadataKey", key)["group"])
    return None  # consumer/share/streams group records (KIP-848 and later)


def decode_offset_commit_value(value: bytes, record_offset: int = -1) -> OffsetAndMetadata:
    _version, v = decode_value("OffsetCommitValue", value)
    expire_ts = v["expireTimestamp"]
    return OffsetAndMetadata(v["offset"], v["leaderEpoch"], v["metadata"], v["commitTimestamp"],
                             None if expire_ts == -1 else expire_ts, record_offset)


def decode_group_metadata_value(value: bytes) -> GroupMetadataValue:
    _version, v = decode_value("GroupMetadataValue", value)
    members = []
    for m in v["members"]:
        rebalance_timeout = m["rebalanceTimeout"]
        if rebalance_timeout == -1:
            rebalance_timeout = m["sessionTimeout"]  # v0 has no rebalance timeout: Kafka uses the session timeout
        members.append(MemberMetadata(m["memberId"], m["groupInstanceId"], m["clientId"], m["clientHost"],
                                      rebalance_timeout, m["sessionTimeout"], m["subscription"], m["assignment"]))
    return GroupMetadataValue(v["protocolType"], v["generation"], v["protocol"], v["leader"],
                              v["currentStateTimestamp"], members)


def consumer_protocol_topics(metadata: bytes) -> set[str]:
    """Topics of a ConsumerProtocolSubscription, read with the v0 layout that prefixes every version."""
    r = _Reader(metadata)
    r.i16()  # version
    return {r.string() for _ in range(r.array_len())}


# ------------------------------------------------------------------- batches


def iter_records(data: bytes) -> Iterator[tuple[int, int, bytes | None, bytes | None]]:
    """(offset, producer id, key, value) of each data record in the complete batches of ``data``.

    Control batches are skipped. Batches are read by ``protocol.records`` (Kafka's rules,
    CorruptRecordError on a malformed one) without a CRC check, as Kafka's coordinator
    loader reads its log; the records of a batch are yielded once the whole batch decoded.
    """
    for pos, h in iter_batches(data, verify_crc=False):
        if h.attributes & CONTROL_MASK:
            continue
        offsets: list[int] = []
        keys: list[bytes | None] = []
        values: list[bytes | None] = []
        decode_records(data, pos, h, offsets, [], keys, values, [])
        producer_id = h.producer_id
        for offset, key, value in zip(offsets, keys, values, strict=True):
            yield offset, producer_id, key, value
