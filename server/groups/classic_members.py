"""Classic members inside a consumer group (KIP-848's online migration, Kafka's
classicGroupJoinToConsumerGroup, classicGroupSyncToConsumerGroup, classicGroupHeartbeatToConsumerGroup
and classicGroupLeaveToConsumerGroup).

A consumer using the classic protocol (JoinGroup/SyncGroup/Heartbeat/LeaveGroup) may be a member of
a consumer group with members: its JoinGroup is a heartbeat of a member with its subscription read
from the embedded consumer protocol, its generation is its member epoch, it is never the leader (the
group's server-side assignor assigns it), its SyncGroup answers the partitions it reconciled to, and
its Heartbeat asks it to rejoin (REBALANCE_IN_PROGRESS) whenever its assignment must move on.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable

from kafka_sidecar.protocol import errors

from .consumer_group import ClassicMemberMetadata, ConsumerGroup, ConsumerGroupMember, MemberState
from .consumer_manager import (
    ConsumerGroupManager,
    HeartbeatError,
    HeartbeatRequest,
    consumer_key,
    join_timeout_key,
    kafka_uuid_string,
    sync_timeout_key,
)
from .consumer_protocol import decode_subscription, encode_assignment, subscription_version
from .consumer_records import CONSUMER_GROUP_METADATA, group_metadata_value
from .group import CONSUMER_PROTOCOL_TYPE, UNKNOWN_MEMBER_ID
from .messages import JoinRequest, RequestContext, Response, join_response, sync_response
from .records import RecordFormatError
from .store import append_error_to_response_error

log = logging.getLogger(__name__.rpartition(".")[0] + ".coordinator")

TopicName = Callable[[uuid.UUID], "str | None"]


class ClassicMembers:
    """JoinGroup, SyncGroup, Heartbeat and LeaveGroup of classic members of a consumer group."""

    def __init__(self, manager: ConsumerGroupManager, topic_name: TopicName) -> None:
        self.manager = manager
        self.topic_name = topic_name

    # ---- JoinGroup ---------------------------------------------------------------------------

    def join(self, ctx: RequestContext, req: JoinRequest) -> Response:
        m = self.manager
        group = m.groups[req.group_id]
        member_id = req.member_id or kafka_uuid_string()  # Kafka: Uuid.randomUuid().toString()
        try:
            if member_id not in group.members and len(group.members) >= m.config.max_size:
                raise HeartbeatError(errors.GROUP_MAX_SIZE_REACHED)
            if not group.supports_classic_protocols(req.protocol_type, {n for n, _ in req.protocols}):
                raise HeartbeatError(errors.INCONSISTENT_GROUP_PROTOCOL)
            if req.member_id == UNKNOWN_MEMBER_ID and req.group_instance_id is None and ctx.api_version >= 4:
                # JoinGroupRequest.requiresKnownMemberId: ask the member to rejoin with its new id
                return join_response(member_id, errors.MEMBER_ID_REQUIRED)
            try:
                sub = decode_subscription(req.protocols[0][1])
            except RecordFormatError:
                raise HeartbeatError(errors.UNKNOWN_SERVER_ERROR) from None  # Kafka's IllegalStateException
            owned = {}
            for topic, ps in sub.owned.items():
                found = m.topic_lookup(topic)
                if found is not None and ps:
                    owned[found[0]] = frozenset(ps)
            classic = ClassicMemberMetadata(req.session_timeout_ms, tuple(req.protocols))
            owner = group.static_members.get(req.group_instance_id) if req.group_instance_id is not None else None
            if owner is not None and m.migration is not None and m.migration.maybe_downgrade_with_replaced_member(
                    req.group_id, owner, ConsumerGroupMember(
                        member_id, instance_id=req.group_instance_id, rack_id=sub.rack_id, client_id=ctx.client_id,
                        client_host=ctx.client_host, subscribed_topic_names=tuple(sorted(set(sub.topics))),
                        rebalance_timeout_ms=req.rebalance_timeout_ms, classic=classic)):
                # the group is a classic group now; the member syncs with it (Kafka answers the
                # joining member's epoch: the group epoch the classic group's generation is)
                return join_response(member_id, generation_id=m.store.groups[req.group_id].generation_id,
                                     protocol_type=CONSUMER_PROTOCOL_TYPE, protocol_name=classic.protocol_name())
            m.timer.cancel(join_timeout_key(req.group_id, member_id))
            m.classic_heartbeat(ctx, HeartbeatRequest(
                group_id=req.group_id, member_id=member_id, member_epoch=0, instance_id=req.group_instance_id,
                rack_id=sub.rack_id, rebalance_timeout_ms=req.rebalance_timeout_ms,
                subscribed_topic_names=sub.topics, owned=owned, classic=classic,
            ))
        except HeartbeatError as e:
            return join_response(req.member_id, e.code)
        member = m.groups[req.group_id].members[member_id]
        assert member.classic is not None
        gid = req.group_id
        m.timer.schedule(sync_timeout_key(gid, member_id), req.rebalance_timeout_ms,
                         lambda: m.fence_member(gid, member_id, "the member failed to sync within timeout"))
        return join_response(member_id, generation_id=member.member_epoch, protocol_type=CONSUMER_PROTOCOL_TYPE,
                             protocol_name=member.classic.protocol_name())

    # ---- SyncGroup / Heartbeat -------------------------------------------------------------------

    def _member(self, group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerGroupMember:
        """Kafka's validateConsumerGroupMember, then throwIfMemberDoesNotUseClassicProtocol."""
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                raise HeartbeatError(errors.UNKNOWN_MEMBER_ID)
        else:
            owner = group.static_members.get(instance_id)
            if owner is None:
                raise HeartbeatError(errors.UNKNOWN_MEMBER_ID)
            if owner != member_id:
                raise HeartbeatError(errors.FENCED_INSTANCE_ID)
            member = group.members[owner]
        if member.classic is None:
            raise HeartbeatError(errors.UNKNOWN_MEMBER_ID)
        return member

    def _rejoin(self, gid: str, member: ConsumerGroupMember) -> HeartbeatError:
        m = self.manager
        if join_timeout_key(gid, member.member_id) not in m.timer:
            m.timer.schedule(join_timeout_key(gid, member.member_id), member.rebalance_timeout_ms,
                             lambda: m.fence_member(gid, member.member_id, "the classic member failed to join within the rebalance timeout"))
        return HeartbeatError(errors.REBALANCE_IN_PROGRESS)

    def sync(self, gid: str, generation_id: int, member_id: str, instance_id: str | None,
             protocol_type: str | None, protocol_name: str | None) -> Response:
        m = self.manager
        group = m.groups[gid]
        try:
            member = self._member(group, member_id, instance_id)
            assert member.classic is not None
            if generation_id != member.member_epoch:
                raise HeartbeatError(errors.ILLEGAL_GENERATION)
            if (protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE) or (
                    protocol_name is not None and protocol_name != member.classic.protocol_name()):
                raise HeartbeatError(errors.INCONSISTENT_GROUP_PROTOCOL)
            if group.group_epoch > member.member_epoch and member.state != MemberState.UNREVOKED_PARTITIONS:
                raise self._rejoin(gid, member)
        except HeartbeatError as e:
            return sync_response(e.code)
        m.timer.cancel(sync_timeout_key(gid, member.member_id))
        m.schedule_session(gid, member.member_id)
        return sync_response(errors.NONE, protocol_type, protocol_name, self.assignment_bytes(member, member.assigned))

    def assignment_bytes(self, member: ConsumerGroupMember, partitions: dict[uuid.UUID, frozenset[int]]) -> bytes:
        """The partitions as a ConsumerProtocolAssignment of the member's subscription version."""
        assert member.classic is not None
        by_name = {name: sorted(ps) for t, ps in partitions.items() if ps and (name := self.topic_name(t)) is not None}
        try:
            version = subscription_version(member.classic.supported_protocols[0][1])
        except (RecordFormatError, IndexError):
            version = 0
        return encode_assignment(by_name, version)

    def heartbeat(self, gid: str, generation_id: int, member_id: str, instance_id: str | None) -> int:
        m = self.manager
        group = m.groups[gid]
        try:
            member = self._member(group, member_id, instance_id)
            if generation_id != member.member_epoch:
                raise HeartbeatError(errors.ILLEGAL_GENERATION)
            m.schedule_session(gid, member.member_id)
            # rejoin when the group moved on, partitions are to be revoked, or unreleased ones are free
            if member.member_epoch < group.group_epoch or member.state == MemberState.UNREVOKED_PARTITIONS or (
                    member.state == MemberState.UNRELEASED_PARTITIONS and not group.waiting_on_unreleased_partition(member)):
                raise self._rejoin(gid, member)
        except HeartbeatError as e:
            return e.code
        return errors.NONE

    # ---- LeaveGroup ------------------------------------------------------------------------

    def leave(self, gid: str, members: list[tuple[str, str | None, str | None]]) -> tuple[int, list[Response]]:
        m = self.manager
        group = m.groups[gid]
        rows: list[Response] = []
        records = []
        for member_id, instance_id, reason in members:
            try:
                if instance_id is None:
                    member = group.members.get(member_id)
                    if member is None:
                        raise HeartbeatError(errors.UNKNOWN_MEMBER_ID)
                else:
                    owner = group.static_members.get(instance_id)
                    if owner is None:
                        raise HeartbeatError(errors.UNKNOWN_MEMBER_ID)
                    if member_id != UNKNOWN_MEMBER_ID and owner != member_id:
                        raise HeartbeatError(errors.FENCED_INSTANCE_ID)
                    member = group.members[owner]
                if member.classic is None:
                    raise HeartbeatError(errors.UNKNOWN_MEMBER_ID)
            except HeartbeatError as e:
                rows.append({"member_id": member_id, "group_instance_id": instance_id, "error_code": e.code})
                continue
            log.info("[GroupId %s] member %s has left the consumer group through explicit LeaveGroup; client reason: %s",
                     gid, member.member_id, reason or "not provided")
            records += m.remove_member_records(gid, member.member_id)
            m.cancel_member_timers(gid, member.member_id)
            rows.append({"member_id": member.member_id, "group_instance_id": instance_id, "error_code": errors.NONE})
        if records:
            records.append((consumer_key(CONSUMER_GROUP_METADATA, gid), group_metadata_value(group.group_epoch + 1)))
            error = m.writer.write_and_replay(gid, records)
            if error:
                return append_error_to_response_error(error), []
        return errors.NONE, rows
