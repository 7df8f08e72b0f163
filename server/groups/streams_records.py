"""The ``__consumer_offsets`` records of streams groups (KIP-1071), in Kafka 4.3.1's formats.

Keys as the other group records (record type int16, then group [and member], not flexible);
values: version 0 int16, then the flexible fields; both by ``protocol/coordinator_records.py``
from Kafka's schemas. Checked byte for byte against the classes of
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

from dataclasses import dataclass, replace

from kafka_sidecar.protocol.coordinator_records import decode_value, encode_value, record_type

from .records import decode_group_key, group_record_key
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



@dataclass(frozen=True)
class StreamsGroupKey:
    record_type: int
    group: str
    member: str | None = None


def streams_key(record_type: int, group: str, member: str | None = None) -> bytes:
    return group_record_key(record_type, group, (member or "") if record_type in _WITH_MEMBER else None)


def decode_streams_key(key: bytes) -> StreamsGroupKey | None:
    kind = record_type(key)
    if kind not in STREAMS_RECORD_TYPES:
        return None
    k = decode_group_key(key)
    return StreamsGroupKey(kind, k["GroupId"], k.get("MemberId"))


# ---- encoding ---------------------------------------------------------------------------------

def _kv(pairs: list[tuple[str, str]], key: str = "Key", value: str = "Value") -> list[dict]:
    return [{key: k, value: v} for k, v in pairs]


def group_metadata_value(epoch: int, metadata_hash: int, validated_topology_epoch: int, configs: dict[str, str]) -> bytes:
    return encode_value("StreamsGroupMetadataValue", {
        "Epoch": epoch, "MetadataHash": metadata_hash, "ValidatedTopologyEpoch": validated_topology_epoch,
        "LastAssignmentConfigs": _kv(sorted(configs.items())) if configs else None}, 0)


def member_metadata_value(m: StreamsGroupMember) -> bytes:
    endpoint = None if m.user_endpoint is None else {"Host": m.user_endpoint[0], "Port": m.user_endpoint[1]}
    return encode_value("StreamsGroupMemberMetadataValue", {
        "InstanceId": m.instance_id, "RackId": m.rack_id, "ClientId": m.client_id, "ClientHost": m.client_host,
        "RebalanceTimeoutMs": m.rebalance_timeout_ms, "TopologyEpoch": m.topology_epoch, "ProcessId": m.process_id,
        "UserEndpoint": endpoint, "ClientTags": _kv(list(m.client_tags))}, 0)


def target_assignment_metadata_value(epoch: int, timestamp_ms: int) -> bytes:
    return encode_value("StreamsGroupTargetAssignmentMetadataValue",
                        {"AssignmentEpoch": epoch, "AssignmentTimestamp": timestamp_ms}, 0)


def _task_ids(tasks: Tasks, epochs: dict[tuple[str, int], int] | None = None) -> list[dict]:
    out = []
    for sub, parts in task_list(tasks):
        t: dict = {"SubtopologyId": sub, "Partitions": list(parts)}
        if epochs is not None:
            t["AssignmentEpochs"] = [epochs.get((sub, p), 0) for p in parts]
        out.append(t)
    return out


def target_assignment_member_value(t: TasksTuple) -> bytes:
    return encode_value("StreamsGroupTargetAssignmentMemberValue", {
        "ActiveTasks": _task_ids(t.active), "StandbyTasks": _task_ids(t.standby), "WarmupTasks": _task_ids(t.warmup)}, 0)


def current_assignment_value(m: StreamsGroupMember) -> bytes:
    a, p = m.assigned, m.pending_revocation
    return encode_value("StreamsGroupCurrentMemberAssignmentValue", {
        "MemberEpoch": m.member_epoch, "PreviousMemberEpoch": m.previous_member_epoch, "State": int(m.state),
        "ActiveTasks": _task_ids(a.active, m.active_epochs), "StandbyTasks": _task_ids(a.standby),
        "WarmupTasks": _task_ids(a.warmup), "ActiveTasksPendingRevocation": _task_ids(p.active),
        "StandbyTasksPendingRevocation": _task_ids(p.standby), "WarmupTasksPendingRevocation": _task_ids(p.warmup)}, 0)


def _topic_info(i: TopicInfo) -> dict:
    return {"Name": i.name, "Partitions": i.partitions, "ReplicationFactor": i.replication_factor,
            "TopicConfigs": _kv(list(i.configs), "key", "value")}


def topology_value(t: StreamsTopology) -> bytes:
    subs = [{
        "SubtopologyId": s.subtopology_id, "SourceTopics": list(s.source_topics), "SourceTopicRegex": list(s.source_topic_regex),
        "StateChangelogTopics": [_topic_info(i) for i in s.state_changelog_topics],
        "RepartitionSinkTopics": list(s.repartition_sink_topics),
        "RepartitionSourceTopics": [_topic_info(i) for i in s.repartition_source_topics],
        "CopartitionGroups": [{"SourceTopics": list(a), "SourceTopicRegex": list(b), "RepartitionSourceTopics": list(c)}
                              for a, b, c in s.copartition_groups],
    } for s in t.subtopologies]
    return encode_value("StreamsGroupTopologyValue", {"Epoch": t.epoch, "Subtopologies": subs}, 0)


# ---- decoding ---------------------------------------------------------------------------------

def _pairs(items: list[dict], key: str = "Key", value: str = "Value") -> list[tuple[str, str]]:
    return [(i[key], i[value]) for i in items]


def decode_group_metadata_value(value: bytes) -> tuple[int, int, int, dict[str, str]]:
    v = decode_value("StreamsGroupMetadataValue", value)[1]
    return v["Epoch"], v["MetadataHash"], v["ValidatedTopologyEpoch"], dict(_pairs(v["LastAssignmentConfigs"] or []))


def decode_member_metadata_value(member: StreamsGroupMember, value: bytes) -> StreamsGroupMember:
    v = decode_value("StreamsGroupMemberMetadataValue", value)[1]
    e = v["UserEndpoint"]
    return replace(member, instance_id=v["InstanceId"], rack_id=v["RackId"], client_id=v["ClientId"],
                   client_host=v["ClientHost"], rebalance_timeout_ms=v["RebalanceTimeoutMs"],
                   topology_epoch=v["TopologyEpoch"], process_id=v["ProcessId"],
                   user_endpoint=None if e is None else (e["Host"], e["Port"]), client_tags=tuple(_pairs(v["ClientTags"])))


def decode_target_assignment_metadata_value(value: bytes) -> tuple[int, int]:
    v = decode_value("StreamsGroupTargetAssignmentMetadataValue", value)[1]
    return v["AssignmentEpoch"], v["AssignmentTimestamp"]


def _read_task_ids(tasks: list[dict], epochs: dict[tuple[str, int], int] | None = None) -> Tasks:
    out: dict[str, frozenset[int]] = {}
    for t in tasks:
        sub, parts = t["SubtopologyId"], t["Partitions"]
        if epochs is not None and t.get("AssignmentEpochs") is not None:
            for p, e in zip(parts, t["AssignmentEpochs"], strict=False):
                epochs[(sub, p)] = e
        if parts:
            out[sub] = frozenset(parts)
    return out


def decode_target_assignment_member_value(value: bytes) -> TasksTuple:
    v = decode_value("StreamsGroupTargetAssignmentMemberValue", value)[1]
    return TasksTuple(_read_task_ids(v["ActiveTasks"]), _read_task_ids(v["StandbyTasks"]), _read_task_ids(v["WarmupTasks"]))


def decode_current_assignment_value(member: StreamsGroupMember, value: bytes) -> StreamsGroupMember:
    v = decode_value("StreamsGroupCurrentMemberAssignmentValue", value)[1]
    raw = v["State"]
    state = MemberState(raw) if raw in MemberState._value2member_map_ else MemberState.UNKNOWN
    epochs: dict[tuple[str, int], int] = {}
    assigned = TasksTuple(_read_task_ids(v["ActiveTasks"], epochs), _read_task_ids(v["StandbyTasks"]),
                          _read_task_ids(v["WarmupTasks"]))
    pending = TasksTuple(_read_task_ids(v["ActiveTasksPendingRevocation"]), _read_task_ids(v["StandbyTasksPendingRevocation"]),
                         _read_task_ids(v["WarmupTasksPendingRevocation"]))
    return replace(member, member_epoch=v["MemberEpoch"], previous_member_epoch=v["PreviousMemberEpoch"], state=state,
                   assigned=assigned, pending_revocation=pending, active_epochs=epochs)


def _read_topic_info(i: dict) -> TopicInfo:
    return TopicInfo(i["Name"], i["Partitions"], i["ReplicationFactor"], tuple(_pairs(i["TopicConfigs"], "key", "value")))


def decode_topology_value(value: bytes) -> StreamsTopology:
    v = decode_value("StreamsGroupTopologyValue", value)[1]
    subs = tuple(Subtopology(
        s["SubtopologyId"], tuple(s["SourceTopics"]), tuple(s["SourceTopicRegex"]),
        tuple(_read_topic_info(i) for i in s["StateChangelogTopics"]), tuple(s["RepartitionSinkTopics"]),
        tuple(_read_topic_info(i) for i in s["RepartitionSourceTopics"]),
        tuple((tuple(g["SourceTopics"]), tuple(g["SourceTopicRegex"]), tuple(g["RepartitionSourceTopics"]))
              for g in s["CopartitionGroups"]),
    ) for s in v["Subtopologies"])
    return StreamsTopology(v["Epoch"], subs)
