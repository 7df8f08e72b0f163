"""StreamsGroupManager: the streams half (KIP-1071) of Kafka's GroupMetadataManager.

StreamsGroupHeartbeat in Kafka 4.3.1's steps: get or create the group and the member, update the
member's metadata, initialize the topology from the first member that sends one, configure it
against the topics that exist (streams_topics.py: task counts, the internal topics to create, the
status), bump the group epoch when any of that changed, compute the target assignment (the
sticky assignor, streams_assignor.py; held back by ``streams.initial.rebalance.delay.ms`` while a
new group fills), and reconcile the member towards it. As for consumer groups, every change is a
record appended to ``__consumer_offsets`` and then replayed (streams_records.py), so a restart or
a kill -9 rebuilds the state the broker served.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace

from kafka_sidecar.protocol import errors

from .messages import RequestContext, Response
from .store import GroupStore, Record, append_error_to_response_error
from .streams_assignor import AssignmentMember, assign
from .streams_group import (
    EMPTY_TASKS,
    MemberState,
    StreamsGroup,
    StreamsGroupMember,
    StreamsTopology,
    TasksTuple,
    reconcile,
    task_list,
)
from .streams_records import (
    STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    STREAMS_GROUP_MEMBER_METADATA,
    STREAMS_GROUP_METADATA,
    STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER,
    STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA,
    STREAMS_GROUP_TOPOLOGY,
    StreamsGroupKey,
    current_assignment_value,
    decode_current_assignment_value,
    decode_group_metadata_value,
    decode_member_metadata_value,
    decode_target_assignment_member_value,
    decode_target_assignment_metadata_value,
    decode_topology_value,
    group_metadata_value,
    member_metadata_value,
    streams_key,
    target_assignment_member_value,
    target_assignment_metadata_value,
    topology_value,
)
from .streams_topics import (
    ASSIGNMENT_DELAYED,
    SHUTDOWN_APPLICATION,
    STALE_TOPOLOGY,
    InternalTopic,
    PartitionCount,
    configure_topology,
)
from .timer import Timer
from .writer import GroupRecordWriter

log = logging.getLogger(__name__.rpartition(".")[0] + ".coordinator")

FENCED_MEMBER_EPOCH = 110
STALE_MEMBER_EPOCH = 113
STREAMS_INVALID_TOPOLOGY = 130
STREAMS_INVALID_TOPOLOGY_EPOCH = 131
STREAMS_TOPOLOGY_FENCED = 132
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2

GroupConfig = Callable[[str, str], int]


class StreamsHeartbeatError(Exception):
    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class StreamsHeartbeat:
    """A StreamsGroupHeartbeat request as plain values (None: not sent, unchanged)."""

    group_id: str
    member_id: str
    member_epoch: int
    endpoint_information_epoch: int = 0
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    topology: StreamsTopology | None = None
    owned: TasksTuple | None = None
    process_id: str | None = None
    user_endpoint: tuple[str, int] | None = None
    client_tags: tuple[tuple[str, str], ...] | None = None
    shutdown_application: bool = False


def metadata_hash(topology: StreamsTopology, partitions_of: PartitionCount) -> int:
    """A stable 64-bit hash of the topology's topics and their partition counts (Kafka hashes the
    topics' metadata; a change means the topology must be configured again)."""
    names = sorted({t for s in topology.subtopologies for t in s.source_topics}
                   | {i.name for s in topology.subtopologies for i in s.repartition_source_topics + s.state_changelog_topics})
    text = ";".join(f"{n}:{partitions_of(n)}" for n in names)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big", signed=True)


class StreamsGroupManager:
    """Streams groups: heartbeat, timers, replay, describe, list, delete, offset checks."""

    def __init__(self, store: GroupStore, writer: GroupRecordWriter, timer: Timer, partitions_of: PartitionCount,
                 group_config: GroupConfig) -> None:
        self.store = store
        self.writer = writer
        self.timer = timer
        self.partitions_of = partitions_of
        self.group_config = group_config
        self.groups: dict[str, StreamsGroup] = {}
        self.max_size = 2**31 - 1  # group.streams.max.size

    def is_streams_group(self, gid: str) -> bool:
        return gid in self.groups

    # ---- replay ------------------------------------------------------------------------------------

    def replay(self, key: StreamsGroupKey, value: bytes | None) -> None:
        gid, t, mid = key.group, key.record_type, key.member
        group = self.groups.get(gid)
        if t == STREAMS_GROUP_METADATA:
            if value is None:
                self.groups.pop(gid, None)
                return
            g = self._group(gid)
            g.group_epoch, g.metadata_hash, g.validated_topology_epoch, g.last_assignment_configs = decode_group_metadata_value(value)
            return
        if value is None and group is None:
            return
        g = self._group(gid)
        if t == STREAMS_GROUP_TOPOLOGY:
            g.topology = decode_topology_value(value) if value is not None else None
            g.configured = None
        elif t == STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA:
            g.assignment_epoch, g.assignment_timestamp = decode_target_assignment_metadata_value(value) if value is not None else (1, 0)
        elif t == STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER and mid is not None:
            if value is None:
                g.target.pop(mid, None)
            else:
                g.target[mid] = decode_target_assignment_member_value(value)
        elif t == STREAMS_GROUP_MEMBER_METADATA and mid is not None:
            if value is None:
                g.members.pop(mid, None)
            else:
                g.members[mid] = decode_member_metadata_value(g.members.get(mid) or StreamsGroupMember(mid), value)
        elif t == STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT and mid is not None:
            old = g.members.get(mid)
            if value is None:
                if old is not None:
                    g.members[mid] = replace(old, member_epoch=0, previous_member_epoch=0, state=MemberState.STABLE,
                                             assigned=EMPTY_TASKS, pending_revocation=EMPTY_TASKS, active_epochs={})
            else:
                g.members[mid] = decode_current_assignment_value(old or StreamsGroupMember(mid), value)

    def _group(self, gid: str) -> StreamsGroup:
        g = self.groups.get(gid)
        if g is None:
            g = self.groups[gid] = StreamsGroup(gid)
        return g

    def on_loaded(self) -> None:
        for g in self.groups.values():
            self.store.groups.get(g.group_id) or self.store.create_group(g.group_id)
            for mid in g.members:
                self._schedule_session(g.group_id, mid)

    # ---- configs -----------------------------------------------------------------------------------

    def _config(self, gid: str, name: str) -> int:
        return int(self.group_config(gid, name))

    # ---- StreamsGroupHeartbeat ---------------------------------------------------------------------

    def heartbeat(self, ctx: RequestContext, req: StreamsHeartbeat) -> tuple[Response, list[InternalTopic]]:
        try:
            _validate(req)
            if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(req), []
            return self._heartbeat(ctx, req)
        except StreamsHeartbeatError as e:
            return _error(e.code, e.message), []

    def _heartbeat(self, ctx: RequestContext, req: StreamsHeartbeat) -> tuple[Response, list[InternalTopic]]:
        gid, mid = req.group_id, req.member_id
        joining = req.member_epoch == 0
        group = self.groups.get(gid)
        if group is None:
            if not joining:
                raise StreamsHeartbeatError(errors.GROUP_ID_NOT_FOUND, f"Streams group {gid} not found.")
            classic = self.store.groups.get(gid)
            if classic is not None and not classic.is_empty:
                raise StreamsHeartbeatError(errors.GROUP_ID_NOT_FOUND, f"Group {gid} is not a streams group.")
            group = StreamsGroup(gid)
        elif joining and len(group.members) >= self._config_max_size() and mid not in group.members:
            raise StreamsHeartbeatError(errors.GROUP_MAX_SIZE_REACHED, f"The streams group has reached its maximum capacity of {self._config_max_size()} members.")
        records: list[Record] = []
        member = group.members.get(mid)
        if member is None:
            if not joining:
                raise StreamsHeartbeatError(errors.UNKNOWN_MEMBER_ID, f"Member {mid} is not a member of group {gid}.")
            member = StreamsGroupMember(mid)
        elif not joining:
            _check_epoch(member, req)
        new_member = mid not in group.members
        updated = replace(
            member,
            rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1 else member.rebalance_timeout_ms,
            topology_epoch=req.topology.epoch if req.topology is not None else member.topology_epoch,
            client_id=ctx.client_id, client_host=ctx.client_host,
            process_id=req.process_id if req.process_id is not None else member.process_id,
            client_tags=tuple(sorted(req.client_tags)) if req.client_tags is not None else member.client_tags,
            user_endpoint=req.user_endpoint if req.user_endpoint is not None else member.user_endpoint,
        )
        bump = False
        if new_member or updated.metadata() != member.metadata():
            records.append((streams_key(STREAMS_GROUP_MEMBER_METADATA, gid, mid), member_metadata_value(updated)))
            bump = True
        # 2. the topology: the first one sent initializes the group's
        topology = group.topology
        status: list[dict[str, object]] = []
        if req.topology is not None and topology is None:
            log.info("[GroupId %s][MemberId %s] Member initialized the topology with epoch %d", gid, mid, req.topology.epoch)
            topology = req.topology
            records.append((streams_key(STREAMS_GROUP_TOPOLOGY, gid), topology_value(topology)))
        if topology is not None and updated.topology_epoch < topology.epoch:
            status.append({"status_code": STALE_TOPOLOGY, "status_detail":
                           f"The member's topology epoch {updated.topology_epoch} is behind the group's topology epoch {topology.epoch}."})
        # 3. configure the topology against the topics (Kafka re-checks every heartbeat once the
        # metadata refresh deadline passed; our topics are local, so each heartbeat looks)
        configured = group.configured
        mhash = group.metadata_hash
        if topology is not None:
            mhash = metadata_hash(topology, self.partitions_of)
            if mhash != group.metadata_hash:
                bump = True
            if configured is None or mhash != group.metadata_hash or getattr(configured, "epoch", -1) != topology.epoch:
                configured = configure_topology(topology, self.partitions_of)
        validated = topology.epoch if topology is not None and configured is not None and configured.ready else -1
        if validated != group.validated_topology_epoch:
            bump = True
        configs = {"num.standby.replicas": str(self._config(gid, "streams.num.standby.replicas"))}
        if not bump and configs != group.last_assignment_configs:
            bump = True
        group_epoch = group.group_epoch
        if bump:
            group_epoch += 1
            records.append((streams_key(STREAMS_GROUP_METADATA, gid), group_metadata_value(group_epoch, mhash, validated, configs)))
        delay_key = _initial_delay_key(gid)
        if bump and not group.members and self._config(gid, "streams.initial.rebalance.delay.ms") > 0 and delay_key not in self.timer:
            self.timer.schedule(delay_key, self._config(gid, "streams.initial.rebalance.delay.ms"), lambda: self._delayed_assignment(gid))
        # 4. the target assignment
        members = dict(group.members)
        members[mid] = updated
        target_epoch = group.assignment_epoch
        target = dict(group.target)
        if delay_key in self.timer:
            target, target_epoch = {}, group.assignment_epoch
            status.append({"status_code": ASSIGNMENT_DELAYED, "status_detail": "Assignment delayed due to the configured initial rebalance delay."})
        elif group_epoch > group.assignment_epoch:
            target = self._target_assignment(gid, members, dict(group.target), configured, configs, group_epoch, records)
            target_epoch = group_epoch
        # 5. reconcile
        reconciled = reconcile(updated, target_epoch, target.get(mid, EMPTY_TASKS), req.owned,
                               lambda s, p: _active_owner(members, mid, s, p))
        if new_member or records or reconciled.assignment() != member.assignment():
            records.append((streams_key(STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT, gid, mid), current_assignment_value(reconciled)))
        if records:
            error = self.writer.write_and_replay(gid, records)
            if error:
                raise StreamsHeartbeatError(append_error_to_response_error(error))
            self.store.groups.get(gid) or self.store.create_group(gid)  # offsets live under a (classic, empty) entry
        group = self.groups[gid]
        group.configured = configured
        final = group.members[mid]
        self._schedule_session(gid, mid)
        if final.state == MemberState.UNREVOKED_TASKS:
            if _rebalance_key(gid, mid) not in self.timer:
                self._schedule_rebalance(gid, mid, final.member_epoch, final.rebalance_timeout_ms)
        else:
            self.timer.cancel(_rebalance_key(gid, mid))
        if req.shutdown_application:
            group.shutdown_request_member_id = mid
        response: Response = {
            "error_code": errors.NONE, "error_message": None, "member_id": mid, "member_epoch": final.member_epoch,
            "heartbeat_interval": self._config(gid, "streams.heartbeat.interval.ms"), "acceptable_recovery_lag": 0,
            "task_offset_interval": 0, "status": None, "active_tasks": None, "standby_tasks": None, "warmup_tasks": None,
            "endpoint_information_epoch": 0, "partitions_by_user_endpoint": None,
        }
        if joining or final.assigned != member.assigned:
            response["active_tasks"] = _task_ids(final.assigned.active)
            response["standby_tasks"] = _task_ids(final.assigned.standby)
            response["warmup_tasks"] = _task_ids(final.assigned.warmup)
            if final.user_endpoint is not None:
                group.endpoint_information_epoch += 1
        if group.endpoint_information_epoch != req.endpoint_information_epoch:
            response["partitions_by_user_endpoint"] = self._endpoints(group)
        response["endpoint_information_epoch"] = group.endpoint_information_epoch
        to_create: list[InternalTopic] = []
        if configured is not None and configured.status is not None:
            to_create = list(configured.to_create)
            status.append({"status_code": configured.status[0], "status_detail": configured.status[1]})
        if group.shutdown_request_member_id is not None:
            status.append({"status_code": SHUTDOWN_APPLICATION, "status_detail":
                           f"Streams group member {group.shutdown_request_member_id} encountered a fatal error and requested a shutdown for the entire application."})
        if status:
            response["status"] = status
        return response, to_create

    def _config_max_size(self) -> int:
        return self.max_size

    def _target_assignment(self, gid: str, members: dict[str, StreamsGroupMember], old: dict[str, TasksTuple],
                           configured: object, configs: dict[str, str], epoch: int, records: list[Record]) -> dict[str, TasksTuple]:
        """Kafka's TargetAssignmentBuilder: the assignor's result, the changed members' records, then
        the target assignment metadata at ``epoch``."""
        tasks = dict(getattr(configured, "tasks", {}) or {}) if getattr(configured, "ready", False) else {}
        spec = [AssignmentMember(m.member_id, m.process_id, old.get(m.member_id, m.assigned)) for m in members.values()]
        new = assign(spec, tasks, int(configs["num.standby.replicas"]))
        for mid, t in new.items():
            if old.get(mid) != t:
                records.append((streams_key(STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER, gid, mid), target_assignment_member_value(t)))
        records.append((streams_key(STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA, gid), target_assignment_metadata_value(epoch, self.timer.clock.now_ms())))
        return new

    def _delayed_assignment(self, gid: str) -> None:
        """The initial rebalance delay ended: compute the group's first target assignment."""
        group = self.groups.get(gid)
        if group is None or group.group_epoch <= group.assignment_epoch:
            return
        configured = group.configured
        if group.topology is not None and configured is None:
            configured = group.configured = configure_topology(group.topology, self.partitions_of)
        records: list[Record] = []
        self._target_assignment(gid, dict(group.members), dict(group.target), configured,
                                {"num.standby.replicas": str(self._config(gid, "streams.num.standby.replicas"))},
                                group.group_epoch, records)
        self.writer.write_and_replay(gid, records)

    def _endpoints(self, group: StreamsGroup) -> list[Response] | None:
        """partitionsByUserEndpoint: each endpoint's active and standby tasks' input partitions."""
        configured = group.configured
        sources = getattr(configured, "source_topics", {}) or {}
        out = []
        for m in group.members.values():
            if m.user_endpoint is None:
                continue

            def parts(tasks: dict[str, frozenset[int]]) -> list[Response]:
                by_topic: dict[str, set[int]] = {}
                for sub, ps in tasks.items():
                    for topic in sources.get(sub, ()):
                        by_topic.setdefault(topic, set()).update(ps)
                return [{"topic": t, "partitions": sorted(ps)} for t, ps in sorted(by_topic.items())]
            out.append({"user_endpoint": {"host": m.user_endpoint[0], "port": m.user_endpoint[1]},
                        "active_partitions": parts(m.assigned.active), "standby_partitions": parts(m.assigned.standby)})
        return out

    def _leave(self, req: StreamsHeartbeat) -> Response:
        gid, mid = req.group_id, req.member_id
        group = self.groups.get(gid)
        if group is None:
            raise StreamsHeartbeatError(errors.GROUP_ID_NOT_FOUND, f"Streams group {gid} not found.")
        if mid not in group.members:
            raise StreamsHeartbeatError(errors.UNKNOWN_MEMBER_ID, f"Member {mid} is not a member of group {gid}.")
        error = self.fence_member(gid, mid, "the member left the group")
        if error:
            raise StreamsHeartbeatError(error)
        out = _error(errors.NONE, None)
        out.update(member_id=mid, member_epoch=req.member_epoch)
        return out

    def fence_member(self, gid: str, mid: str, reason: str) -> int:
        """Remove a member and bump the group epoch (Kafka's streamsGroupFenceMember)."""
        group = self.groups.get(gid)
        if group is None or mid not in group.members:
            return errors.NONE
        log.info("[GroupId %s] member %s left the streams group: %s", gid, mid, reason)
        for key in (_session_key(gid, mid), _rebalance_key(gid, mid)):
            self.timer.cancel(key)
        records: list[Record] = [
            (streams_key(STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT, gid, mid), None),
            (streams_key(STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER, gid, mid), None),
            (streams_key(STREAMS_GROUP_MEMBER_METADATA, gid, mid), None),
            (streams_key(STREAMS_GROUP_METADATA, gid), group_metadata_value(
                group.group_epoch + 1, group.metadata_hash, group.validated_topology_epoch, group.last_assignment_configs)),
        ]
        if group.shutdown_request_member_id is not None and len(group.members) == 1:
            group.shutdown_request_member_id = None
        error = self.writer.write_and_replay(gid, records)
        return append_error_to_response_error(error) if error else errors.NONE

    def _schedule_session(self, gid: str, mid: str) -> None:
        self.timer.schedule(_session_key(gid, mid), self._config(gid, "streams.session.timeout.ms"),
                            lambda: self.fence_member(gid, mid, "its session timed out"))

    def _schedule_rebalance(self, gid: str, mid: str, epoch: int, timeout_ms: int) -> None:
        def expire() -> None:
            group = self.groups.get(gid)
            m = group.members.get(mid) if group else None
            if m is not None and m.state == MemberState.UNREVOKED_TASKS and m.member_epoch == epoch:
                self.fence_member(gid, mid, "it did not revoke its tasks within the rebalance timeout")
        self.timer.schedule(_rebalance_key(gid, mid), max(timeout_ms, 0), expire)

    def shutdown(self) -> None:
        pass


def _validate(req: StreamsHeartbeat) -> None:
    """Kafka's throwIfStreamsGroupHeartbeatRequestIsInvalid."""
    def invalid(msg: str) -> StreamsHeartbeatError:
        return StreamsHeartbeatError(errors.INVALID_REQUEST, msg)
    if not req.group_id:
        raise invalid("GroupId can't be empty.")
    if not req.member_id:
        raise invalid("MemberId can't be empty.")
    if req.instance_id is not None:
        raise StreamsHeartbeatError(errors.UNSUPPORTED_VERSION, "Static membership is not yet supported.")
    if req.rack_id is not None and not req.rack_id.strip():
        raise invalid("RackId can't be empty.")
    if req.member_epoch == 0:
        if req.rebalance_timeout_ms == -1:
            raise invalid("RebalanceTimeoutMs must be provided when joining.")
        if req.topology is None:
            raise invalid("Topology must be non-null when joining.")
        if req.owned is None or not req.owned.is_empty():
            raise invalid("ActiveTasks, StandbyTasks and WarmupTasks must be empty when (re-)joining.")
    elif req.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        raise invalid(f"MemberEpoch is {req.member_epoch}, but must be greater than or equal to -2.")


def _check_epoch(member: StreamsGroupMember, req: StreamsHeartbeat) -> None:
    """Kafka's throwIfStreamsGroupMemberEpochIsInvalid."""
    got = req.member_epoch
    if got > member.member_epoch:
        raise StreamsHeartbeatError(FENCED_MEMBER_EPOCH, f"The streams group member has a greater member epoch ({got}) than the one known by the group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.")
    if got < member.member_epoch:
        owned = req.owned
        contained = owned is not None and all(
            set(ps) <= set(getattr(member.assigned, kind).get(s, frozenset()))
            for kind in ("active", "standby", "warmup") for s, ps in getattr(owned, kind).items())
        if got != member.previous_member_epoch or not contained:
            raise StreamsHeartbeatError(FENCED_MEMBER_EPOCH, f"The streams group member has a smaller member epoch ({got}) than the one known by the group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.")


def _active_owner(members: dict[str, StreamsGroupMember], me: str, sub: str, partition: int) -> str | None:
    for mid, m in members.items():
        if mid != me and (partition in m.assigned.active.get(sub, ()) or partition in m.pending_revocation.active.get(sub, ())):
            return mid
    return None


def _task_ids(tasks: dict[str, frozenset[int]]) -> list[Response]:
    return [{"subtopology_id": s, "partitions": ps} for s, ps in task_list(tasks)]


def _error(code: int, message: str | None) -> Response:
    return {"error_code": code, "error_message": message, "member_id": "", "member_epoch": 0, "heartbeat_interval": 0,
            "acceptable_recovery_lag": 0, "task_offset_interval": 0, "status": None, "active_tasks": None,
            "standby_tasks": None, "warmup_tasks": None, "endpoint_information_epoch": 0, "partitions_by_user_endpoint": None}


def _initial_delay_key(gid: str) -> tuple[str, str]:
    return ("streams-initial-rebalance", gid)


def _session_key(gid: str, mid: str) -> tuple[str, str, str]:
    return ("streams-session", gid, mid)


def _rebalance_key(gid: str, mid: str) -> tuple[str, str, str]:
    return ("streams-rebalance", gid, mid)
