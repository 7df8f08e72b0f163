"""GroupMetadataManager: classic groups and their members (Kafka's GroupMetadataManager for the
classic protocol): JoinGroup (new, existing and static members), SyncGroup, Heartbeat,
LeaveGroup, ListGroups, DescribeGroups, DeleteGroups, and the replay of group metadata records.
The rebalance state machine and its timers are the Rebalancer's (``rebalance.py``)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from kafka_sidecar.protocol import errors

from .group import EMPTY_ASSIGNMENT, UNKNOWN_MEMBER_ID, ClassicGroup, GroupState, Member
from .messages import (
    JoinRequest,
    RequestContext,
    Response,
    join_response,
    set_response,
    sync_response,
)
from .rebalance import Rebalancer, current_join_response
from .records import (
    GroupMetadataKey,
    decode_group_metadata_value,
    group_metadata_key,
    offset_commit_key,
)
from .store import (
    GroupStore,
    Record,
    append_error_to_response_error,
    empty_group_metadata_record,
    group_from_record,
    group_metadata_record,
)
from .timer import Timer, heartbeat_key, sync_key
from .writer import GroupRecordWriter

log = logging.getLogger(__name__.rpartition(".")[0] + ".coordinator")

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000  # Kafka's CLASSIC_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS
NO_AUTHORIZED_OPERATIONS = -2147483648
# READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS: what Kafka reports for a group without an authorizer.
GROUP_AUTHORIZED_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11)
GROUP_TYPES = {"classic", "consumer", "share", "streams"}


class GroupMetadataManager:
    """Membership of the groups in the shared store."""

    def __init__(
        self, store: GroupStore, writer: GroupRecordWriter, timer: Timer, rebalance: Rebalancer,
        min_session_timeout_ms: int, max_session_timeout_ms: int, max_group_size: int,
    ) -> None:
        self.store = store
        self.writer = writer
        self.timer = timer
        self.rebalance = rebalance
        self.min_session_timeout_ms = min_session_timeout_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.max_group_size = max_group_size

    # ---- loading, unloading, replay ------------------------------------------------------

    def on_loaded(self) -> None:
        """Kafka's onLoaded: time every member's session, rebalance groups over capacity."""
        for group in self.store.groups.values():
            for member in group.all_members():
                self.rebalance.reschedule_heartbeat(group, member)
            if group.num_members() > self.max_group_size:
                self.rebalance.prepare_rebalance(group, f"freshly-loaded group {group.group_id} is over capacity {self.max_group_size}")

    def on_unloaded(self) -> None:
        """Kafka's onUnloaded: answer parked JoinGroup/SyncGroup requests with NOT_COORDINATOR."""
        for group in self.store.groups.values():
            for member in group.all_members():
                group.complete_join(member, join_response(member.member_id, errors.NOT_COORDINATOR))
                group.complete_sync(member, sync_response(errors.NOT_COORDINATOR))

    def replay(self, key: GroupMetadataKey, value: bytes | None) -> None:
        """A group metadata record (or its tombstone) in the log."""
        if value is None:
            self.store.remove_group(key.group)
        else:
            self.store.put_group(group_from_record(key.group, decode_group_metadata_value(value)))

    # ---- JoinGroup -------------------------------------------------------------------

    def join_group(self, ctx: RequestContext, req: JoinRequest) -> asyncio.Future[Response]:
        fut: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        if not self.store.active:
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
        group = self.store.groups.get(group_id)
        is_new_group = group is None
        if group is None:
            if not is_unknown_member:
                fut.set_result(join_response(member_id, errors.UNKNOWN_MEMBER_ID))
                return
            group = self.store.create_group(group_id)
        writes_before = self.writer.writes
        if not self._accept_joining_member(group, member_id):
            group.remove(member_id)
            fut.set_result(join_response(UNKNOWN_MEMBER_ID, errors.GROUP_MAX_SIZE_REACHED))
        elif is_unknown_member:
            self._join_new_member(ctx, req, group, fut)
        else:
            self._join_existing_member(ctx, req, group, fut)
        if is_new_group and self.writer.writes == writes_before:
            # Persist the new group, as Kafka does when the join wrote nothing else.
            error, _ = self.writer.write(group_id, [empty_group_metadata_record(group)])
            if error and not fut.done():
                fut.set_result(join_response("", append_error_to_response_error(error)))

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
                self.timer.schedule(heartbeat_key(gid, new_member_id), req.session_timeout_ms, lambda: self.rebalance.expire_heartbeat(gid, new_member_id))
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
                    fut.set_result(current_join_response(group, member_id, group.current_members_for_leader() if group.is_leader(member_id) else []))
                else:
                    self._update_member_then_rebalance_or_complete_join(req, group, member, f"updating metadata for member {member_id} during {group.state.value}", fut)
            elif group.is_in(GroupState.STABLE):
                if group.is_leader(member_id):
                    self._update_member_then_rebalance_or_complete_join(req, group, member, f"leader {member_id} re-joining group during {group.state.value}", fut)
                elif not member.matches(req.protocols):
                    self._update_member_then_rebalance_or_complete_join(req, group, member, f"updating metadata for member {member_id} during {group.state.value}", fut)
                else:
                    fut.set_result(current_join_response(group, member_id, []))
            else:
                log.warning("rejoining member %s of group %s in unexpected state %s", member_id, group.group_id, group.state.value)
                fut.set_result(join_response(member_id, errors.UNKNOWN_MEMBER_ID))

    def _update_static_member_then_rebalance_or_complete_join(self, ctx: RequestContext, req: JoinRequest, group: ClassicGroup, old_member_id: str, new_member_id: str, fut: asyncio.Future[Response]) -> None:
        current_leader = group.leader_id
        fenced_join = join_response(old_member_id, errors.FENCED_INSTANCE_ID)
        fenced_sync = sync_response(errors.FENCED_INSTANCE_ID)
        new = group.replace_static_member(req.group_instance_id or "", old_member_id, new_member_id, fenced_join, fenced_sync)
        self.timer.cancel(heartbeat_key(group.group_id, old_member_id))
        self.rebalance.reschedule_heartbeat(group, new)
        old_rebalance, old_session, old_protocols = new.rebalance_timeout_ms, new.session_timeout_ms, list(new.protocols)
        group.update_member(new, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, fut)
        if group.is_in(GroupState.STABLE):
            if (group.protocol_name or "") == group.select_protocol():
                # The selected protocol does not change: persist the new member id, no rebalance.
                error, _ = self.writer.write(group.group_id, [group_metadata_record(group, group.group_assignment())])
                if error:
                    group.update_member(new, old_protocols, old_rebalance, old_session, None)
                    old = group.replace_static_member(req.group_instance_id or "", new_member_id, old_member_id, join_response(""), sync_response())
                    self.rebalance.reschedule_heartbeat(group, old)
                    set_response(fut, join_response(
                        UNKNOWN_MEMBER_ID, append_error_to_response_error(error), generation_id=group.generation_id,
                        protocol_name=group.protocol_name, protocol_type=group.protocol_type, leader=current_leader or "",
                    ))
                elif ctx.api_version >= 9:
                    is_leader = group.is_leader(new_member_id)
                    group.complete_join(new, current_join_response(
                        group, new_member_id, group.current_members_for_leader() if is_leader else [], skip_assignment=is_leader,
                    ))
                else:
                    group.complete_join(new, current_join_response(group, new_member_id, [], leader=current_leader or ""))
                return
            self.rebalance.maybe_prepare_rebalance_or_complete_join(group, f"group's selected protocol will change because static member {new_member_id} joined with a change of protocol")
            return
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            self.rebalance.prepare_rebalance(group, f"updating metadata for static member {new_member_id} with instance id {req.group_instance_id}")
            return
        self.rebalance.maybe_complete_join_phase(group)

    def _update_member_then_rebalance_or_complete_join(self, req: JoinRequest, group: ClassicGroup, member: Member, reason: str, fut: asyncio.Future[Response]) -> None:
        group.update_member(member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, fut)
        self.rebalance.maybe_prepare_rebalance_or_complete_join(group, reason)

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
        self.rebalance.reschedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self.rebalance.maybe_prepare_rebalance_or_complete_join(group, f"adding new member {member_id} with group instance id {req.group_instance_id}; client reason: {req.reason or 'not provided'}")


    # ---- SyncGroup -------------------------------------------------------------------

    def sync_group(self, ctx: RequestContext, group_id: str, generation_id: int, member_id: str, instance_id: str | None, protocol_type: str | None, protocol_name: str | None, assignments: list[tuple[str, bytes]]) -> asyncio.Future[Response]:
        fut: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        if ctx.api_version >= 5 and (protocol_type is None or protocol_name is None):
            fut.set_result(sync_response(errors.INCONSISTENT_GROUP_PROTOCOL))
            return fut
        if not self.store.active:
            fut.set_result(sync_response(errors.COORDINATOR_NOT_AVAILABLE))
            return fut
        if not group_id:
            fut.set_result(sync_response(errors.INVALID_GROUP_ID))
            return fut
        group = self.store.groups.get(group_id)
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
                error, _ = self.writer.write(group_id, [group_metadata_record(group, assignment)])
                if group.is_in(GroupState.COMPLETING_REBALANCE) and generation_id == group.generation_id:
                    if error:
                        error = append_error_to_response_error(error)
                        self.rebalance.reset_and_propagate_assignment_with_error(group, error)
                        self.rebalance.maybe_prepare_rebalance_or_complete_join(group, f"error {error} when storing the group assignment during SyncGroup (member {member_id})")
                    else:
                        self.rebalance.set_and_propagate_assignment(group, assignment)
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
        if not self.store.active:
            return errors.COORDINATOR_NOT_AVAILABLE
        if not group_id:
            return errors.INVALID_GROUP_ID
        group = self.store.groups.get(group_id)
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
        self.rebalance.reschedule_heartbeat(group, group.member(member_id))
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return errors.REBALANCE_IN_PROGRESS
        return errors.NONE

    def leave_group(self, group_id: str, members: list[tuple[str, str | None, str | None]]) -> tuple[int, list[Response]]:
        """(top-level error, per-member responses) for [(member id, group instance id, reason)]."""
        if not self.store.active:
            return errors.COORDINATOR_NOT_AVAILABLE, []
        if not group_id:
            return errors.INVALID_GROUP_ID, []
        group = self.store.groups.get(group_id)
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
                self.rebalance.maybe_prepare_rebalance_or_complete_join(group, reason)
            elif group.is_in(GroupState.PREPARING_REBALANCE):
                self.rebalance.maybe_complete_join_phase(group)
        return errors.NONE, responses

    def _remove_current_member(self, group: ClassicGroup, member_id: str, reason: str | None) -> None:
        member = group.member(member_id)
        self.timer.cancel(heartbeat_key(group.group_id, member_id))
        log.info("member %s has left group %s (reason: %s)", member_id, group.group_id, reason or "not provided")
        group.complete_join(member, join_response(UNKNOWN_MEMBER_ID, errors.UNKNOWN_MEMBER_ID))
        group.remove(member_id)

    # ---- ListGroups, DescribeGroups, DeleteGroups ------------------------------------------

    def list_groups(self, states_filter: Iterable[str], types_filter: Iterable[str]) -> tuple[int, list[Response]]:
        if not self.store.active:
            return errors.COORDINATOR_NOT_AVAILABLE, []
        states = {s.strip().lower() for s in states_filter}
        types = {t.lower() if t.lower() in GROUP_TYPES else "unknown" for t in types_filter}
        out = []
        for group in self.store.groups_in_kafka_order():
            if states and group.state.value.lower() not in states:
                continue
            if types and "classic" not in types:
                continue
            out.append({"group_id": group.group_id, "protocol_type": group.protocol_type or "", "group_state": group.state.value, "group_type": "classic"})
        return errors.NONE, out

    def describe_groups(self, group_ids: list[str], api_version: int, include_authorized_operations: bool) -> list[Response]:
        out = []
        ops = GROUP_AUTHORIZED_OPERATIONS if include_authorized_operations and api_version >= 3 else NO_AUTHORIZED_OPERATIONS
        for gid in self.store.by_coordinator_partition(group_ids):
            if not self.store.active:
                out.append({"group_id": gid, "error_code": errors.COORDINATOR_NOT_AVAILABLE, "error_message": None, "group_state": "", "protocol_type": "", "protocol_data": "", "members": [], "authorized_operations": NO_AUTHORIZED_OPERATIONS})
                continue
            group = self.store.groups.get(gid)
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
        ordered = self.store.by_coordinator_partition(list(dict.fromkeys(group_ids)))
        by_partition: dict[int, list[tuple[str, list[Record]]]] = {}
        for gid in ordered:
            if not self.store.active:
                results.append({"group_id": gid, "error_code": errors.COORDINATOR_NOT_AVAILABLE})
                continue
            group = self.store.groups.get(gid)
            if group is None or group.is_in(GroupState.DEAD):
                results.append({"group_id": gid, "error_code": errors.GROUP_ID_NOT_FOUND})
                continue
            if group.is_in(GroupState.STABLE, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE):
                results.append({"group_id": gid, "error_code": errors.NON_EMPTY_GROUP})
                continue
            records: list[Record] = [
                (offset_commit_key(gid, t, p), None)
                for t, parts in self.store.offsets.get(gid, {}).items() for p in parts
            ]
            records.append((group_metadata_key(gid), None))
            result = {"group_id": gid, "error_code": errors.NONE}
            results.append(result)
            by_partition.setdefault(self.store.partition_for(gid), []).append((gid, records))
        # One write per __consumer_offsets partition, as Kafka writes one batch per coordinator shard.
        for entries in by_partition.values():
            records = [r for _, recs in entries for r in recs]
            error = self.writer.write_and_replay(entries[0][0], records)
            if error:
                failed = {gid for gid, _ in entries}
                for r in results:
                    if r["group_id"] in failed:
                        r["error_code"] = append_error_to_response_error(error)
            else:
                log.info("deleted groups %s", [gid for gid, _ in entries])
        return results

