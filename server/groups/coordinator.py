"""GroupCoordinator: classic consumer groups and committed offsets (Kafka's group coordinator).

A port of the classic-group half of Kafka 4's ``GroupMetadataManager`` and
``OffsetMetadataManager``: the same state machine (Empty, PreparingRebalance,
CompletingRebalance, Stable, Dead), the same timers (member heartbeats, the
delayed join with ``group.initial.rebalance.delay.ms``, pending syncs, new
member join timeout), the same error codes in the same order of checks.

This broker is the coordinator of every group. Group metadata and offsets are
written as records to the compacted internal topic ``__consumer_offsets``
(partition ``abs(groupId.hashCode()) % offsets.topic.num.partitions``) before
a request is answered, and replayed from it at start-up, so a restart keeps
every group and committed offset. Everything runs on the event loop; timers are
``loop.call_later`` handles keyed like Kafka's timer keys.

Transactional offsets (TxnOffsetCommit) are written as transactional records of the
producer and kept pending per producer id until the transaction coordinator writes the
transaction's marker to the group's partition (``complete_transaction``): COMMIT publishes
them, ABORT drops them; OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for a
partition with pending offsets. Replay follows the records and markers in log order.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafka_sidecar.protocol import errors
from kafka_sidecar.protocol.records import Record as BatchRecord
from kafka_sidecar.protocol.records import encode_batch
from kafka_sidecar.storage.log_config import validate_topic_configs

from .group import (
    EMPTY_ASSIGNMENT,
    UNKNOWN_MEMBER_ID,
    ClassicGroup,
    GroupState,
    Member,
    now_ms,
)
from .javaorder import JavaHashMap, TimelineOrder, chm_order
from .loader import load_offsets_topic
from .records import (
    OFFSETS_TOPIC,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetAndMetadata,
    OffsetCommitKey,
    build_batch,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    group_metadata_key,
    group_metadata_value,
    java_string_hash,
    offset_commit_key,
    offset_commit_value,
    partition_for,
)
from .timer import Timer, heartbeat_key, join_key, sync_key

if TYPE_CHECKING:
    from ..broker import Broker

log = logging.getLogger(__name__)

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000  # Kafka's CLASSIC_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS
NO_AUTHORIZED_OPERATIONS = -2147483648
# READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS: what Kafka reports for a group without an authorizer.
GROUP_AUTHORIZED_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11)
GROUP_TYPES = {"classic", "consumer", "share", "streams"}

Response = dict[str, Any]
Record = tuple[bytes, bytes | None]


@dataclass(frozen=True)
class RequestContext:
    client_id: str
    client_host: str  # as Kafka prints an InetAddress: "/127.0.0.1"
    api_version: int


@dataclass
class JoinRequest:
    group_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    reason: str | None = None


def join_response(member_id: str, error: int = errors.NONE, **fields: Any) -> Response:
    r: Response = {
        "error_code": error, "generation_id": -1, "protocol_type": None, "protocol_name": None,
        "leader": "", "skip_assignment": False, "member_id": member_id, "members": [],
    }
    r.update(fields)
    return r


def sync_response(error: int = errors.NONE, protocol_type: str | None = None, protocol_name: str | None = None, assignment: bytes = b"") -> Response:
    return {"error_code": error, "protocol_type": protocol_type, "protocol_name": protocol_name, "assignment": assignment}


def _java_string_length(s: str) -> int:
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


def _topic_partition_hash(topic: str, partition: int) -> int:
    """Java's TopicPartition.hashCode."""
    h = (31 * (31 + partition) + java_string_hash(topic)) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def _append_error_to_response_error(code: int) -> int:
    """Kafka's appendGroupMetadataErrorToResponseError."""
    if code in (errors.UNKNOWN_TOPIC_OR_PARTITION, errors.REQUEST_TIMED_OUT):
        return errors.COORDINATOR_NOT_AVAILABLE
    if code == errors.NOT_LEADER_OR_FOLLOWER:
        return errors.NOT_COORDINATOR
    if code in (errors.MESSAGE_TOO_LARGE, errors.RECORD_LIST_TOO_LARGE):
        return errors.UNKNOWN_SERVER_ERROR
    return code


class GroupCoordinator:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        cfg = broker.config
        self.configured_partitions: int = cfg.get("offsets.topic.num.partitions")
        self.num_partitions = self.configured_partitions
        self.segment_bytes: int = cfg.get("offsets.topic.segment.bytes")
        self.compression_codec: int = cfg.get("offsets.topic.compression.codec")
        self.initial_rebalance_delay_ms: int = cfg.get("group.initial.rebalance.delay.ms")
        self.min_session_timeout_ms: int = cfg.get("group.min.session.timeout.ms")
        self.max_session_timeout_ms: int = cfg.get("group.max.session.timeout.ms")
        self.max_group_size: int = cfg.get("group.max.size")
        self.offsets_retention_ms: int = cfg.get("offsets.retention.minutes") * 60_000
        self.retention_check_interval_ms: int = cfg.get("offsets.retention.check.interval.ms")
        self.offset_metadata_max_bytes: int = cfg.get("offset.metadata.max.bytes")
        self.groups: dict[str, ClassicGroup] = {}
        # Per __consumer_offsets partition, the groups in Kafka's TimelineHashMap order (ListGroups).
        self._group_order: dict[int, TimelineOrder[str]] = {}
        # group -> topic -> partition -> committed offset
        self.offsets: dict[str, dict[str, dict[int, OffsetAndMetadata]]] = {}
        # Transactional offsets (TxnOffsetCommit) not yet committed or aborted:
        # producer id -> group -> topic -> partition -> offset (Kafka's pendingTransactionalOffsets).
        self.pending_txn_offsets: dict[int, dict[str, dict[str, dict[int, OffsetAndMetadata]]]] = {}
        self.timer = Timer()
        self.active = False
        self._topic_lock: asyncio.Lock | None = None
        self._writes = 0

    # ---- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        """Replay ``__consumer_offsets`` (if it exists) and start serving."""
        lm = self.broker.log_manager
        info = lm.topics.get(OFFSETS_TOPIC)
        if info is not None:
            self.num_partitions = info.partitions
            started = now_ms()
            count = await self.broker.run_blocking(load_offsets_topic, lm, info, self)
            for group in self.groups.values():
                for member in group.all_members():
                    self._reschedule_heartbeat(group, member)
                if group.num_members() > self.max_group_size:
                    self._prepare_rebalance(group, f"freshly-loaded group {group.group_id} is over capacity {self.max_group_size}")
            log.info(
                "loaded %d groups and %d committed offsets from %d records of %s in %d ms",
                len(self.groups), sum(len(p) for t in self.offsets.values() for p in t.values()),
                count, OFFSETS_TOPIC, now_ms() - started,
            )
        self.active = True

    def shutdown(self) -> None:
        """Stop timers and answer parked JoinGroup/SyncGroup requests with NOT_COORDINATOR (Kafka's onUnloaded)."""
        self.active = False
        self.timer.cancel_all()
        for group in self.groups.values():
            for member in group.all_members():
                group.complete_join(member, join_response(member.member_id, errors.NOT_COORDINATOR))
                group.complete_sync(member, sync_response(errors.NOT_COORDINATOR))

    async def ensure_offsets_topic(self) -> None:
        """Create ``__consumer_offsets`` the first time a group needs it (Kafka creates it on the first FindCoordinator)."""
        lm = self.broker.log_manager
        if OFFSETS_TOPIC in lm.topics:
            return
        if self._topic_lock is None:
            self._topic_lock = asyncio.Lock()
        async with self._topic_lock:
            if OFFSETS_TOPIC in lm.topics:
                return
            configs = validate_topic_configs({
                "cleanup.policy": "compact",
                "compression.type": "producer",
                "segment.bytes": str(self.segment_bytes),
            })
            self.num_partitions = self.configured_partitions
            await self.broker.run_blocking(lm.create_topic, OFFSETS_TOPIC, self.num_partitions, configs)

    # ---- persistence -------------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def _write(self, group_id: str, records: list[Record]) -> tuple[int, int]:
        """Append ``records`` as one batch to the group's partition: (error code, first offset)."""
        self._writes += 1
        partition = self.partition_for(group_id)
        writer = self.broker.replica_manager
        if writer.get_log(OFFSETS_TOPIC, partition) is None:
            return errors.COORDINATOR_NOT_AVAILABLE, -1
        batch = bytearray(build_batch(records, now_ms(), self.compression_codec))
        try:
            info = writer.append_batch(OFFSETS_TOPIC, partition, batch)
        except Exception:
            log.exception("cannot append to %s-%d", OFFSETS_TOPIC, partition)
            return errors.UNKNOWN_SERVER_ERROR, -1
        return errors.NONE, info.first_offset

    def _write_and_replay(self, group_id: str, records: list[Record]) -> int:
        error, first = self._write(group_id, records)
        if error == errors.NONE:
            for i, (key, value) in enumerate(records):
                self.replay(key, value, first + i)
        return error

    def replay(self, key_bytes: bytes, value: bytes | None, record_offset: int) -> None:
        key = decode_key(key_bytes)
        if isinstance(key, OffsetCommitKey):
            if value is None:
                self._remove_offset(key.group, key.topic, key.partition)
            else:
                if key.group not in self.groups:
                    self._create_group(key.group)
                om = decode_offset_commit_value(value, record_offset)
                self.offsets.setdefault(key.group, {}).setdefault(key.topic, {})[key.partition] = om
        elif isinstance(key, GroupMetadataKey):
            if value is None:
                self._remove_group(key.group)
            else:
                self._put_group(self._group_from_record(key.group, decode_group_metadata_value(value)))

    def _remove_offset(self, group_id: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        topics = self.offsets.get(group_id)
        if topics is None or topic not in topics:
            return None
        removed = topics[topic].pop(partition, None)
        if not topics[topic]:
            del topics[topic]
        if not topics:
            del self.offsets[group_id]
        return removed

    @staticmethod
    def _group_from_record(group_id: str, v: GroupMetadataValue) -> ClassicGroup:
        group = ClassicGroup(
            group_id,
            state=GroupState.STABLE if v.members else GroupState.EMPTY,
            generation_id=v.generation,
            protocol_type=v.protocol_type or None,
            protocol_name=v.protocol,
            leader_id=v.leader,
            current_state_timestamp=None if v.current_state_timestamp == -1 else v.current_state_timestamp,
        )
        for m in v.members:
            group.add(Member(
                m.member_id, m.group_instance_id, m.client_id, m.client_host,
                m.rebalance_timeout, m.session_timeout, v.protocol_type,
                [(v.protocol or "", m.subscription)], m.assignment,
            ))
        group.subscribed_topics = group.compute_subscribed_topics()
        return group

    def _group_metadata_record(self, group: ClassicGroup, assignment: dict[str, bytes]) -> Record:
        members = [
            MemberMetadata(
                m.member_id, m.group_instance_id, m.client_id, m.client_host,
                m.rebalance_timeout_ms, m.session_timeout_ms,
                m.metadata(group.protocol_name), assignment[m.member_id],
            )
            for m in group.all_members()
        ]
        value = GroupMetadataValue(
            group.protocol_type or "", group.generation_id, group.protocol_name, group.leader_id,
            group.current_state_timestamp_or_default(), members,
        )
        return group_metadata_key(group.group_id), group_metadata_value(value)

    def _empty_group_metadata_record(self, group: ClassicGroup) -> Record:
        value = GroupMetadataValue("", 0, None, None, group.current_state_timestamp_or_default(), [])
        return group_metadata_key(group.group_id), group_metadata_value(value)

    def _create_group(self, group_id: str) -> ClassicGroup:
        group = ClassicGroup(group_id)
        self._put_group(group)
        return group

    def _put_group(self, group: ClassicGroup) -> None:
        self.groups[group.group_id] = group
        self._group_order.setdefault(self.partition_for(group.group_id), TimelineOrder()).add(group.group_id)

    def _remove_group(self, group_id: str) -> None:
        if self.groups.pop(group_id, None) is not None:
            order = self._group_order.get(self.partition_for(group_id))
            if order is not None:
                order.remove(group_id)

    # ---- JoinGroup -------------------------------------------------------------------

    def join_group(self, ctx: RequestContext, req: JoinRequest) -> asyncio.Future[Response]:
        fut: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        if not self.active:
            fut.set_result(join_response(req.member_id, errors.COORDINATOR_NOT_AVAILABLE))
        elif not req.group_id:
            fut.set_result(join_response(req.member_id, errors.INVALID_GROUP_ID))
        elif not self.min_session_timeout_ms <= req.session_timeout_ms <= self.max_session_timeout_ms:
            fut.set_result(join_response(req.member_id, errors.INVALID_SESSION_TIMEOUT))
        else:
            self._join_classic_group(ctx, req, fut)
        return fut

    def _join_classic_group(self, ctx: RequestContext, req: JoinRequest, fut: asyncio.Future[Response]) -> None:
        group_id, member_id = req.group_id, req.member_id
        is_unknown_member = member_id == UNKNOWN_MEMBER_ID
        group = self.groups.get(group_id)
        is_new_group = group is None
        if group is None:
            if not is_unknown_member:
                fut.set_result(join_response(member_id, errors.UNKNOWN_MEMBER_ID))
                return
            group = self._create_group(group_id)
        writes_before = self._writes
        if not self._accept_joining_member(group, member_id):
            group.remove(member_id)
            fut.set_result(join_response(UNKNOWN_MEMBER_ID, errors.GROUP_MAX_SIZE_REACHED))
        elif is_unknown_member:
            self._join_new_member(ctx, req, group, fut)
        else:
            self._join_existing_member(ctx, req, group, fut)
        if is_new_group and self._writes == writes_before:
            # Persist the new group, as Kafka does when the join wrote nothing else.
            error, _ = self._write(group_id, [self._empty_group_metadata_record(group)])
            if error and not fut.done():
                fut.set_result(join_response("", _append_error_to_response_error(error)))

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        if group.is_in(GroupState.EMPTY, GroupState.DEAD):
            return True
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return (group.has_member(member_id) and group.member(member_id).is_awaiting_join) or group.num_awaiting_join < self.max_group_size
        return group.has_member(member_id) or group.num_members() < self.max_group_size

    def _join_new_member(self, ctx: RequestContext, req: JoinRequest, group: ClassicGroup, fut: asyncio.Future[Response]) -> None:
        if group.is_in(GroupState.DEAD):
            fut.set_result(join_response(UNKNOWN_MEMBER_ID, errors.COORDINATOR_NOT_AVAILABLE))
        elif not group.supports_protocols(req.protocol_type, {name for name, _ in req.protocols}):
            fut.set_result(join_response(UNKNOWN_MEMBER_ID, errors.INCONSISTENT_GROUP_PROTOCOL))
        else:
            new_member_id = group.generate_member_id(ctx.client_id, req.group_instance_id)
            if req.group_instance_id is not None:
                existing = group.static_member_id(req.group_instance_id)
                if existing is not None:
                    log.info("static member %s of group %s rejoins with an unknown member id: replacing member %s", req.group_instance_id, group.group_id, existing)
                    self._update_static_member_then_rebalance_or_complete_join(ctx, req, group, existing, new_member_id, fut)
                else:
                    self._add_member_then_rebalance_or_complete_join(ctx, req, group, new_member_id, fut)
            elif ctx.api_version >= 4:
                # JoinGroup v4+: the member must rejoin with the id we give it.
                group.add_pending_member(new_member_id)
                gid = group.group_id
                self.timer.schedule(heartbeat_key(gid, new_member_id), req.session_timeout_ms, lambda: self._expire_heartbeat(gid, new_member_id))
                fut.set_result(join_response(new_member_id, errors.MEMBER_ID_REQUIRED))
            else:
                self._add_member_then_rebalance_or_complete_join(ctx, req, group, new_member_id, fut)

    def _join_existing_member(self, ctx: RequestContext, req: JoinRequest, group: ClassicGroup, fut: asyncio.Future[Response]) -> None:
        member_id = req.member_id
        if group.is_in(GroupState.DEAD):
            fut.set_result(join_response(member_id, errors.COORDINATOR_NOT_AVAILABLE))
        elif not group.supports_protocols(req.protocol_type, {name for name, _ in req.protocols}):
            fut.set_result(join_response(member_id, errors.INCONSISTENT_GROUP_PROTOCOL))
        elif group.is_pending_member(member_id):
            if req.group_instance_id is not None:
                fut.set_result(join_response(member_id, errors.UNKNOWN_SERVER_ERROR))
                return
            self._add_member_then_rebalance_or_complete_join(ctx, req, group, member_id, fut)
        else:
            error = group.validate_member(member_id, req.group_instance_id)
            if error:
                fut.set_result(join_response(member_id, error))
                return
            member = group.member(member_id)
            if group.is_in(GroupState.PREPARING_REBALANCE):
                self._update_member_then_rebalance_or_complete_join(req, group, member, f"member {member_id} is joining group during {group.state.value}", fut)
            elif group.is_in(GroupState.COMPLETING_REBALANCE):
                if member.matches(req.protocols):
                    # Same metadata (the member missed the join answer): resend this generation's answer.
                    fut.set_result(self._current_join_response(group, member_id, group.current_members_for_leader() if group.is_leader(member_id) else []))
                else:
                    self._update_member_then_rebalance_or_complete_join(req, group, member, f"updating metadata for member {member_id} during {group.state.value}", fut)
            elif group.is_in(GroupState.STABLE):
                if group.is_leader(member_id):
                    self._update_member_then_rebalance_or_complete_join(req, group, member, f"leader {member_id} re-joining group during {group.state.value}", fut)
                elif not member.matches(req.protocols):
                    self._update_member_then_rebalance_or_complete_join(req, group, member, f"updating metadata for member {member_id} during {group.state.value}", fut)
                else:
                    fut.set_result(self._current_join_response(group, member_id, []))
            else:
                log.warning("rejoining member %s of group %s in unexpected state %s", member_id, group.group_id, group.state.value)
                fut.set_result(join_response(member_id, errors.UNKNOWN_MEMBER_ID))

    @staticmethod
    def _current_join_response(group: ClassicGroup, member_id: str, members: list[dict[str, Any]], leader: str | None = None, skip_assignment: bool = False) -> Response:
        return join_response(
            member_id,
            generation_id=group.generation_id,
            protocol_name=group.protocol_name,
            protocol_type=group.protocol_type,
            leader=(group.leader_id if leader is None else leader) or "",
            members=members,
            skip_assignment=skip_assignment,
        )

    def _update_static_member_then_rebalance_or_complete_join(self, ctx: RequestContext, req: JoinRequest, group: ClassicGroup, old_member_id: str, new_member_id: str, fut: asyncio.Future[Response]) -> None:
        current_leader = group.leader_id
        fenced_join = join_response(old_member_id, errors.FENCED_INSTANCE_ID)
        fenced_sync = sync_response(errors.FENCED_INSTANCE_ID)
        new = group.replace_static_member(req.group_instance_id or "", old_member_id, new_member_id, fenced_join, fenced_sync)
        self.timer.cancel(heartbeat_key(group.group_id, old_member_id))
        self._reschedule_heartbeat(group, new)
        old_rebalance, old_session, old_protocols = new.rebalance_timeout_ms, new.session_timeout_ms, list(new.protocols)
        group.update_member(new, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, fut)
        if group.is_in(GroupState.STABLE):
            if (group.protocol_name or "") == group.select_protocol():
                # The selected protocol does not change: persist the new member id, no rebalance.
                error, _ = self._write(group.group_id, [self._group_metadata_record(group, group.group_assignment())])
                if error:
                    group.update_member(new, old_protocols, old_rebalance, old_session, None)
                    old = group.replace_static_member(req.group_instance_id or "", new_member_id, old_member_id, join_response(""), sync_response())
                    self._reschedule_heartbeat(group, old)
                    _set(fut, join_response(
                        UNKNOWN_MEMBER_ID, _append_error_to_response_error(error), generation_id=group.generation_id,
                        protocol_name=group.protocol_name, protocol_type=group.protocol_type, leader=current_leader or "",
                    ))
                elif ctx.api_version >= 9:
                    is_leader = group.is_leader(new_member_id)
                    group.complete_join(new, self._current_join_response(
                        group, new_member_id, group.current_members_for_leader() if is_leader else [], skip_assignment=is_leader,
                    ))
                else:
                    group.complete_join(new, self._current_join_response(group, new_member_id, [], leader=current_leader or ""))
                return
            self._maybe_prepare_rebalance_or_complete_join(group, f"group's selected protocol will change because static member {new_member_id} joined with a change of protocol")
            return
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, f"updating metadata for static member {new_member_id} with instance id {req.group_instance_id}")
            return
        self._maybe_complete_join_phase(group)

    def _update_member_then_rebalance_or_complete_join(self, req: JoinRequest, group: ClassicGroup, member: Member, reason: str, fut: asyncio.Future[Response]) -> None:
        group.update_member(member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, fut)
        self._maybe_prepare_rebalance_or_complete_join(group, reason)

    def _add_member_then_rebalance_or_complete_join(self, ctx: RequestContext, req: JoinRequest, group: ClassicGroup, member_id: str, fut: asyncio.Future[Response]) -> None:
        member = Member(
            member_id, req.group_instance_id, ctx.client_id, ctx.client_host,
            req.rebalance_timeout_ms, req.session_timeout_ms, req.protocol_type, list(req.protocols),
        )
        member.is_new = True
        if group.is_in(GroupState.PREPARING_REBALANCE) and group.previous_state is GroupState.EMPTY:
            group.new_member_added = True
        group.add(member, fut)
        # New members cannot heartbeat while their JoinGroup is parked: time the join out instead.
        self._reschedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance_or_complete_join(group, f"adding new member {member_id} with group instance id {req.group_instance_id}; client reason: {req.reason or 'not provided'}")

    def _maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)
        else:
            self._maybe_complete_join_phase(group)

    def _prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_with_error(group, errors.REBALANCE_IN_PROGRESS)
        self._remove_sync_expiration(group)
        is_initial = group.is_in(GroupState.EMPTY)
        gid = group.group_id
        if is_initial:
            delay = self.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self.timer.schedule(join_key(gid), delay, lambda: self._try_complete_initial_rebalance(gid, delay, remaining))
        group.transition_to(GroupState.PREPARING_REBALANCE)
        log.info("preparing to rebalance group %s in state %s with old generation %d (reason: %s)", gid, group.state.value, group.generation_id, reason)
        if not is_initial:
            if group.has_all_members_joined():
                self._complete_join(group)
            else:
                self.timer.schedule(join_key(gid), group.rebalance_timeout_ms(), lambda: self._complete_join_by_id(gid))

    def _try_complete_initial_rebalance(self, group_id: str, delay_ms: int, remaining_ms: int) -> None:
        group = self.groups.get(group_id)
        if group is None:
            return
        if group.new_member_added and remaining_ms != 0:
            group.new_member_added = False
            new_delay = min(self.initial_rebalance_delay_ms, remaining_ms)
            new_remaining = max(remaining_ms - delay_ms, 0)
            self.timer.schedule(join_key(group_id), new_delay, lambda: self._try_complete_initial_rebalance(group_id, new_delay, new_remaining))
        else:
            self._complete_join(group)

    def _maybe_complete_join_phase(self, group: ClassicGroup) -> None:
        if not group.is_in(GroupState.PREPARING_REBALANCE):
            return
        if group.previous_state is GroupState.EMPTY:
            return  # the initial rebalance completes on its timer
        if not group.has_all_members_joined():
            return
        self._complete_join(group)

    def _complete_join_by_id(self, group_id: str) -> None:
        group = self.groups.get(group_id)
        if group is not None:
            self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        gid = group.group_id
        self.timer.cancel(join_key(gid))
        gone = [m for m in group.not_yet_rejoined_members() if not m.is_static]
        for m in gone:
            group.remove(m.member_id)
            self.timer.cancel(heartbeat_key(gid, m.member_id))
        if gone:
            log.info("group %s removed dynamic members who have not rejoined: %s", gid, [m.member_id for m in gone])
        if group.is_in(GroupState.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.num_members():
            log.error("group %s could not complete its rebalance because no members rejoined", gid)
            self.timer.schedule(join_key(gid), group.rebalance_timeout_ms(), lambda: self._complete_join_by_id(gid))
            return
        group.init_next_generation()
        if group.is_in(GroupState.EMPTY):
            log.info("group %s with generation %d is now empty", gid, group.generation_id)
            error, _ = self._write(gid, [self._group_metadata_record(group, {})])
            if error:
                log.warning("failed to write empty metadata for group %s: error %d", gid, error)
            return
        log.info("stabilized group %s generation %d with %d members", gid, group.generation_id, group.num_members())
        for m in group.all_members():
            members = group.current_members_for_leader() if group.is_leader(m.member_id) else []
            group.complete_join(m, self._current_join_response(group, m.member_id, members))
            self._reschedule_heartbeat(group, m)
            m.is_new = False
            group.pending_sync_members.add(m.member_id)
        generation = group.generation_id
        self.timer.schedule(sync_key(gid), group.rebalance_timeout_ms(), lambda: self._expire_pending_sync(gid, generation))

    def _expire_pending_sync(self, group_id: str, generation_id: int) -> None:
        group = self.groups.get(group_id)
        if group is None or generation_id != group.generation_id:
            return
        if group.is_in(GroupState.COMPLETING_REBALANCE, GroupState.STABLE) and group.pending_sync_members:
            pending = set(group.pending_sync_members)
            for member_id in pending:
                group.remove(member_id)
                self.timer.cancel(heartbeat_key(group_id, member_id))
            self._prepare_rebalance(group, f"removing {sorted(pending)} on pending sync request expiration")

    def _remove_sync_expiration(self, group: ClassicGroup) -> None:
        group.pending_sync_members.clear()
        self.timer.cancel(sync_key(group.group_id))

    def _reschedule_heartbeat(self, group: ClassicGroup, member: Member, timeout_ms: int | None = None) -> None:
        gid, mid = group.group_id, member.member_id
        delay = member.session_timeout_ms if timeout_ms is None else timeout_ms
        self.timer.schedule(heartbeat_key(gid, mid), delay, lambda: self._expire_heartbeat(gid, mid))

    def _expire_heartbeat(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return
        if group.is_pending_member(member_id):
            log.info("pending member %s of group %s removed after its session timeout", member_id, group_id)
            group.remove(member_id)
            if group.is_in(GroupState.PREPARING_REBALANCE) and group.has_all_members_joined():
                self._complete_join(group)
        elif group.has_member(member_id):
            member = group.member(member_id)
            if not member.has_satisfied_heartbeat():
                log.info("member %s of group %s has failed (session timeout), removing it", member_id, group_id)
                self._remove_member_and_update(group, member, f"removing member {member_id} on heartbeat expiration")

    def _remove_member_and_update(self, group: ClassicGroup, member: Member, reason: str) -> None:
        group.complete_join(member, join_response(UNKNOWN_MEMBER_ID, errors.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance_or_complete_join(group, reason)
        elif group.is_in(GroupState.PREPARING_REBALANCE) and group.has_all_members_joined():
            self._complete_join(group)

    def _reset_and_propagate_assignment_with_error(self, group: ClassicGroup, error: int) -> None:
        for m in group.all_members():
            m.assignment = EMPTY_ASSIGNMENT
        self._propagate_assignment(group, error)

    def _set_and_propagate_assignment(self, group: ClassicGroup, assignment: dict[str, bytes]) -> None:
        for m in group.all_members():
            m.assignment = assignment.get(m.member_id, EMPTY_ASSIGNMENT)
        self._propagate_assignment(group, errors.NONE)

    def _propagate_assignment(self, group: ClassicGroup, error: int) -> None:
        ptype = group.protocol_type if error == errors.NONE else None
        pname = group.protocol_name if error == errors.NONE else None
        for m in group.all_members():
            if group.complete_sync(m, sync_response(error, ptype, pname, m.assignment)):
                self._reschedule_heartbeat(group, m)

    # ---- SyncGroup -------------------------------------------------------------------

    def sync_group(self, ctx: RequestContext, group_id: str, generation_id: int, member_id: str, instance_id: str | None, protocol_type: str | None, protocol_name: str | None, assignments: list[tuple[str, bytes]]) -> asyncio.Future[Response]:
        fut: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        if ctx.api_version >= 5 and (protocol_type is None or protocol_name is None):
            fut.set_result(sync_response(errors.INCONSISTENT_GROUP_PROTOCOL))
            return fut
        if not self.active:
            fut.set_result(sync_response(errors.COORDINATOR_NOT_AVAILABLE))
            return fut
        if not group_id:
            fut.set_result(sync_response(errors.INVALID_GROUP_ID))
            return fut
        group = self.groups.get(group_id)
        if group is None or group.is_empty:
            fut.set_result(sync_response(errors.UNKNOWN_MEMBER_ID))
            return fut
        error = self._validate_sync(group, generation_id, member_id, instance_id, protocol_type, protocol_name)
        if error:
            fut.set_result(sync_response(error))
        elif group.is_in(GroupState.PREPARING_REBALANCE):
            fut.set_result(sync_response(errors.REBALANCE_IN_PROGRESS))
        elif group.is_in(GroupState.COMPLETING_REBALANCE):
            group.member(member_id).awaiting_sync = fut
            self._remove_pending_sync_member(group, member_id)
            if group.is_leader(member_id):
                log.info("assignment received from leader %s of group %s for generation %d (%d members)", member_id, group_id, group.generation_id, group.num_members())
                assignment = dict(assignments)
                for m in group.all_members():
                    assignment.setdefault(m.member_id, EMPTY_ASSIGNMENT)
                error, _ = self._write(group_id, [self._group_metadata_record(group, assignment)])
                if group.is_in(GroupState.COMPLETING_REBALANCE) and generation_id == group.generation_id:
                    if error:
                        error = _append_error_to_response_error(error)
                        self._reset_and_propagate_assignment_with_error(group, error)
                        self._maybe_prepare_rebalance_or_complete_join(group, f"error {error} when storing the group assignment during SyncGroup (member {member_id})")
                    else:
                        self._set_and_propagate_assignment(group, assignment)
                        group.transition_to(GroupState.STABLE)
        elif group.is_in(GroupState.STABLE):
            self._remove_pending_sync_member(group, member_id)
            member = group.member(member_id)
            fut.set_result(sync_response(errors.NONE, group.protocol_type, group.protocol_name, member.assignment))
        else:
            fut.set_result(sync_response(errors.COORDINATOR_NOT_AVAILABLE))
        return fut

    @staticmethod
    def _validate_sync(group: ClassicGroup, generation_id: int, member_id: str, instance_id: str | None, protocol_type: str | None, protocol_name: str | None) -> int:
        if group.is_in(GroupState.DEAD):
            return errors.COORDINATOR_NOT_AVAILABLE
        error = group.validate_member(member_id, instance_id)
        if error:
            return error
        if generation_id != group.generation_id:
            return errors.ILLEGAL_GENERATION
        if (protocol_type is not None and group.protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and group.protocol_name is not None and protocol_name != group.protocol_name
        ):
            return errors.INCONSISTENT_GROUP_PROTOCOL
        return errors.NONE

    def _remove_pending_sync_member(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if group.is_in(GroupState.DEAD, GroupState.EMPTY, GroupState.PREPARING_REBALANCE) or not group.pending_sync_members:
            self.timer.cancel(sync_key(group.group_id))

    # ---- Heartbeat, LeaveGroup ---------------------------------------------------------

    def heartbeat(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None) -> int:
        if not self.active:
            return errors.COORDINATOR_NOT_AVAILABLE
        if not group_id:
            return errors.INVALID_GROUP_ID
        group = self.groups.get(group_id)
        if group is None:
            return errors.UNKNOWN_MEMBER_ID
        if group.is_in(GroupState.DEAD):
            return errors.COORDINATOR_NOT_AVAILABLE
        error = group.validate_member(member_id, instance_id)
        if error:
            return error
        if generation_id != group.generation_id:
            return errors.ILLEGAL_GENERATION
        if group.is_in(GroupState.EMPTY):
            return errors.UNKNOWN_MEMBER_ID
        self._reschedule_heartbeat(group, group.member(member_id))
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return errors.REBALANCE_IN_PROGRESS
        return errors.NONE

    def leave_group(self, group_id: str, members: list[tuple[str, str | None, str | None]]) -> tuple[int, list[Response]]:
        """(top-level error, per-member responses) for [(member id, group instance id, reason)]."""
        if not self.active:
            return errors.COORDINATOR_NOT_AVAILABLE, []
        if not group_id:
            return errors.INVALID_GROUP_ID, []
        group = self.groups.get(group_id)
        if group is None:
            return errors.NONE, [
                {"member_id": mid, "group_instance_id": iid, "error_code": errors.UNKNOWN_MEMBER_ID} for mid, iid, _ in members
            ]
        if group.is_in(GroupState.DEAD):
            return errors.COORDINATOR_NOT_AVAILABLE, []
        responses: list[Response] = []
        for member_id, instance_id, reason in members:
            resp = {"member_id": member_id, "group_instance_id": instance_id, "error_code": errors.NONE}
            if member_id == UNKNOWN_MEMBER_ID:
                static_id = group.static_member_id(instance_id) if instance_id is not None else None
                if static_id is not None:
                    self._remove_current_member(group, static_id, reason)
                else:
                    resp["error_code"] = errors.UNKNOWN_MEMBER_ID
            elif group.is_pending_member(member_id):
                group.remove(member_id)
                self.timer.cancel(heartbeat_key(group_id, member_id))
                log.info("pending member %s has left group %s (reason: %s)", member_id, group_id, reason or "not provided")
            else:
                error = group.validate_member(member_id, instance_id)
                if error:
                    resp["error_code"] = error
                else:
                    self._remove_current_member(group, member_id, reason)
            responses.append(resp)
        valid = [r["member_id"] for r in responses if r["error_code"] == errors.NONE]
        if valid:
            reason = f"explicit LeaveGroup request for ({', '.join(valid)}) members"
            if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
                self._maybe_prepare_rebalance_or_complete_join(group, reason)
            elif group.is_in(GroupState.PREPARING_REBALANCE):
                self._maybe_complete_join_phase(group)
        return errors.NONE, responses

    def _remove_current_member(self, group: ClassicGroup, member_id: str, reason: str | None) -> None:
        member = group.member(member_id)
        self.timer.cancel(heartbeat_key(group.group_id, member_id))
        log.info("member %s has left group %s (reason: %s)", member_id, group.group_id, reason or "not provided")
        group.complete_join(member, join_response(UNKNOWN_MEMBER_ID, errors.UNKNOWN_MEMBER_ID))
        group.remove(member_id)

    # ---- offsets -----------------------------------------------------------------------

    def _validate_offset_commit(self, group: ClassicGroup, member_id: str, instance_id: str | None, generation_id: int) -> int:
        if group.is_in(GroupState.DEAD):
            return errors.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and group.is_in(GroupState.EMPTY):
            return errors.NONE  # admin client or a consumer without group management
        if generation_id >= 0 or member_id or instance_id is not None:
            error = group.validate_member(member_id, instance_id)
            if error:
                return error
            if generation_id != group.generation_id:
                return errors.ILLEGAL_GENERATION
        elif not group.is_in(GroupState.EMPTY):
            return errors.UNKNOWN_MEMBER_ID
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            return errors.REBALANCE_IN_PROGRESS
        return errors.NONE

    def commit_offsets(
        self, group_id: str, generation_id: int, member_id: str, instance_id: str | None, retention_ms: int,
        topics: list[tuple[str, list[tuple[int, int, int, str | None]]]], api_version: int,
    ) -> tuple[int, list[tuple[str, list[tuple[int, int]]]]]:
        """(group error, [(topic, [(partition, error)])]) for [(topic, [(partition, offset, leader epoch, metadata)])]."""
        if not self.active:
            return errors.COORDINATOR_NOT_AVAILABLE, []
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                return (errors.GROUP_ID_NOT_FOUND if api_version >= 9 else errors.ILLEGAL_GENERATION), []
            log.info("creating simple consumer group %s via a manual offset commit", group_id)
            group = self._create_group(group_id)
        error = self._validate_offset_commit(group, member_id, instance_id, generation_id)
        if error:
            return error, []
        if group.is_in(GroupState.STABLE, GroupState.PREPARING_REBALANCE):
            self._reschedule_heartbeat(group, group.member(member_id))
        now = now_ms()
        expire = None if retention_ms == -1 else now + retention_ms
        records: list[Record] = []
        results: list[tuple[str, list[tuple[int, int]]]] = []
        for topic, partitions in topics:
            out = []
            for partition, offset, leader_epoch, metadata in partitions:
                if metadata is not None and _java_string_length(metadata) > self.offset_metadata_max_bytes:
                    out.append((partition, errors.OFFSET_METADATA_TOO_LARGE))
                    continue
                out.append((partition, errors.NONE))
                om = OffsetAndMetadata(offset, leader_epoch, metadata or "", now, expire)
                records.append((offset_commit_key(group_id, topic, partition), offset_commit_value(om)))
            results.append((topic, out))
        if records:
            error = self._write_and_replay(group_id, records)
            if error:
                return _append_error_to_response_error(error), []
        return errors.NONE, results

    def fetch_offsets(self, group_id: str, topics: list[tuple[str, list[int]]] | None,
                      require_stable: bool = False) -> tuple[int, list[tuple[str, list[Response]]]]:
        """(group error, [(topic, [partition rows])]); ``topics`` None = every committed offset.

        With ``require_stable``, partitions with pending transactional offsets answer
        UNSTABLE_OFFSET_COMMIT (Kafka's OffsetFetch v7+ requireStable)."""
        if not self.active:
            return errors.COORDINATOR_NOT_AVAILABLE, []
        group = self.groups.get(group_id)
        committed = self.offsets.get(group_id, {}) if group is not None and not group.is_in(GroupState.DEAD) else {}

        unstable = self._pending_partitions(group_id) if require_stable else set()

        def row(partition: int, om: OffsetAndMetadata | None, topic: str = "") -> Response:
            if (topic, partition) in unstable:
                return {"partition_index": partition, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "", "error_code": errors.UNSTABLE_OFFSET_COMMIT}
            if om is None:
                return {"partition_index": partition, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "", "error_code": errors.NONE}
            return {"partition_index": partition, "committed_offset": om.offset, "committed_leader_epoch": om.leader_epoch, "metadata": om.metadata, "error_code": errors.NONE}

        if topics is None:
            return errors.NONE, [(t, [row(p, om, t) for p, om in parts.items()]) for t, parts in committed.items()]
        return errors.NONE, [(t, [row(p, committed.get(t, {}).get(p), t) for p in parts]) for t, parts in topics]

    # ---- transactional offsets (TxnOffsetCommit) ----------------------------------------------

    def _pending_partitions(self, group_id: str) -> set[tuple[str, int]]:
        return {(t, p) for groups in self.pending_txn_offsets.values() for t, parts in groups.get(group_id, {}).items() for p in parts}

    def has_pending_transactional_offsets(self, group_id: str) -> bool:
        return any(group_id in groups for groups in self.pending_txn_offsets.values())

    def replay_transactional(self, producer_id: int, key_bytes: bytes, value: bytes | None, record_offset: int) -> None:
        key = decode_key(key_bytes)
        if not isinstance(key, OffsetCommitKey) or value is None:
            return
        if key.group not in self.groups:
            self._create_group(key.group)
        om = decode_offset_commit_value(value, record_offset)
        self.pending_txn_offsets.setdefault(producer_id, {}).setdefault(key.group, {}).setdefault(key.topic, {})[key.partition] = om

    def complete_transaction(self, producer_id: int, commit: bool, partition: int) -> None:
        """A transaction marker was written to __consumer_offsets-``partition``: publish (commit)
        or drop (abort) the producer's pending offsets of the groups of that partition
        (Kafka's replayEndTransactionMarker: a newer non-transactional commit is kept)."""
        groups = self.pending_txn_offsets.get(producer_id)
        if not groups:
            return
        for group_id in [g for g in groups if self.partition_for(g) == partition]:
            pending = groups.pop(group_id)
            if not commit:
                continue
            for topic, parts in pending.items():
                for p, om in parts.items():
                    existing = self.offsets.get(group_id, {}).get(topic, {}).get(p)
                    if existing is None or om.record_offset > existing.record_offset:
                        self.offsets.setdefault(group_id, {}).setdefault(topic, {})[p] = om
        if not groups:
            del self.pending_txn_offsets[producer_id]

    def commit_transactional_offsets(
        self, group_id: str, producer_id: int, producer_epoch: int, generation_id: int, member_id: str,
        instance_id: str | None, topics: list[tuple[str, list[tuple[int, int, int, str | None]]]],
    ) -> tuple[int, list[tuple[str, list[tuple[int, int]]]]]:
        """TxnOffsetCommit: the offsets are written as transactional records of the producer and
        become visible with the transaction's COMMIT marker (dropped on ABORT)."""
        if not self.active:
            return errors.COORDINATOR_NOT_AVAILABLE, []
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                return errors.ILLEGAL_GENERATION, []
            group = self._create_group(group_id)
        if group.is_in(GroupState.DEAD):
            return errors.COORDINATOR_NOT_AVAILABLE, []
        if not (generation_id < 0 and not member_id and instance_id is None):
            error = self._validate_offset_commit(group, member_id, instance_id, generation_id)
            if error:
                return error, []
        now = now_ms()
        records: list[Record] = []
        entries: list[tuple[str, int, OffsetAndMetadata]] = []
        results: list[tuple[str, list[tuple[int, int]]]] = []
        for topic, partitions in topics:
            out = []
            for partition, offset, leader_epoch, metadata in partitions:
                if metadata is not None and _java_string_length(metadata) > self.offset_metadata_max_bytes:
                    out.append((partition, errors.OFFSET_METADATA_TOO_LARGE))
                    continue
                out.append((partition, errors.NONE))
                om = OffsetAndMetadata(offset, leader_epoch, metadata or "", now, None)
                records.append((offset_commit_key(group_id, topic, partition), offset_commit_value(om)))
                entries.append((topic, partition, om))
            results.append((topic, out))
        if records:
            error, first = self._write_transactional(group_id, producer_id, producer_epoch, records)
            if error:
                return _append_error_to_response_error(error), []
            pending = self.pending_txn_offsets.setdefault(producer_id, {}).setdefault(group_id, {})
            for i, (topic, partition, om) in enumerate(entries):
                om.record_offset = first + i
                pending.setdefault(topic, {})[partition] = om
        return errors.NONE, results

    def _write_transactional(self, group_id: str, producer_id: int, producer_epoch: int, records: list[Record]) -> tuple[int, int]:
        """Append ``records`` as one transactional batch of the producer: (error code, first offset)."""
        partition = self.partition_for(group_id)
        writer = self.broker.replica_manager
        lg = writer.get_log(OFFSETS_TOPIC, partition)
        if lg is None:
            return errors.COORDINATOR_NOT_AVAILABLE, -1
        # Kafka writes coordinator batches without sequence checks; our producer state checks them,
        # so the batch continues the producer's sequence on this partition.
        seq = 0
        entry = getattr(getattr(lg, "producer_state", None), "producers", {}).get(producer_id)
        if entry is not None and entry.producer_epoch == producer_epoch and entry.last_seq >= 0:
            seq = entry.last_seq + 1
        ts = now_ms()
        batch = bytearray(encode_batch(
            [BatchRecord(i, ts, key, value) for i, (key, value) in enumerate(records)],
            compression=self.compression_codec, producer_id=producer_id, producer_epoch=producer_epoch,
            base_sequence=seq, is_transactional=True, base_timestamp=ts, max_timestamp=ts,
        ))
        try:
            info = writer.append_batch(OFFSETS_TOPIC, partition, batch)
        except Exception as e:
            code = getattr(e, "error_code", None)
            log.warning("cannot append transactional offsets to %s-%d: %s", OFFSETS_TOPIC, partition, e)
            return (code if isinstance(code, int) else errors.UNKNOWN_SERVER_ERROR), -1
        return errors.NONE, info.first_offset

    def delete_offsets(self, group_id: str, topics: list[tuple[str, list[int]]]) -> tuple[int, list[tuple[str, list[tuple[int, int]]]]]:
        """OffsetDelete: (group error, [(topic, [(partition, error)])])."""
        if not self.active:
            return errors.COORDINATOR_NOT_AVAILABLE, []
        if not group_id:
            return errors.INVALID_GROUP_ID, []
        group = self.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return errors.GROUP_ID_NOT_FOUND, []
        if group.is_in(GroupState.STABLE, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE) and not group.uses_consumer_protocol():
            return errors.NON_EMPTY_GROUP, []
        records: list[Record] = []
        results = []
        committed = self.offsets.get(group_id, {})
        for topic, partitions in topics:
            if group.is_subscribed_to_topic(topic):
                results.append((topic, [(p, errors.GROUP_SUBSCRIBED_TO_TOPIC) for p in partitions]))
                continue
            results.append((topic, [(p, errors.NONE) for p in partitions]))
            for p in partitions:
                if p in committed.get(topic, {}):
                    records.append((offset_commit_key(group_id, topic, p), None))
        if records:
            error = self._write_and_replay(group_id, records)
            if error:
                return _append_error_to_response_error(error), []
        return errors.NONE, results

    def on_topic_deleted(self, topic: str) -> int:
        """Kafka's onPartitionsDeleted: every group's committed offsets of a deleted topic go
        (tombstones in __consumer_offsets), so a topic created again under the name starts clean.
        Returns the number of tombstones written."""
        if not self.active:
            return 0
        written = 0
        for gid, committed in list(self.offsets.items()):
            parts = committed.get(topic)
            if not parts:
                continue
            records: list[Record] = [(offset_commit_key(gid, topic, p), None) for p in sorted(parts)]
            if self._write_and_replay(gid, records) == errors.NONE:
                written += len(records)
        if written:
            log.info("deleted %d committed offsets of deleted topic %s", written, topic)
        return written

    # ---- ListGroups, DescribeGroups, DeleteGroups ------------------------------------------

    def list_groups(self, states_filter: Iterable[str], types_filter: Iterable[str]) -> tuple[int, list[Response]]:
        if not self.active:
            return errors.COORDINATOR_NOT_AVAILABLE, []
        states = {s.strip().lower() for s in states_filter}
        types = {t.lower() if t.lower() in GROUP_TYPES else "unknown" for t in types_filter}
        out = []
        for group in self._groups_in_kafka_order():
            if states and group.state.value.lower() not in states:
                continue
            if types and "classic" not in types:
                continue
            out.append({"group_id": group.group_id, "protocol_type": group.protocol_type or "", "group_state": group.state.value, "group_type": "classic"})
        return errors.NONE, out

    def _groups_in_kafka_order(self) -> list[ClassicGroup]:
        """Shards in the coordinator runtime's ConcurrentHashMap order, groups in each shard's table order."""
        partitions = chm_order(range(self.num_partitions), lambda p: _topic_partition_hash(OFFSETS_TOPIC, p))
        return [self.groups[gid] for p in partitions for gid in self._group_order.get(p, ()) if gid in self.groups]

    def _by_coordinator_partition(self, group_ids: list[str]) -> list[str]:
        """Group ids in the order Kafka answers them: by __consumer_offsets partition, in
        ``HashMap<TopicPartition, List<String>>`` order, request order within a partition."""
        by_tp: JavaHashMap[int, list[str]] = JavaHashMap(lambda p: _topic_partition_hash(OFFSETS_TOPIC, p))
        for gid in group_ids:
            p = self.partition_for(gid)
            lst = by_tp.get(p)
            if lst is None:
                lst = []
                by_tp[p] = lst
            lst.append(gid)
        return [gid for lst in by_tp.values() for gid in lst]

    def describe_groups(self, group_ids: list[str], api_version: int, include_authorized_operations: bool) -> list[Response]:
        out = []
        ops = GROUP_AUTHORIZED_OPERATIONS if include_authorized_operations and api_version >= 3 else NO_AUTHORIZED_OPERATIONS
        for gid in self._by_coordinator_partition(group_ids):
            if not self.active:
                out.append({"group_id": gid, "error_code": errors.COORDINATOR_NOT_AVAILABLE, "error_message": None, "group_state": "", "protocol_type": "", "protocol_data": "", "members": [], "authorized_operations": NO_AUTHORIZED_OPERATIONS})
                continue
            group = self.groups.get(gid)
            if group is None or group.is_in(GroupState.DEAD):
                if api_version >= 6:
                    out.append({"group_id": gid, "error_code": errors.GROUP_ID_NOT_FOUND, "error_message": f"Group {gid} not found.", "group_state": GroupState.DEAD.value, "protocol_type": "", "protocol_data": "", "members": [], "authorized_operations": NO_AUTHORIZED_OPERATIONS})
                else:
                    out.append({"group_id": gid, "error_code": errors.NONE, "error_message": None, "group_state": GroupState.DEAD.value, "protocol_type": "", "protocol_data": "", "members": [], "authorized_operations": ops})
                continue
            if group.is_in(GroupState.STABLE):
                members = [m.describe(group.protocol_name) for m in group.all_members()]
                protocol_data = group.protocol_name or ""
            else:
                members = [m.describe_no_metadata() for m in group.all_members()]
                protocol_data = ""
            out.append({
                "group_id": gid, "error_code": errors.NONE, "error_message": None, "group_state": group.state.value,
                "protocol_type": group.protocol_type or "", "protocol_data": protocol_data, "members": members,
                "authorized_operations": ops,
            })
        return out

    def delete_groups(self, group_ids: list[str]) -> list[Response]:
        results: list[Response] = []
        ordered = self._by_coordinator_partition(list(dict.fromkeys(group_ids)))
        by_partition: dict[int, list[tuple[str, list[Record]]]] = {}
        for gid in ordered:
            if not self.active:
                results.append({"group_id": gid, "error_code": errors.COORDINATOR_NOT_AVAILABLE})
                continue
            group = self.groups.get(gid)
            if group is None or group.is_in(GroupState.DEAD):
                results.append({"group_id": gid, "error_code": errors.GROUP_ID_NOT_FOUND})
                continue
            if group.is_in(GroupState.STABLE, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE):
                results.append({"group_id": gid, "error_code": errors.NON_EMPTY_GROUP})
                continue
            records: list[Record] = [
                (offset_commit_key(gid, t, p), None)
                for t, parts in self.offsets.get(gid, {}).items() for p in parts
            ]
            records.append((group_metadata_key(gid), None))
            result = {"group_id": gid, "error_code": errors.NONE}
            results.append(result)
            by_partition.setdefault(self.partition_for(gid), []).append((gid, records))
        # One write per __consumer_offsets partition, as Kafka writes one batch per coordinator shard.
        for entries in by_partition.values():
            records = [r for _, recs in entries for r in recs]
            error = self._write_and_replay(entries[0][0], records)
            if error:
                failed = {gid for gid, _ in entries}
                for r in results:
                    if r["group_id"] in failed:
                        r["error_code"] = _append_error_to_response_error(error)
            else:
                log.info("deleted groups %s", [gid for gid, _ in entries])
        return results

    # ---- offset expiration -------------------------------------------------------------------

    def _expiration_base(self, group: ClassicGroup) -> Callable[[OffsetAndMetadata], int] | None:
        """Kafka's ClassicGroup.offsetExpirationCondition: what the retention period counts from."""
        if group.protocol_type is not None:
            if group.is_in(GroupState.EMPTY):
                ts = group.current_state_timestamp
                return lambda om: ts if ts is not None else om.commit_timestamp
            if group.uses_consumer_protocol() and group.subscribed_topics is not None and group.is_in(GroupState.STABLE):
                return lambda om: om.commit_timestamp
            return None
        return lambda om: om.commit_timestamp

    def cleanup_group_metadata(self, now: int | None = None) -> int:
        """Expire offsets (``offsets.retention.minutes``) and delete empty groups left without offsets.

        Returns the number of tombstones written.
        """
        if not self.active:
            return 0
        now = now_ms() if now is None else now
        by_partition: dict[int, tuple[str, list[Record]]] = {}
        for gid in list(self.groups):
            group = self.groups[gid]
            records: list[Record] = []
            all_expired = True
            committed = self.offsets.get(gid)
            pending = self._pending_partitions(gid)  # kept while a transaction may still commit them (Kafka)
            if committed:
                base = self._expiration_base(group)
                if base is None:
                    all_expired = False
                else:
                    for topic, parts in committed.items():
                        if group.is_subscribed_to_topic(topic):
                            all_expired = False
                            continue
                        for p, om in parts.items():
                            expired = now >= om.expire_timestamp if om.expire_timestamp is not None else now - base(om) >= self.offsets_retention_ms
                            if expired and (topic, p) not in pending:
                                records.append((offset_commit_key(gid, topic, p), None))
                            else:
                                all_expired = False
            if all_expired and group.is_empty and not pending:
                records.append((group_metadata_key(gid), None))
            if records:
                entry = by_partition.setdefault(self.partition_for(gid), (gid, []))
                entry[1].extend(records)
        written = 0
        for gid, records in by_partition.values():
            if self._write_and_replay(gid, records) == errors.NONE:
                written += len(records)
        if written:
            log.info("wrote %d tombstones while cleaning up expired offsets and empty groups", written)
        return written

    async def periodic_cleanup(self) -> None:
        self.cleanup_group_metadata()


def _set(fut: asyncio.Future[Response], response: Response) -> None:
    if not fut.done():
        fut.set_result(response)
