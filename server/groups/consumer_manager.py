"""ConsumerGroupManager: the KIP-848 half of Kafka's GroupMetadataManager.

ConsumerGroupHeartbeat (join, heartbeat, leave, static leave), ConsumerGroupDescribe, the consumer
groups' rows of ListGroups, and the member-epoch check of OffsetCommit. As in Kafka, a heartbeat
builds records (member metadata, group epoch, target assignment, current member assignment), the
records are appended to the group's ``__consumer_offsets`` partition and then replayed into the
state, so the start-up replay rebuilds exactly the state the broker served. Session and rebalance
timeouts are keyed timers on the event loop, as the classic groups' are.
"""

from __future__ import annotations

import base64
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

from kafka_sidecar.protocol import errors

from .assignors import ASSIGNORS, MemberSubscription
from .consumer_group import (
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    Partitions,
    ResolvedRegularExpression,
    is_subset,
    reconcile,
)
from .consumer_records import (
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    CONSUMER_GROUP_MEMBER_METADATA,
    CONSUMER_GROUP_METADATA,
    CONSUMER_GROUP_REGULAR_EXPRESSION,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
    ConsumerGroupKey,
    consumer_key,
    current_assignment_value,
    decode_assignment_epoch_value,
    decode_current_assignment_value,
    decode_epoch_value,
    decode_member_metadata_value,
    decode_regex_value,
    decode_target_assignment_member_value,
    group_metadata_value,
    member_metadata_value,
    regex_key,
    target_assignment_member_value,
    target_assignment_metadata_value,
)
from .consumer_regex import RegexResolver, RegexTopics, TopicsVersion
from .messages import RequestContext, Response
from .store import GroupStore, Record, append_error_to_response_error
from .timer import Timer
from .writer import GroupRecordWriter

log = logging.getLogger(__name__.rpartition(".")[0] + ".coordinator")

# Error codes of KIP-848 (Kafka's Errors), not used by the classic protocol.
FENCED_MEMBER_EPOCH = 110
UNRELEASED_INSTANCE_ID = 111
UNSUPPORTED_ASSIGNOR = 112
STALE_MEMBER_EPOCH = 113

LEAVE_GROUP_MEMBER_EPOCH = -1
INITIAL_GROUP_EPOCH = 1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2

# topic name -> (topic id, partition count), or None when the topic does not exist
TopicLookup = Callable[[str], "tuple[uuid.UUID, int] | None"]
# (group id, group config name) -> the group's effective value (server/group_configs.py group_config)
GroupConfigLookup = Callable[[str, str], int]


class HeartbeatError(Exception):
    """An error answered to the heartbeat (Kafka's ApiException subclasses)."""

    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class HeartbeatRequest:
    """A ConsumerGroupHeartbeat request as plain values (None: unchanged since the last one)."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Partitions | None = None
    # whether the member may DESCRIBE a topic (None: no authorizer): what its regexes resolve to
    topic_authorized: Callable[[str], bool] | None = None
    # a classic member's JoinGroup (classic_members.py): its session timeout and protocols
    classic: ClassicMemberMetadata | None = None


@dataclass(frozen=True)
class ConsumerGroupConfig:
    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 5000
    max_size: int = 2**31 - 1
    assignors: tuple[str, ...] = ("uniform", "range")
    # Kafka 4.3 computes a group's next target assignment at most this often (the members
    # reconcile towards the previous one meanwhile): group.consumer.assignment.interval.ms.
    assignment_interval_ms: int = 1000
    # group.consumer.regex.refresh.interval.ms (internal in Kafka 4.3.1)
    regex_refresh_interval_ms: int = 600_000


def kafka_uuid_string() -> str:
    """Kafka's Uuid.randomUuid().toString(): URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class Migration(Protocol):
    """The conversions between classic and consumer groups (``migration.py``)."""

    def maybe_upgrade(self, group_id: str) -> bool: ...

    def maybe_downgrade(self, group_id: str, leaving_member_id: str) -> bool: ...

    def maybe_downgrade_with_replaced_member(self, group_id: str, replaced_member_id: str, joining: ConsumerGroupMember) -> bool: ...


class ConsumerGroupManager:
    """Consumer groups (KIP-848): the heartbeat state machine, timers, replay."""

    def __init__(self, store: GroupStore, writer: GroupRecordWriter, timer: Timer, config: ConsumerGroupConfig,
                 topic_lookup: TopicLookup, regex_topics: RegexTopics | None = None,
                 group_config: GroupConfigLookup | None = None, topics_version: TopicsVersion | None = None) -> None:
        self.store = store
        self.writer = writer
        self.timer = timer
        self.config = config
        self.topic_lookup = topic_lookup
        self.regex_topics: RegexTopics = regex_topics or (lambda _pattern: set())
        self.regexes = RegexResolver(self.regex_topics, topics_version, config.regex_refresh_interval_ms)
        self.groups: dict[str, ConsumerGroup] = {}
        # the groups' dynamic configs (kafka-configs.sh --entity-type groups); None: the broker's
        self.group_config = group_config
        # KIP-848's online migration (migration.py): set by the coordinator
        self.migration: Migration | None = None

    # ---- the group's configs (Kafka's consumerGroupSessionTimeoutMs(groupId) and siblings) ------

    def session_timeout_ms(self, gid: str) -> int:
        """consumer.session.timeout.ms of the group, else group.consumer.session.timeout.ms."""
        return self._group_config(gid, "consumer.session.timeout.ms", self.config.session_timeout_ms)

    def heartbeat_interval_ms(self, gid: str) -> int:
        """consumer.heartbeat.interval.ms of the group, else group.consumer.heartbeat.interval.ms."""
        return self._group_config(gid, "consumer.heartbeat.interval.ms", self.config.heartbeat_interval_ms)

    def assignment_interval_ms(self, gid: str) -> int:
        """consumer.assignment.interval.ms of the group, else group.consumer.assignment.interval.ms."""
        return self._group_config(gid, "consumer.assignment.interval.ms", self.config.assignment_interval_ms)

    def _group_config(self, gid: str, name: str, default: int) -> int:
        return default if self.group_config is None else int(self.group_config(gid, name))

    # ---- replay (the only way state changes) --------------------------------------------------

    def replay(self, key: ConsumerGroupKey, value: bytes | None) -> None:
        gid, t = key.group, key.record_type
        group = self.groups.get(gid)
        if t == CONSUMER_GROUP_METADATA:
            if value is None:
                self.groups.pop(gid, None)
                return
            self._group(gid).group_epoch = decode_epoch_value(value)
            return
        if value is None and group is None:
            return
        group = self._group(gid)
        if t == CONSUMER_GROUP_REGULAR_EXPRESSION and key.regex is not None:
            if value is None:
                group.resolved_regexes.pop(key.regex, None)
            else:
                group.resolved_regexes[key.regex] = decode_regex_value(value)
        elif t == CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA:
            group.assignment_epoch = decode_assignment_epoch_value(value) if value is not None else 0
        elif t == CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER and key.member is not None:
            if value is None:
                group.target.pop(key.member, None)
            else:
                group.target[key.member] = decode_target_assignment_member_value(value)
        elif t == CONSUMER_GROUP_MEMBER_METADATA and key.member is not None:
            if value is None:
                group.remove_member(key.member)
            else:
                old = group.members.get(key.member) or ConsumerGroupMember(key.member)
                group.update_member(decode_member_metadata_value(old, value))
        elif t == CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT and key.member is not None:
            old = group.members.get(key.member)
            if value is None:
                if old is not None:
                    group.update_member(replace(old, member_epoch=0, previous_member_epoch=0, state=MemberState.STABLE,
                                                assigned={}, pending_revocation={}, assignment_epochs={}))
            else:
                group.update_member(decode_current_assignment_value(old or ConsumerGroupMember(key.member), value))

    def _group(self, group_id: str) -> ConsumerGroup:
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = ConsumerGroup(group_id)
        return group

    def on_loaded(self) -> None:
        """After the start-up replay: remember the subscribed topics' sizes, start sessions."""
        for group in self.groups.values():
            self.store.groups.get(group.group_id) or self.store.create_group(group.group_id)
            group.subscribed_metadata = self._subscribed_metadata(self._group_topics(group.members, group.resolved_regexes))
            for m in group.members.values():
                self.schedule_session(group.group_id, m.member_id)

    def is_consumer_group(self, group_id: str) -> bool:
        return group_id in self.groups

    # ---- ConsumerGroupHeartbeat ------------------------------------------------------------------

    def heartbeat(self, ctx: RequestContext, req: HeartbeatRequest) -> Response:
        try:
            self._validate(ctx.api_version, req)
            if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(req)
            return self._heartbeat(ctx, req)
        except HeartbeatError as e:
            return {"error_code": e.code, "error_message": e.message, "member_id": None, "member_epoch": 0,
                    "heartbeat_interval": 0, "assignment": None}

    def _validate(self, version: int, req: HeartbeatRequest) -> None:
        """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid."""
        if not self.store.active:
            raise HeartbeatError(errors.COORDINATOR_NOT_AVAILABLE)
        if not req.group_id:
            raise HeartbeatError(errors.INVALID_REQUEST, "GroupId can't be empty.")
        if req.instance_id is not None and not req.instance_id.strip():
            raise HeartbeatError(errors.INVALID_REQUEST, "InstanceId can't be empty.")
        if req.rack_id is not None and not req.rack_id.strip():
            raise HeartbeatError(errors.INVALID_REQUEST, "RackId can't be empty.")
        if version >= 1 and not req.member_id.strip():
            raise HeartbeatError(errors.INVALID_REQUEST, "MemberId can't be empty.")
        if req.member_epoch > 0 or req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if not req.member_id.strip():
                raise HeartbeatError(errors.INVALID_REQUEST, "MemberId can't be empty.")
        elif req.member_epoch == 0:
            if req.rebalance_timeout_ms == -1:
                raise HeartbeatError(errors.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.")
            if req.owned is None or any(req.owned.values()):
                raise HeartbeatError(errors.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining.")
            if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
                raise HeartbeatError(errors.INVALID_REQUEST, "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
        elif req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if req.instance_id is None:
                raise HeartbeatError(errors.INVALID_REQUEST, "InstanceId can't be null.")
        else:
            raise HeartbeatError(errors.INVALID_REQUEST, f"MemberEpoch is invalid: {req.member_epoch}.")
        if req.subscribed_topic_regex:
            try:
                self.regex_topics(req.subscribed_topic_regex)
            except ValueError as e:
                raise HeartbeatError(errors.INVALID_REGULAR_EXPRESSION, f"SubscribedTopicRegex `{req.subscribed_topic_regex}` is not a valid regular expression: {e}.") from None
        if req.server_assignor is not None and req.server_assignor not in self.config.assignors:
            raise HeartbeatError(UNSUPPORTED_ASSIGNOR, f"ServerAssignor {req.server_assignor} is not supported. "
                                 f"Supported assignors: {', '.join(self.config.assignors)}.")

    def _classic_conflict(self, group_id: str, member_epoch: int) -> None:
        """A classic group with members is upgraded by a joining member when the policy allows it
        (Kafka's getOrMaybeCreateConsumerGroup), else the heartbeat is refused."""
        classic = self.store.groups.get(group_id)
        if classic is not None and not classic.is_empty and group_id not in self.groups:
            if member_epoch == 0 and self.migration is not None and self.migration.maybe_upgrade(group_id):
                return  # (maybe_upgrade raises GROUP_ID_NOT_FOUND saying why it cannot)
            raise HeartbeatError(errors.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")

    def _member_for(self, group: ConsumerGroup | None, req: HeartbeatRequest) -> tuple[ConsumerGroupMember, list[Record]]:
        """The member the heartbeat is for (new when joining), and records replacing a static member."""
        gid = req.group_id
        if group is None:
            if req.member_epoch != 0:
                raise HeartbeatError(errors.GROUP_ID_NOT_FOUND, f"Group {gid} not found.")
            return ConsumerGroupMember(req.member_id or kafka_uuid_string()), []
        member_id = req.member_id or kafka_uuid_string()
        if req.instance_id is not None:
            owner = group.static_members.get(req.instance_id)
            if req.member_epoch == 0:
                if owner is None or owner == member_id:
                    existing = group.members.get(member_id)
                    return existing or self._new_member(group, member_id), []
                old = group.members[owner]
                # Kafka's throwIfInstanceIdIsUnreleased, skipped when either side uses the classic protocol
                if old.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH and req.classic is None and old.classic is None:
                    raise HeartbeatError(UNRELEASED_INSTANCE_ID, f"Static member {owner} with instance id {req.instance_id} is not released.")
                # The new member takes the place (and assignment) of the one that left temporarily.
                self.timer.cancel(_session_key(gid, owner))
                self.timer.cancel(_rebalance_key(gid, owner))
                records = _remove_member_records(gid, owner)
                target = group.target.get(owner)
                if target:
                    records.append((consumer_key(CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, gid, member_id), target_assignment_member_value(target)))
                new = replace(old, member_id=member_id, member_epoch=group.assignment_epoch, previous_member_epoch=0)
                return new, records
            if owner is None:
                raise HeartbeatError(errors.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
            if owner != member_id:
                raise HeartbeatError(errors.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id {req.instance_id} was fenced by member {owner}.")
        member = group.members.get(member_id)
        if req.member_epoch == 0:
            return member or self._new_member(group, member_id), []
        if member is None:
            raise HeartbeatError(errors.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {gid}.")
        # Kafka's throwIfMemberEpochIsInvalid
        if req.member_epoch > member.member_epoch or (req.member_epoch < member.member_epoch and (
                req.member_epoch != member.previous_member_epoch or not is_subset(req.owned, member.assigned))):
            raise HeartbeatError(FENCED_MEMBER_EPOCH, f"The consumer group member has a smaller member epoch ({req.member_epoch}) "
                                 f"than the one known by the group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin."
                                 if req.member_epoch < member.member_epoch else
                                 f"The consumer group member has a greater member epoch ({req.member_epoch}) than the one known by the group "
                                 f"coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.")
        return member, []

    def _new_member(self, group: ConsumerGroup, member_id: str) -> ConsumerGroupMember:
        if len(group.members) >= self.config.max_size:
            raise HeartbeatError(errors.GROUP_MAX_SIZE_REACHED, f"The consumer group has reached its maximum capacity of {self.config.max_size} members.")
        return ConsumerGroupMember(member_id)

    def _heartbeat(self, ctx: RequestContext, req: HeartbeatRequest) -> Response:
        gid = req.group_id
        if req.classic is None:
            self._classic_conflict(gid, req.member_epoch)
        group = self.groups.get(gid)
        member, records = self._member_for(group, req)
        joining = member.member_id not in (group.members if group else {})
        replacing = bool(records)  # a static member taking its instance id's place and assignment
        updated = replace(
            member,
            instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
            rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
            client_id=ctx.client_id, client_host=ctx.client_host,
            subscribed_topic_names=tuple(sorted(set(req.subscribed_topic_names))) if req.subscribed_topic_names is not None else member.subscribed_topic_names,
            subscribed_topic_regex=req.subscribed_topic_regex if req.subscribed_topic_regex is not None else member.subscribed_topic_regex,
            server_assignor=req.server_assignor if req.server_assignor is not None else member.server_assignor,
            rebalance_timeout_ms=req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1 else member.rebalance_timeout_ms,
            classic=req.classic if req.classic is not None else member.classic,
        )
        bump = False
        if joining or records or not updated.metadata_equals(member):
            records.append((consumer_key(CONSUMER_GROUP_MEMBER_METADATA, gid, updated.member_id), member_metadata_value(updated)))
            # Kafka's hasMemberSubscriptionChanged: a new member, or new topics, regex or assignor.
            bump = (joining and not replacing) or (updated.subscribed_topic_names, updated.subscribed_topic_regex, updated.server_assignor) != (
                member.subscribed_topic_names, member.subscribed_topic_regex, member.server_assignor)
        # Kafka 4.3 starts a new group at group and assignment epoch 1 (an empty target assignment):
        # the first computed assignment is epoch 2 (KAFKA-20268).
        group_epoch = group.group_epoch if group else INITIAL_GROUP_EPOCH
        assignment_epoch = group.assignment_epoch if group else INITIAL_GROUP_EPOCH
        members = dict(group.members) if group else {}
        members[updated.member_id] = updated
        resolved = self.regexes.update(gid, group, members, req.topic_authorized, records)
        metadata = self._subscribed_metadata(self._group_topics(members, resolved))
        if group is None or metadata != group.subscribed_metadata:
            bump = True
        if bump:
            group_epoch += 1
            records.append((consumer_key(CONSUMER_GROUP_METADATA, gid), group_metadata_value(group_epoch)))
        target = dict(group.target) if group else {}
        wait_ms = 0
        if group_epoch > assignment_epoch:
            wait_ms = self._assignment_wait_ms(group)
            if wait_ms <= 0:
                target = self._target_assignment(gid, members, target, metadata, resolved, records)
                assignment_epoch = group_epoch
                records.append((consumer_key(CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, gid), target_assignment_metadata_value(assignment_epoch)))
        # Reconcile against the group as it will be once the records above are applied.
        epochs = dict(group.partition_epochs) if group else {}
        if group is not None and updated.member_id in group.members:
            for parts in (group.members[updated.member_id].assigned, group.members[updated.member_id].pending_revocation):
                for t, ps in parts.items():
                    for p in ps:
                        epochs.pop((t, p), None)
        subscribed_ids = {v[0] for name in _topics_of(updated, resolved) if (v := self.topic_lookup(name)) is not None}
        reconciled = reconcile(updated, assignment_epoch, target.get(updated.member_id, {}), subscribed_ids, req.owned,
                               lambda t, p: epochs.get((t, p), -1))
        if joining or records or not reconciled.assignment_equals(member):
            records.append((consumer_key(CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, gid, reconciled.member_id), current_assignment_value(reconciled)))
        if records:
            error = self.writer.write_and_replay(gid, records)
            if error:
                raise HeartbeatError(append_error_to_response_error(error))
            self.store.groups.get(gid) or self.store.create_group(gid)  # offsets live under a (classic, empty) entry
            group = self.groups[gid]
            group.subscribed_metadata = metadata
            if any(k == consumer_key(CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, gid) for k, _ in records):
                group.last_assignment_ms = _monotonic_ms()
        if wait_ms > 0 and _assignment_key(gid) not in self.timer:
            self.timer.schedule(_assignment_key(gid), wait_ms, lambda: self._deferred_assignment(gid))
        final = self.groups[gid].members[reconciled.member_id]
        self.schedule_session(gid, final.member_id)
        if final.state == MemberState.UNREVOKED_PARTITIONS:
            if _rebalance_key(gid, final.member_id) not in self.timer:
                self._schedule_rebalance(gid, final.member_id, final.member_epoch, final.rebalance_timeout_ms)
        else:
            self.timer.cancel(_rebalance_key(gid, final.member_id))
        full = req.rebalance_timeout_ms != -1 and (req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None) and req.owned is not None
        send = req.member_epoch == 0 or full or final.assigned != member.assigned
        return {
            "error_code": errors.NONE, "error_message": None, "member_id": final.member_id, "member_epoch": final.member_epoch,
            "heartbeat_interval": self.heartbeat_interval_ms(gid),
            "assignment": {"topic_partitions": [{"topic_id": t, "partitions": sorted(ps)} for t, ps in sorted(final.assigned.items(), key=lambda i: str(i[0]))]} if send else None,
        }

    def _group_topics(self, members: dict[str, ConsumerGroupMember], resolved: dict[str, ResolvedRegularExpression]) -> set[str]:
        return {t for m in members.values() for t in _topics_of(m, resolved)}

    def _assignment_wait_ms(self, group: ConsumerGroup | None) -> int:
        """How long until the group may have its next target assignment (0: now)."""
        if group is None or not group.last_assignment_ms:
            return 0
        return group.last_assignment_ms + self.assignment_interval_ms(group.group_id) - _monotonic_ms()

    def _deferred_assignment(self, gid: str) -> None:
        """The target assignment a heartbeat deferred (Kafka's batched assignment), written as its records."""
        group = self.groups.get(gid)
        if group is None or group.group_epoch <= group.assignment_epoch or not self.store.active:
            return
        metadata = self._subscribed_metadata(self._group_topics(group.members, group.resolved_regexes))
        records: list[Record] = []
        self._target_assignment(gid, dict(group.members), dict(group.target), metadata, group.resolved_regexes, records)
        records.append((consumer_key(CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, gid), target_assignment_metadata_value(group.group_epoch)))
        if self.writer.write_and_replay(gid, records) == errors.NONE and gid in self.groups:
            self.groups[gid].last_assignment_ms = _monotonic_ms()

    def _subscribed_metadata(self, names: set[str]) -> dict[str, int]:
        out = {}
        for name in names:
            v = self.topic_lookup(name)
            if v is not None:
                out[name] = v[1]
        return out

    def _target_assignment(self, gid: str, members: dict[str, ConsumerGroupMember], target: dict[str, Partitions],
                           metadata: dict[str, int], resolved: dict[str, ResolvedRegularExpression],
                           records: list[Record]) -> dict[str, Partitions]:
        """Kafka's TargetAssignmentBuilder: run the assignor, write the members whose target changed."""
        ids = {name: v for name in metadata if (v := self.topic_lookup(name)) is not None}
        partitions = {tid: n for tid, n in ids.values()}
        subs = {
            mid: MemberSubscription(frozenset(ids[n][0] for n in _topics_of(m, resolved) if n in ids), m.instance_id, m.rack_id, target.get(mid, {}))
            for mid, m in members.items()
        }
        assignor_name = ConsumerGroup(gid, members=members).preferred_assignor(self.config.assignors[0])
        result = ASSIGNORS[assignor_name](subs, partitions)
        new_target: dict[str, Partitions] = {}
        for mid in members:
            new = {t: frozenset(ps) for t, ps in result.get(mid, {}).items() if ps}
            new_target[mid] = new
            if new != target.get(mid, {}):
                records.append((consumer_key(CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, gid, mid), target_assignment_member_value(new)))
        return new_target

    # ---- leaving and fencing -----------------------------------------------------------------

    def _leave(self, req: HeartbeatRequest) -> Response:
        gid = req.group_id
        group = self.groups.get(gid)
        if group is None:
            raise HeartbeatError(errors.GROUP_ID_NOT_FOUND, f"Group {gid} not found.")
        member_id = req.member_id
        if req.instance_id is not None:
            owner = group.static_members.get(req.instance_id)
            if owner is None:
                raise HeartbeatError(errors.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
            if owner != member_id:
                raise HeartbeatError(errors.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id {req.instance_id} was fenced by member {owner}.")
        member = group.members.get(member_id)
        if member is None:
            raise HeartbeatError(errors.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {gid}.")
        if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            # The static member keeps its assignment until its session times out or it comes back.
            left = member.with_epoch(LEAVE_GROUP_STATIC_MEMBER_EPOCH)
            error = self.writer.write_and_replay(gid, [(consumer_key(CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, gid, member_id), current_assignment_value(left))])
            if error:
                raise HeartbeatError(append_error_to_response_error(error))
            self.timer.cancel(_rebalance_key(gid, member_id))
        else:
            error = self.fence_member(gid, member_id, "the member left the group")
            if error:
                raise HeartbeatError(error)
        return {"error_code": errors.NONE, "error_message": None, "member_id": member_id, "member_epoch": req.member_epoch,
                "heartbeat_interval": 0, "assignment": None}

    def fence_member(self, gid: str, member_id: str, reason: str) -> int:
        """Remove a member and bump the group epoch (Kafka's consumerGroupFenceMember)."""
        group = self.groups.get(gid)
        if group is None or member_id not in group.members:
            return errors.NONE
        log.info("[GroupId %s] member %s left the consumer group: %s", gid, member_id, reason)
        self.cancel_member_timers(gid, member_id)
        if self.migration is not None and self.migration.maybe_downgrade(gid, member_id):
            return errors.NONE
        records = _remove_member_records(gid, member_id)
        regex = group.members[member_id].subscribed_topic_regex
        if regex and regex in group.resolved_regexes and not any(
                m.subscribed_topic_regex == regex for mid, m in group.members.items() if mid != member_id):
            records.append((regex_key(gid, regex), None))  # no member uses it any more
        records.append((consumer_key(CONSUMER_GROUP_METADATA, gid), group_metadata_value(group.group_epoch + 1)))
        error = self.writer.write_and_replay(gid, records)
        return append_error_to_response_error(error) if error else errors.NONE

    def schedule_session(self, gid: str, member_id: str) -> None:
        """(Re)start the member's session: the group's consumer.session.timeout.ms, or a classic member's own."""
        group = self.groups.get(gid)
        member = group.members.get(member_id) if group else None
        timeout = member.classic.session_timeout_ms if member is not None and member.classic is not None else self.session_timeout_ms(gid)
        self.timer.schedule(_session_key(gid, member_id), timeout, lambda: self.fence_member(gid, member_id, "its session timed out"))

    def cancel_member_timers(self, gid: str, member_id: str) -> None:
        for key in (_session_key(gid, member_id), _rebalance_key(gid, member_id), sync_timeout_key(gid, member_id), join_timeout_key(gid, member_id)):
            self.timer.cancel(key)

    def classic_heartbeat(self, ctx: RequestContext, req: HeartbeatRequest) -> Response:
        """A classic member's JoinGroup as a heartbeat (no heartbeat validation: Kafka's member epoch -1)."""
        return self._heartbeat(ctx, req)

    @staticmethod
    def remove_member_records(gid: str, member_id: str) -> list[Record]:
        return _remove_member_records(gid, member_id)

    def _schedule_rebalance(self, gid: str, member_id: str, epoch: int, timeout_ms: int) -> None:
        def expire() -> None:
            group = self.groups.get(gid)
            m = group.members.get(member_id) if group else None
            if m is not None and m.state == MemberState.UNREVOKED_PARTITIONS and m.member_epoch == epoch:
                self.fence_member(gid, member_id, "it did not revoke its partitions within the rebalance timeout")
        self.timer.schedule(_rebalance_key(gid, member_id), timeout_ms, expire)

    # ---- OffsetCommit / describe / list / delete -----------------------------------------------

    def validate_offset_commit(self, gid: str, member_id: str, instance_id: str | None, member_epoch: int, api_version: int,
                               partitions: list[tuple[str, int]], transactional: bool = False) -> tuple[int, set[tuple[str, int]]]:
        """Kafka 4.3's ConsumerGroup.validateOffsetCommit: (group error, partitions refused with
        STALE_MEMBER_EPOCH). An older member epoch may commit the partitions the member already
        had at that epoch (KIP-1251's assignment epochs); a newer one is stale."""
        group = self.groups[gid]
        if member_epoch < 0 and not group.members:
            return errors.NONE, set()
        if transactional and member_epoch == -1 and not member_id and instance_id is None:
            return errors.NONE, set()
        member = group.members.get(member_id)
        if member is None:
            return errors.UNKNOWN_MEMBER_ID, set()
        if member.classic is not None:  # a classic member commits with its generation, its member epoch
            return (errors.NONE if member_epoch == member.member_epoch else errors.ILLEGAL_GENERATION), set()
        if not transactional and api_version < 9:
            return errors.UNSUPPORTED_VERSION, set()
        if member_epoch == member.member_epoch:
            return errors.NONE, set()
        if member_epoch > member.member_epoch:
            return STALE_MEMBER_EPOCH, set()
        stale = set()
        for topic, partition in partitions:
            found = self.topic_lookup(topic)
            tid = found[0] if found else None
            if tid is None or partition not in member.assigned.get(tid, frozenset()) or member.assignment_epoch(tid, partition) > member_epoch:
                stale.add((topic, partition))
        return errors.NONE, stale

    def describe(self, group_ids: list[str], topic_name: Callable[[uuid.UUID], str | None]) -> list[Response]:
        """ConsumerGroupDescribe's groups (Kafka's ConsumerGroup.asDescribedGroup)."""
        out: list[Response] = []
        for gid in group_ids:
            row: Response = {"group_id": gid, "error_code": errors.NONE, "error_message": None, "group_state": "", "group_epoch": 0,
                             "assignment_epoch": 0, "assignor_name": "", "members": [], "authorized_operations": -(2**31)}
            group = self.groups.get(gid)
            if not self.store.active:
                row["error_code"] = errors.COORDINATOR_NOT_AVAILABLE
            elif group is None:
                classic = self.store.groups.get(gid)
                row.update(error_code=errors.GROUP_ID_NOT_FOUND,
                           error_message=f"Group {gid} is not a consumer group." if classic is not None else f"Group {gid} not found.")
            else:
                row.update(group_state=group.state.value, group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch,
                           assignor_name=group.preferred_assignor(self.config.assignors[0]),
                           members=[_describe_member(m, group.target.get(m.member_id, {}), topic_name) for m in group.members.values()])
            out.append(row)
        return out

    def validate_offset_fetch(self, gid: str, member_id: str, member_epoch: int) -> int:
        """Kafka's ConsumerGroup.validateOffsetFetch (for a request naming a member)."""
        member = self.groups[gid].members.get(member_id)
        if member is None:
            return errors.UNKNOWN_MEMBER_ID
        return STALE_MEMBER_EPOCH if member_epoch != member.member_epoch else errors.NONE

    def list_rows(self) -> list[Response]:
        return [{"group_id": g.group_id, "protocol_type": "consumer", "group_state": g.state.value, "group_type": "consumer"}
                for g in self.groups.values()]

    def delete_group(self, gid: str) -> int:
        """DeleteGroups of an empty consumer group: its records' tombstones."""
        group = self.groups.get(gid)
        if group is None:
            return errors.GROUP_ID_NOT_FOUND
        if group.members:
            return errors.NON_EMPTY_GROUP
        records: list[Record] = [(regex_key(gid, regex), None) for regex in sorted(group.resolved_regexes)]
        records += [(consumer_key(CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, gid), None), (consumer_key(CONSUMER_GROUP_METADATA, gid), None)]
        error = self.writer.write_and_replay(gid, records)
        return append_error_to_response_error(error) if error else errors.NONE


def _topics_of(member: ConsumerGroupMember, resolved: dict[str, ResolvedRegularExpression]) -> set[str]:
    """The topic names a member subscribes to: its names and the topics its regex resolved to."""
    topics = set(member.subscribed_topic_names)
    if member.subscribed_topic_regex and (r := resolved.get(member.subscribed_topic_regex)) is not None:
        topics |= r.topics
    return topics


def _describe_member(m: ConsumerGroupMember, target: Partitions, topic_name: Callable[[uuid.UUID], str | None]) -> Response:
    def assignment(parts: Partitions) -> Response:
        return {"topic_partitions": [{"topic_id": t, "topic_name": topic_name(t) or "", "partitions": sorted(ps)}
                                     for t, ps in parts.items() if ps and topic_name(t) is not None]}
    return {
        "member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id, "member_epoch": m.member_epoch,
        "client_id": m.client_id, "client_host": m.client_host, "subscribed_topic_names": list(m.subscribed_topic_names),
        "subscribed_topic_regex": m.subscribed_topic_regex, "assignment": assignment(m.assigned),
        "target_assignment": assignment(target), "member_type": 0 if m.classic is not None else 1,  # CLASSIC / CONSUMER
    }


def _monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


def _assignment_key(gid: str) -> tuple[str, str]:
    return ("consumer-assignment", gid)


def sync_timeout_key(gid: str, member_id: str) -> tuple[str, str, str]:
    return ("consumer-sync", gid, member_id)


def join_timeout_key(gid: str, member_id: str) -> tuple[str, str, str]:
    return ("consumer-join", gid, member_id)


def _session_key(gid: str, member_id: str) -> tuple[str, str, str]:
    return ("consumer-session", gid, member_id)


def _rebalance_key(gid: str, member_id: str) -> tuple[str, str, str]:
    return ("consumer-rebalance", gid, member_id)


def _remove_member_records(gid: str, member_id: str) -> list[Record]:
    """Kafka's consumerGroupFenceMemberRecords: current assignment, target, metadata tombstones."""
    return [
        (consumer_key(CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, gid, member_id), None),
        (consumer_key(CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, gid, member_id), None),
        (consumer_key(CONSUMER_GROUP_MEMBER_METADATA, gid, member_id), None),
    ]
