"""What the admin APIs see of streams groups: StreamsGroupDescribe, ListGroups rows, DeleteGroups,
and the member checks of OffsetCommit/OffsetFetch (Kafka's StreamsGroup.asDescribedGroup,
validateOffsetCommit, validateOffsetFetch, validateDeleteGroup)."""

from __future__ import annotations

from kafka_sidecar.protocol import errors

from .messages import Response
from .store import Record, append_error_to_response_error
from .streams_group import (
    StreamsGroup,
    StreamsGroupMember,
    StreamsGroupState,
    Tasks,
    TasksTuple,
    TopicInfo,
    task_list,
)
from .streams_manager import STALE_MEMBER_EPOCH, StreamsGroupManager
from .streams_records import (
    STREAMS_GROUP_METADATA,
    STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA,
    STREAMS_GROUP_TOPOLOGY,
    streams_key,
)

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


def _task_ids(tasks: Tasks) -> list[Response]:
    return [{"subtopology_id": s, "partitions": ps} for s, ps in task_list(tasks)]


def _assignment(t: TasksTuple) -> Response:
    return {"active_tasks": _task_ids(t.active), "standby_tasks": _task_ids(t.standby), "warmup_tasks": _task_ids(t.warmup)}


def _topic_info(i: TopicInfo) -> Response:
    return {"name": i.name, "partitions": i.partitions, "replication_factor": i.replication_factor,
            "topic_configs": [{"key": k, "value": v} for k, v in i.configs]}


def _member(m: StreamsGroupMember, target: TasksTuple) -> Response:
    return {
        "member_id": m.member_id, "member_epoch": m.member_epoch, "instance_id": m.instance_id, "rack_id": m.rack_id,
        "client_id": m.client_id, "client_host": m.client_host, "topology_epoch": m.topology_epoch,
        "process_id": m.process_id,
        "user_endpoint": {"host": m.user_endpoint[0], "port": m.user_endpoint[1]} if m.user_endpoint else None,
        "client_tags": [{"key": k, "value": v} for k, v in m.client_tags], "task_offsets": [], "task_end_offsets": [],
        "assignment": _assignment(m.assigned), "target_assignment": _assignment(target), "is_classic": False,
    }


def _described(group: StreamsGroup) -> Response:
    topology = None
    if group.topology is not None:
        topology = {"epoch": group.topology.epoch, "subtopologies": [
            {"subtopology_id": s.subtopology_id, "source_topics": list(s.source_topics),
             "repartition_sink_topics": list(s.repartition_sink_topics),
             "state_changelog_topics": [_topic_info(i) for i in s.state_changelog_topics],
             "repartition_source_topics": [_topic_info(i) for i in s.repartition_source_topics]}
            for s in group.topology.subtopologies]}
    return {"group_state": group.state.value, "group_epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch,
            "topology": topology,
            "members": [_member(m, group.target.get(m.member_id, TasksTuple())) for m in group.members.values()]}


def describe(manager: StreamsGroupManager, group_ids: list[str]) -> list[Response]:
    out: list[Response] = []
    for gid in group_ids:
        row: Response = {"group_id": gid, "error_code": errors.NONE, "error_message": None, "group_state": "",
                         "group_epoch": 0, "assignment_epoch": 0, "topology": None, "members": [],
                         "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}
        group = manager.groups.get(gid)
        if not manager.store.active:
            row["error_code"] = errors.COORDINATOR_NOT_AVAILABLE
        elif group is None:
            exists = gid in manager.store.groups
            row.update(error_code=errors.GROUP_ID_NOT_FOUND,
                       error_message=f"Group {gid} is not a streams group." if exists else f"Group {gid} not found.")
        else:
            row.update(_described(group))
        out.append(row)
    return out


def list_rows(manager: StreamsGroupManager) -> list[Response]:
    return [{"group_id": g.group_id, "protocol_type": "streams", "group_state": g.state.value, "group_type": "streams"}
            for g in manager.groups.values()]


def delete_group(manager: StreamsGroupManager, gid: str) -> int:
    """DeleteGroups of an empty streams group: tombstones of its group records."""
    group = manager.groups.get(gid)
    if group is None:
        return errors.GROUP_ID_NOT_FOUND
    if group.members:
        return errors.NON_EMPTY_GROUP
    records: list[Record] = [(streams_key(STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA, gid), None),
                             (streams_key(STREAMS_GROUP_TOPOLOGY, gid), None),
                             (streams_key(STREAMS_GROUP_METADATA, gid), None)]
    error = manager.writer.write_and_replay(gid, records)
    manager.timer.cancel(("streams-initial-rebalance", gid))
    return append_error_to_response_error(error) if error else errors.NONE


def validate_offset_commit(manager: StreamsGroupManager, gid: str, member_id: str, member_epoch: int, api_version: int,
                           topics: list[str], transactional: bool = False) -> int:
    """Kafka's StreamsGroup.validateOffsetCommit: an admin commit (no member, epoch < 0) only into
    an empty group; a member's with its current epoch, or an older one for the tasks it had then."""
    group = manager.groups[gid]
    if member_epoch < 0 and not group.members:
        return errors.NONE
    if transactional and member_epoch == -1 and not member_id:
        return errors.NONE
    member = group.members.get(member_id)
    if member is None:
        return errors.UNKNOWN_MEMBER_ID
    if not transactional and api_version < 9:
        return errors.UNSUPPORTED_VERSION
    if member_epoch == member.member_epoch:
        return errors.NONE
    if member_epoch > member.member_epoch or group.topology is None:
        return STALE_MEMBER_EPOCH
    subs = {t: s.subtopology_id for s in group.topology.subtopologies
            for t in tuple(s.source_topics) + tuple(i.name for i in s.repartition_source_topics)}
    for topic in topics:
        if topic not in subs:
            return STALE_MEMBER_EPOCH
    # an older epoch commits only tasks it already owned then (KIP-1251's assignment epochs)
    if any(e > member_epoch for e in member.active_epochs.values()):
        return STALE_MEMBER_EPOCH
    return errors.NONE


def validate_offset_fetch(manager: StreamsGroupManager, gid: str, member_id: str, member_epoch: int) -> int:
    member = manager.groups[gid].members.get(member_id)
    if member is None:
        return errors.UNKNOWN_MEMBER_ID
    return STALE_MEMBER_EPOCH if member_epoch != member.member_epoch else errors.NONE


def streams_facade_list(manager: StreamsGroupManager, rows: list[Response], states_filter: list[str],
                        types_filter: list[str]) -> list[Response]:
    """ListGroups: a streams group's offsets live under an empty classic entry; list the streams group instead."""
    if not manager.groups:
        return rows
    states = {s.strip().lower() for s in states_filter}
    types = {t.strip().lower() for t in types_filter}
    rows = [r for r in rows if r["group_id"] not in manager.groups]
    return rows + [r for r in list_rows(manager)
                   if (not states or r["group_state"].lower() in states) and (not types or "streams" in types)]


streams_describe = describe
streams_facade_delete = delete_group
streams_validate_commit = validate_offset_commit
streams_validate_fetch = validate_offset_fetch

__all__ = ["StreamsGroupState", "streams_describe", "streams_facade_delete", "streams_facade_list",
           "streams_validate_commit", "streams_validate_fetch"]
