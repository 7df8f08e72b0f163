"""The ``__consumer_offsets`` records of streams groups (KIP-1071), in Kafka 4.3.1's formats.

Keys as the other group records (record type int16, then group [and member], not flexible);
values: version 0 int16, then the flexible fields. Checked byte for byte against the classes of
Kafka 4.3.1's group coordinator (and read back by its kafka-dump-log.sh --offsets-decoder).

=====  ================================  ===================================================
type   key                               value (version 0)
=====  ================================  ===================================================
17     StreamsGroupMetadata: group       epoch, metadataHash int64; tagged 0
                                         validatedTopologyEpoch (default -1), tagged 1
                                         lastAssignmentConfigs [key, value]
19     StreamsGroupMemberMetadata:       instanceId?, rackId?, clientId, clientHost,
       group, member                     rebalanceTimeoutMs, topologyEpoch, processId,
                                         userEndpoint? {host, port uint16}, clientTags
20     StreamsGroupTargetAssignment-     assignmentEpoch; tagged 0 assignmentTimestamp
       Metadata: group
21     StreamsGroupTargetAssignment-     activeTasks, standbyTasks, warmupTasks
       Member: group, member             ([subtopologyId, partitions])
22     StreamsGroupCurrentMember-        memberEpoch, previousMemberEpoch, state int8, the
       Assignment: group, member         three task lists then the three pending revocation;
                                         each active entry's tagged 0 assignmentEpochs
23     StreamsGroupTopology: group       epoch, subtopologies
=====  ================================  ===================================================
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, replace

from kafka_sidecar.protocol.records import encode_uvarint as _uvarint

from .records import _Reader, flexible_value_reader, group_record_key
from .streams_group import (
    MemberState,
    StreamsGroupMember,
    StreamsTopology,
    Subtopology,
    Tasks,
    TasksTuple,
    TopicInfo,
    task_list,
)

# Kafka 4.3.1's CoordinatorRecordType ids (18, StreamsGroupPartitionMetadata, is gone)
STREAMS_GROUP_METADATA = 17
STREAMS_GROUP_MEMBER_METADATA = 19
STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA = 20
STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER = 21
STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT = 22
STREAMS_GROUP_TOPOLOGY = 23
_WITH_MEMBER = (STREAMS_GROUP_MEMBER_METADATA, STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER, STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT)
STREAMS_RECORD_TYPES = frozenset({17, 19, 20, 21, 22, 23})

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_V0 = _I16.pack(0)


@dataclass(frozen=True)
class StreamsGroupKey:
    record_type: int
    group: str
    member: str | None = None


def streams_key(record_type: int, group: str, member: str | None = None) -> bytes:
    return group_record_key(record_type, group, (member or "") if record_type in _WITH_MEMBER else None)


def decode_streams_key(key: bytes) -> StreamsGroupKey | None:
    r = _Reader(key)
    record_type = r.i16()
    if record_type not in STREAMS_RECORD_TYPES:
        return None
    group = r.string()
    return StreamsGroupKey(record_type, group, r.string() if record_type in _WITH_MEMBER else None)


# ---- encoding ---------------------------------------------------------------------------------

def _cs(s: str | None) -> bytes:
    if s is None:
        return b"\x00"
    b = s.encode("utf-8")
    return _uvarint(len(b) + 1) + b


def _arr(items: list[bytes]) -> bytes:
    return _uvarint(len(items) + 1) + b"".join(items)


def _ints(values: list[int], fmt: struct.Struct = _I32) -> bytes:
    return _arr([fmt.pack(v) for v in values])


def _tagged(fields: list[tuple[int, bytes]]) -> bytes:
    return _uvarint(len(fields)) + b"".join(_uvarint(t) + _uvarint(len(v)) + v for t, v in fields)


def _kv(pairs: list[tuple[str, str]]) -> bytes:
    return _arr([_cs(k) + _cs(v) + b"\x00" for k, v in pairs])


def group_metadata_value(epoch: int, metadata_hash: int, validated_topology_epoch: int, configs: dict[str, str]) -> bytes:
    tagged = []
    if validated_topology_epoch != -1:
        tagged.append((0, _I32.pack(validated_topology_epoch)))
    if configs:
        tagged.append((1, _kv(sorted(configs.items()))))
    return _V0 + _I32.pack(epoch) + _I64.pack(metadata_hash) + _tagged(tagged)


def member_metadata_value(m: StreamsGroupMember) -> bytes:
    endpoint = b"\xff" if m.user_endpoint is None else b"\x01" + _cs(m.user_endpoint[0]) + struct.pack(">H", m.user_endpoint[1]) + b"\x00"
    return b"".join([_V0, _cs(m.instance_id), _cs(m.rack_id), _cs(m.client_id), _cs(m.client_host),
                     _I32.pack(m.rebalance_timeout_ms), _I32.pack(m.topology_epoch), _cs(m.process_id), endpoint,
                     _kv(list(m.client_tags)), b"\x00"])


def target_assignment_metadata_value(epoch: int, timestamp_ms: int) -> bytes:
    return _V0 + _I32.pack(epoch) + _tagged([(0, _I64.pack(timestamp_ms))] if timestamp_ms else [])


def _task_ids(tasks: Tasks, epochs: dict[tuple[str, int], int] | None = None) -> bytes:
    out = []
    for sub, parts in task_list(tasks):
        tagged = []
        if epochs is not None:
            tagged.append((0, _ints([epochs.get((sub, p), 0) for p in parts])))
        out.append(_cs(sub) + _ints(parts) + _tagged(tagged))
    return _arr(out)


def target_assignment_member_value(t: TasksTuple) -> bytes:
    return _V0 + _task_ids(t.active) + _task_ids(t.standby) + _task_ids(t.warmup) + b"\x00"


def current_assignment_value(m: StreamsGroupMember) -> bytes:
    a, p = m.assigned, m.pending_revocation
    return b"".join([_V0, _I32.pack(m.member_epoch), _I32.pack(m.previous_member_epoch), struct.pack(">b", int(m.state)),
                     _task_ids(a.active, m.active_epochs), _task_ids(a.standby), _task_ids(a.warmup),
                     _task_ids(p.active), _task_ids(p.standby), _task_ids(p.warmup), b"\x00"])


def _topic_info(i: TopicInfo) -> bytes:
    return _cs(i.name) + _I32.pack(i.partitions) + _I16.pack(i.replication_factor) + _kv(list(i.configs)) + b"\x00"


def topology_value(t: StreamsTopology) -> bytes:
    subs = []
    for s in t.subtopologies:
        groups = [_ints(list(a), _I16) + _ints(list(b), _I16) + _ints(list(c), _I16) + b"\x00" for a, b, c in s.copartition_groups]
        subs.append(b"".join([
            _cs(s.subtopology_id), _arr([_cs(x) for x in s.source_topics]), _arr([_cs(x) for x in s.source_topic_regex]),
            _arr([_topic_info(i) for i in s.state_changelog_topics]), _arr([_cs(x) for x in s.repartition_sink_topics]),
            _arr([_topic_info(i) for i in s.repartition_source_topics]), _arr(groups), b"\x00"]))
    return _V0 + _I32.pack(t.epoch) + _arr(subs) + b"\x00"


# ---- decoding ---------------------------------------------------------------------------------

def _reader(value: bytes) -> _Reader:
    return flexible_value_reader(value, "streams group")


def _read_tagged(r: _Reader) -> dict[int, _Reader]:
    out = {}
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        out[tag] = _Reader(r._take(size), 0, True)
    return out


def _read_kv(r: _Reader) -> list[tuple[str, str]]:
    out = []
    for _ in range(r.array_len()):
        out.append((r.string(), r.string()))
        r.tagged_fields()
    return out


def decode_group_metadata_value(value: bytes) -> tuple[int, int, int, dict[str, str]]:
    r = _reader(value)
    epoch, metadata_hash = r.i32(), r.i64()
    tagged = _read_tagged(r)
    validated = tagged[0].i32() if 0 in tagged else -1
    configs = dict(_read_kv(tagged[1])) if 1 in tagged else {}
    return epoch, metadata_hash, validated, configs


def decode_member_metadata_value(member: StreamsGroupMember, value: bytes) -> StreamsGroupMember:
    r = _reader(value)
    instance_id, rack_id, client_id, client_host = r.nullable_string(), r.nullable_string(), r.string(), r.string()
    rebalance_timeout, topology_epoch, process_id = r.i32(), r.i32(), r.string()
    endpoint = None
    if struct.unpack(">b", r._take(1))[0] >= 0:
        endpoint = (r.string(), struct.unpack(">H", r._take(2))[0])
        r.tagged_fields()
    tags = tuple(_read_kv(r))
    return replace(member, instance_id=instance_id, rack_id=rack_id, client_id=client_id, client_host=client_host,
                   rebalance_timeout_ms=rebalance_timeout, topology_epoch=topology_epoch, process_id=process_id,
                   user_endpoint=endpoint, client_tags=tags)


def decode_target_assignment_metadata_value(value: bytes) -> tuple[int, int]:
    r = _reader(value)
    epoch = r.i32()
    tagged = _read_tagged(r)
    return epoch, tagged[0].i64() if 0 in tagged else 0


def _read_task_ids(r: _Reader, epochs: dict[tuple[str, int], int] | None = None) -> Tasks:
    out: dict[str, frozenset[int]] = {}
    for _ in range(r.array_len()):
        sub = r.string()
        parts = [r.i32() for _ in range(r.array_len())]
        tagged = _read_tagged(r)
        if epochs is not None and 0 in tagged:
            t = tagged[0]
            for p, e in zip(parts, [t.i32() for _ in range(t.array_len())], strict=False):
                epochs[(sub, p)] = e
        if parts:
            out[sub] = frozenset(parts)
    return out


def decode_target_assignment_member_value(value: bytes) -> TasksTuple:
    r = _reader(value)
    return TasksTuple(_read_task_ids(r), _read_task_ids(r), _read_task_ids(r))


def decode_current_assignment_value(member: StreamsGroupMember, value: bytes) -> StreamsGroupMember:
    r = _reader(value)
    epoch, previous = r.i32(), r.i32()
    raw = struct.unpack(">b", r._take(1))[0]
    state = MemberState(raw) if raw in MemberState._value2member_map_ else MemberState.UNKNOWN
    epochs: dict[tuple[str, int], int] = {}
    assigned = TasksTuple(_read_task_ids(r, epochs), _read_task_ids(r), _read_task_ids(r))
    pending = TasksTuple(_read_task_ids(r), _read_task_ids(r), _read_task_ids(r))
    return replace(member, member_epoch=epoch, previous_member_epoch=previous, state=state, assigned=assigned,
                   pending_revocation=pending, active_epochs=epochs)


def _read_topic_info(r: _Reader) -> TopicInfo:
    info = TopicInfo(r.string(), r.i32(), r.i16(), tuple(_read_kv(r)))
    r.tagged_fields()
    return info


def decode_topology_value(value: bytes) -> StreamsTopology:
    r = _reader(value)
    epoch = r.i32()
    subs = []
    for _ in range(r.array_len()):
        sid = r.string()
        sources = tuple(r.string() for _ in range(r.array_len()))
        regex = tuple(r.string() for _ in range(r.array_len()))
        changelogs = tuple(_read_topic_info(r) for _ in range(r.array_len()))
        sinks = tuple(r.string() for _ in range(r.array_len()))
        rsources = tuple(_read_topic_info(r) for _ in range(r.array_len()))
        groups = []
        for _ in range(r.array_len()):
            a = tuple(r.i16() for _ in range(r.array_len()))
            b = tuple(r.i16() for _ in range(r.array_len()))
            c = tuple(r.i16() for _ in range(r.array_len()))
            r.tagged_fields()
            groups.append((a, b, c))
        r.tagged_fields()
        subs.append(Subtopology(sid, sources, regex, changelogs, sinks, rsources, tuple(groups)))
    return StreamsTopology(epoch, tuple(subs))
