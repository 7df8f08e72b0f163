"""Rebalancer: the classic group's rebalance state machine and its timers (the rebalance half of
Kafka's GroupMetadataManager for the classic protocol): preparing a rebalance, the delayed and
initial joins, completing the join phase, pending-sync expiration, member session timeouts, and
propagating the SyncGroup assignment. JoinGroup, SyncGroup, Heartbeat and LeaveGroup
(``membership.py``) drive it."""

from __future__ import annotations

import logging
from typing import Any

from kafka_sidecar.protocol import errors

from .group import EMPTY_ASSIGNMENT, UNKNOWN_MEMBER_ID, ClassicGroup, GroupState, Member
from .messages import Response, join_response, sync_response
from .store import GroupStore, group_metadata_record
from .timer import Timer, heartbeat_key, join_key, sync_key
from .writer import GroupRecordWriter

log = logging.getLogger(__name__.rpartition(".")[0] + ".coordinator")


def current_join_response(group: ClassicGroup, member_id: str, members: list[dict[str, Any]], leader: str | None = None, skip_assignment: bool = False) -> Response:
    """The JoinGroup answer of a member of the group's current generation."""
    return join_response(
        member_id,
        generation_id=group.generation_id,
        protocol_name=group.protocol_name,
        protocol_type=group.protocol_type,
        leader=(group.leader_id if leader is None else leader) or "",
        members=members,
        skip_assignment=skip_assignment,
    )


class Rebalancer:
    """Rebalances of the groups in the shared store, timed on the shared timer."""

    def __init__(self, store: GroupStore, writer: GroupRecordWriter, timer: Timer, initial_rebalance_delay_ms: int) -> None:
        self.store = store
        self.writer = writer
        self.timer = timer
        self.initial_rebalance_delay_ms = initial_rebalance_delay_ms

    def maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup, reason: str) -> None:
        if group.can_rebalance():
            self.prepare_rebalance(group, reason)
        else:
            self.maybe_complete_join_phase(group)

    def prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            self.reset_and_propagate_assignment_with_error(group, errors.REBALANCE_IN_PROGRESS)
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
                self.complete_join(group)
            else:
                self.timer.schedule(join_key(gid), group.rebalance_timeout_ms(), lambda: self._complete_join_by_id(gid))

    def _try_complete_initial_rebalance(self, group_id: str, delay_ms: int, remaining_ms: int) -> None:
        group = self.store.groups.get(group_id)
        if group is None:
            return
        if group.new_member_added and remaining_ms != 0:
            group.new_member_added = False
            new_delay = min(self.initial_rebalance_delay_ms, remaining_ms)
            new_remaining = max(remaining_ms - delay_ms, 0)
            self.timer.schedule(join_key(group_id), new_delay, lambda: self._try_complete_initial_rebalance(group_id, new_delay, new_remaining))
        else:
            self.complete_join(group)

    def maybe_complete_join_phase(self, group: ClassicGroup) -> None:
        if not group.is_in(GroupState.PREPARING_REBALANCE):
            return
        if group.previous_state is GroupState.EMPTY:
            return  # the initial rebalance completes on its timer
        if not group.has_all_members_joined():
            return
        self.complete_join(group)

    def _complete_join_by_id(self, group_id: str) -> None:
        group = self.store.groups.get(group_id)
        if group is not None:
            self.complete_join(group)

    def complete_join(self, group: ClassicGroup) -> None:
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
            error, _ = self.writer.write(gid, [group_metadata_record(group, {})])
            if error:
                log.warning("failed to write empty metadata for group %s: error %d", gid, error)
            return
        log.info("stabilized group %s generation %d with %d members", gid, group.generation_id, group.num_members())
        for m in group.all_members():
            members = group.current_members_for_leader() if group.is_leader(m.member_id) else []
            group.complete_join(m, current_join_response(group, m.member_id, members))
            self.reschedule_heartbeat(group, m)
            m.is_new = False
            group.pending_sync_members.add(m.member_id)
        generation = group.generation_id
        self.timer.schedule(sync_key(gid), group.rebalance_timeout_ms(), lambda: self._expire_pending_sync(gid, generation))

    def _expire_pending_sync(self, group_id: str, generation_id: int) -> None:
        group = self.store.groups.get(group_id)
        if group is None or generation_id != group.generation_id:
            return
        if group.is_in(GroupState.COMPLETING_REBALANCE, GroupState.STABLE) and group.pending_sync_members:
            pending = set(group.pending_sync_members)
            for member_id in pending:
                group.remove(member_id)
                self.timer.cancel(heartbeat_key(group_id, member_id))
            self.prepare_rebalance(group, f"removing {sorted(pending)} on pending sync request expiration")

    def _remove_sync_expiration(self, group: ClassicGroup) -> None:
        group.pending_sync_members.clear()
        self.timer.cancel(sync_key(group.group_id))

    def reschedule_heartbeat(self, group: ClassicGroup, member: Member, timeout_ms: int | None = None) -> None:
        gid, mid = group.group_id, member.member_id
        delay = member.session_timeout_ms if timeout_ms is None else timeout_ms
        self.timer.schedule(heartbeat_key(gid, mid), delay, lambda: self.expire_heartbeat(gid, mid))

    def expire_heartbeat(self, group_id: str, member_id: str) -> None:
        group = self.store.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return
        if group.is_pending_member(member_id):
            log.info("pending member %s of group %s removed after its session timeout", member_id, group_id)
            group.remove(member_id)
            if group.is_in(GroupState.PREPARING_REBALANCE) and group.has_all_members_joined():
                self.complete_join(group)
        elif group.has_member(member_id):
            member = group.member(member_id)
            if not member.has_satisfied_heartbeat():
                log.info("member %s of group %s has failed (session timeout), removing it", member_id, group_id)
                self._remove_member_and_update(group, member, f"removing member {member_id} on heartbeat expiration")

    def _remove_member_and_update(self, group: ClassicGroup, member: Member, reason: str) -> None:
        group.complete_join(member, join_response(UNKNOWN_MEMBER_ID, errors.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self.maybe_prepare_rebalance_or_complete_join(group, reason)
        elif group.is_in(GroupState.PREPARING_REBALANCE) and group.has_all_members_joined():
            self.complete_join(group)

    def reset_and_propagate_assignment_with_error(self, group: ClassicGroup, error: int) -> None:
        for m in group.all_members():
            m.assignment = EMPTY_ASSIGNMENT
        self._propagate_assignment(group, error)

    def set_and_propagate_assignment(self, group: ClassicGroup, assignment: dict[str, bytes]) -> None:
        for m in group.all_members():
            m.assignment = assignment.get(m.member_id, EMPTY_ASSIGNMENT)
        self._propagate_assignment(group, errors.NONE)

    def _propagate_assignment(self, group: ClassicGroup, error: int) -> None:
        ptype = group.protocol_type if error == errors.NONE else None
        pname = group.protocol_name if error == errors.NONE else None
        for m in group.all_members():
            if group.complete_sync(m, sync_response(error, ptype, pname, m.assignment)):
                self.reschedule_heartbeat(group, m)
