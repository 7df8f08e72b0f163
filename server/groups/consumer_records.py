"""The ``__consumer_offsets`` records of consumer groups (KIP-848), in Kafka 4's formats.

A key starts with its record type as an int16 (Kafka's CoordinatorRecordType), then the key's
fields, not flexible. A value starts with its version (0) as an int16, then the value's fields
in the flexible encoding (compact strings and arrays, tagged fields). A null value is a tombstone.

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

import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace

from kafka_sidecar.protocol.records import encode_uvarint as _uvarint

from .consumer_group import (
    ClassicMemberMetadata,
    ConsumerGroupMember,
    MemberState,
    Partitions,
    ResolvedRegularExpression,
)
from .records import _Reader, _string, flexible_value_reader, group_record_key

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

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


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
    return _I16.pack(CONSUMER_GROUP_REGULAR_EXPRESSION) + _string(group) + _string(regex)


def decode_consumer_key(key: bytes) -> ConsumerGroupKey | None:
    """The key if it is a consumer group record, else None."""
    r = _Reader(key)
    record_type = r.i16()
    if record_type not in CONSUMER_GROUP_RECORD_TYPES:
        return None
    group = r.string()
    if record_type == CONSUMER_GROUP_REGULAR_EXPRESSION:
        return ConsumerGroupKey(record_type, group, regex=r.string())
    member = r.string() if record_type in _WITH_MEMBER else None
    return ConsumerGroupKey(record_type, group, member)


# ---- values (flexible, version 0) ------------------------------------------------------


def _cstring(s: str | None) -> bytes:
    if s is None:
        return b"\x00"
    b = s.encode("utf-8")
    return _uvarint(len(b) + 1) + b


def _topic_partitions(parts: Partitions, epochs: Callable[[uuid.UUID, int], int] | None = None) -> bytes:
    """[]TopicPartitions; with ``epochs``, each topic's tagged AssignmentEpochs (tag 0, KIP-1251)."""
    out = [_uvarint(len(parts) + 1)]
    for t in sorted(parts, key=str):
        ps = sorted(parts[t])
        out += [t.bytes, _uvarint(len(ps) + 1), b"".join(_I32.pack(p) for p in ps)]
        if epochs is None:
            out.append(b"\x00")
        else:
            tagged = _uvarint(len(ps) + 1) + b"".join(_I32.pack(epochs(t, p)) for p in ps)
            out += [b"\x01", b"\x00", _uvarint(len(tagged)), tagged]
    return b"".join(out)


_VERSION0 = _I16.pack(0)


def group_metadata_value(epoch: int) -> bytes:
    return _VERSION0 + _I32.pack(epoch) + b"\x00"


def target_assignment_metadata_value(epoch: int) -> bytes:
    return _VERSION0 + _I32.pack(epoch) + b"\x00"


def target_assignment_member_value(parts: Partitions) -> bytes:
    return _VERSION0 + _topic_partitions(parts) + b"\x00"


def _classic_member_metadata(c: ClassicMemberMetadata) -> bytes:
    """ClassicMemberMetadata (the member metadata's tagged field 0): session timeout, protocols."""
    out = [_I32.pack(c.session_timeout_ms), _uvarint(len(c.supported_protocols) + 1)]
    for name, metadata in c.supported_protocols:
        out += [_cstring(name), _uvarint(len(metadata) + 1), metadata, b"\x00"]
    out.append(b"\x00")
    return b"".join(out)


def member_metadata_value(m: ConsumerGroupMember) -> bytes:
    names = _uvarint(len(m.subscribed_topic_names) + 1) + b"".join(_cstring(t) for t in m.subscribed_topic_names)
    tagged = b"\x00"
    if m.classic is not None:
        classic = b"\x01" + _classic_member_metadata(m.classic)  # a nullable struct: 1 = present
        tagged = b"\x01\x00" + _uvarint(len(classic)) + classic
    return b"".join([
        _VERSION0, _cstring(m.instance_id), _cstring(m.rack_id), _cstring(m.client_id), _cstring(m.client_host),
        names, _cstring(m.subscribed_topic_regex), _I32.pack(m.rebalance_timeout_ms), _cstring(m.server_assignor), tagged,
    ])


def current_assignment_value(m: ConsumerGroupMember) -> bytes:
    return b"".join([
        _VERSION0, _I32.pack(m.member_epoch), _I32.pack(m.previous_member_epoch), struct.pack(">b", int(m.state)),
        _topic_partitions(m.assigned, m.assignment_epoch), _topic_partitions(m.pending_revocation), b"\x00",
    ])


def regex_value(resolved: ResolvedRegularExpression) -> bytes:
    """ConsumerGroupRegularExpressionValue v0: topics (sorted), version, timestamp."""
    topics = sorted(resolved.topics)
    return b"".join([_VERSION0, _uvarint(len(topics) + 1), b"".join(_cstring(t) for t in topics),
                     _I64.pack(resolved.version), _I64.pack(resolved.timestamp_ms), b"\x00"])


def decode_regex_value(value: bytes) -> ResolvedRegularExpression:
    r = _reader(value)
    topics = frozenset(r.string() for _ in range(r.array_len()))
    return ResolvedRegularExpression(topics, r.i64(), r.i64())


def _reader(value: bytes) -> _Reader:
    return flexible_value_reader(value, "consumer group")


def _read_topic_partitions(r: _Reader, epochs: dict[tuple[uuid.UUID, int], int] | None = None) -> Partitions:
    """[]TopicPartitions; each topic's AssignmentEpochs (tagged, tag 0) go into ``epochs``."""
    out: dict[uuid.UUID, frozenset[int]] = {}
    for _ in range(r.array_len()):
        t = uuid.UUID(bytes=r._take(16))
        ps = [r.i32() for _ in range(r.array_len())]
        out[t] = frozenset(ps)
        for _ in range(r.uvarint()):
            tag, size = r.uvarint(), r.uvarint()
            end = r.pos + size
            if tag == 0 and epochs is not None:
                n = r.uvarint() - 1
                for p, e in zip(ps, [r.i32() for _ in range(max(n, 0))], strict=False):
                    epochs[(t, p)] = e
            r.pos = end
    return out


def decode_epoch_value(value: bytes) -> int:
    """ConsumerGroupMetadataValue / ConsumerGroupTargetAssignmentMetadataValue: the epoch."""
    return _reader(value).i32()


def decode_target_assignment_member_value(value: bytes) -> Partitions:
    return _read_topic_partitions(_reader(value))


def decode_member_metadata_value(member: ConsumerGroupMember, value: bytes) -> ConsumerGroupMember:
    """``member`` with the metadata of the record."""
    r = _reader(value)
    instance_id = r.nullable_string()
    rack_id = r.nullable_string()
    client_id = r.string()
    client_host = r.string()
    names = tuple(r.string() for _ in range(r.array_len()))
    regex = r.nullable_string()
    rebalance_timeout = r.i32()
    assignor = r.nullable_string()
    classic = None
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        end = r.pos + size
        if tag == 0 and r.uvarint() > 0:  # a nullable struct: 0 = null
            session_timeout = r.i32()
            protocols = []
            for _ in range(r.array_len()):
                protocols.append((r.string(), r.bytes_()))
                r.tagged_fields()
            classic = ClassicMemberMetadata(session_timeout, tuple(protocols))
        r.pos = end
    return replace(member, instance_id=instance_id, rack_id=rack_id, client_id=client_id, client_host=client_host,
                   subscribed_topic_names=names, subscribed_topic_regex=regex, server_assignor=assignor,
                   rebalance_timeout_ms=rebalance_timeout, classic=classic)


def decode_current_assignment_value(member: ConsumerGroupMember, value: bytes) -> ConsumerGroupMember:
    """``member`` with the current assignment of the record."""
    r = _reader(value)
    epoch = r.i32()
    previous = r.i32()
    raw_state = struct.unpack(">b", r._take(1))[0]
    state = MemberState(raw_state) if raw_state in MemberState._value2member_map_ else MemberState.UNKNOWN
    epochs: dict[tuple[uuid.UUID, int], int] = {}
    assigned = _read_topic_partitions(r, epochs)
    pending = _read_topic_partitions(r)
    return replace(member, member_epoch=epoch, previous_member_epoch=previous, state=state, assigned=assigned,
                   pending_revocation=pending, assignment_epochs=epochs)
