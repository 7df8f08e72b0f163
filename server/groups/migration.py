"""KIP-848's online migration between classic and consumer groups (Kafka's GroupMetadataManager:
validateOnlineUpgrade / convertToConsumerGroup, validateOnlineDowngradeWithFencedMember /
convertToClassicGroup), under ``group.consumer.migration.policy``.

Upgrade: a classic group with members using the consumer protocol becomes a consumer group when a
consumer-protocol member joins it: the classic group's tombstone, then the consumer group's records
(each member at the generation as its epoch, its last classic assignment as its current and target
assignment, its JoinGroup protocols kept as classic member metadata). The classic members stay and
are served by ``classic_members.py``; parked JoinGroup/SyncGroup requests are told to rejoin.

Downgrade: when the last consumer-protocol member leaves a consumer group whose other members all
use the classic protocol, the consumer group's tombstones and a classic group (generation = group
epoch, each member's target assignment as its assignment) are written, and a rebalance starts. The
same when a static member using the classic protocol joins with the instance id of the last
consumer-protocol member: it takes that member's assignment, and the classic group only rebalances
if the assignment is stale (validateOnlineDowngradeWithReplacedMember).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable

from kafka_sidecar.protocol import errors

from .classic_members import ClassicMembers
from .consumer_group import ClassicMemberMetadata, ConsumerGroupMember, MemberState, Partitions
from .consumer_manager import ConsumerGroupManager, HeartbeatError
from .consumer_protocol import decode_assignment, decode_subscription
from .consumer_records import (
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    CONSUMER_GROUP_MEMBER_METADATA,
    CONSUMER_GROUP_METADATA,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
    consumer_key,
    current_assignment_value,
    group_metadata_value,
    member_metadata_value,
    regex_key,
    target_assignment_member_value,
    target_assignment_metadata_value,
)
from .group import CONSUMER_PROTOCOL_TYPE, ClassicGroup, GroupState, Member, now_ms
from .messages import join_response, sync_response
from .rebalance import Rebalancer
from .records import RecordFormatError, group_metadata_key
from .store import GroupStore, Record, append_error_to_response_error, group_metadata_record
from .timer import heartbeat_key, join_key, sync_key

log = logging.getLogger(__name__.rpartition(".")[0] + ".coordinator")

MIGRATION_POLICIES = ("disabled", "downgrade", "upgrade", "bidirectional")


class _CustomAssignorData(Exception):
    """A classic member's assignment carries user data (Kafka's UnsupportedVersionException)."""


class GroupMigration:
    """Converts groups between the classic and the consumer protocol, as the policy allows."""

    def __init__(self, store: GroupStore, manager: ConsumerGroupManager, classic_members: ClassicMembers,
                 rebalance: Rebalancer, classic_max_size: int, policy: str,
                 topic_id: Callable[[str], uuid.UUID | None]) -> None:
        self.store = store
        self.manager = manager
        self.classic_members = classic_members
        self.rebalance = rebalance
        self.classic_max_size = classic_max_size
        self.policy = policy.strip().lower()
        self.topic_id = topic_id

    @property
    def upgrade_enabled(self) -> bool:
        return self.policy in ("upgrade", "bidirectional")

    @property
    def downgrade_enabled(self) -> bool:
        return self.policy in ("downgrade", "bidirectional")

    # ---- classic -> consumer --------------------------------------------------------------

    def maybe_upgrade(self, group_id: str) -> bool:
        """Kafka 4.3's validateOnlineUpgrade then convertToConsumerGroup: True once converted, else
        GROUP_ID_NOT_FOUND saying why."""
        classic = self.store.groups[group_id]
        why = None
        if not self.upgrade_enabled:
            why = "online upgrade is disabled"
        elif not classic.uses_consumer_protocol():
            why = "the group does not use the consumer embedded protocol"
        elif classic.num_members() > self.manager.config.max_size:
            why = "the group size exceeds the consumer group maximum size"
        if why is not None:
            log.info("Cannot upgrade classic group %s to consumer group because %s.", group_id, why)
            raise HeartbeatError(errors.GROUP_ID_NOT_FOUND, f"Cannot upgrade classic group {group_id} to consumer group because {why}.")
        try:
            members = [self._consumer_member(classic, m) for m in classic.all_members()]
        except RecordFormatError:
            raise HeartbeatError(errors.GROUP_ID_NOT_FOUND, f"Cannot upgrade classic group {group_id} to consumer group "
                                 "because the embedded consumer protocol is malformed.") from None
        except _CustomAssignorData:
            raise HeartbeatError(errors.GROUP_ID_NOT_FOUND, f"Cannot upgrade classic group {group_id} to consumer group because an "
                                 "unsupported custom assignor is in use. Please refer to the documentation or switch to a default "
                                 "assignor before re-attempting the upgrade.") from None
        for m in classic.all_members():
            classic.complete_join(m, join_response(m.member_id, errors.REBALANCE_IN_PROGRESS))
            classic.complete_sync(m, sync_response(errors.REBALANCE_IN_PROGRESS))
            self.manager.timer.cancel(heartbeat_key(group_id, m.member_id))
        self.manager.timer.cancel(join_key(group_id))
        self.manager.timer.cancel(sync_key(group_id))
        epoch = classic.generation_id
        records: list[Record] = [(group_metadata_key(group_id), None)]
        records += [(consumer_key(CONSUMER_GROUP_MEMBER_METADATA, group_id, m.member_id), member_metadata_value(m)) for m in members]
        records.append((consumer_key(CONSUMER_GROUP_METADATA, group_id), group_metadata_value(epoch)))
        records += [(consumer_key(CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, group_id, m.member_id), target_assignment_member_value(m.assigned))
                    for m in members]
        records.append((consumer_key(CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, group_id), target_assignment_metadata_value(epoch)))
        records += [(consumer_key(CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, group_id, m.member_id), current_assignment_value(m)) for m in members]
        error = self.manager.writer.write_and_replay(group_id, records)
        if error:
            raise HeartbeatError(append_error_to_response_error(error))
        self.store.groups.get(group_id) or self.store.create_group(group_id)  # the entry the offsets live under
        for m in members:
            self.manager.schedule_session(group_id, m.member_id)
        log.info("[GroupId %s] upgraded the classic group with %d members to a consumer group at epoch %d.", group_id, len(members), epoch)
        return True

    def _consumer_member(self, classic: ClassicGroup, m: Member) -> ConsumerGroupMember:
        """Kafka's ConsumerGroup.fromClassicGroup for one member."""
        partitions, user_data = decode_assignment(m.assignment)
        if user_data:
            raise _CustomAssignorData  # Kafka: the user data of a custom assignor would be lost
        sub = decode_subscription(m.metadata(classic.protocol_name))
        assigned: Partitions = {}
        for topic, ps in partitions.items():
            tid = self.topic_id(topic)
            if tid is not None and ps:
                assigned[tid] = frozenset(ps)
        epoch = classic.generation_id
        return ConsumerGroupMember(
            m.member_id, instance_id=m.group_instance_id, rack_id=sub.rack_id, client_id=m.client_id, client_host=m.client_host,
            subscribed_topic_names=tuple(sorted(set(sub.topics))), rebalance_timeout_ms=m.rebalance_timeout_ms,
            member_epoch=epoch, previous_member_epoch=epoch, state=MemberState.STABLE, assigned=assigned,
            assignment_epochs={(t, p): epoch for t, ps in assigned.items() for p in ps},
            classic=ClassicMemberMetadata(m.session_timeout_ms, tuple(m.protocols)),
        )

    # ---- consumer -> classic --------------------------------------------------------------

    def maybe_downgrade(self, group_id: str, leaving_member_id: str) -> bool:
        """Kafka's validateOnlineDowngradeWithFencedMember then convertToClassicGroup; True once converted."""
        group = self.manager.groups.get(group_id)
        if group is None or not group.all_members_use_classic_protocol_except(leaving_member_id):
            return False
        if len(group.members) <= 1:
            return False
        if not self._downgrade_allowed(group_id, len(group.members) - 1):
            return False
        staying = [m for mid, m in group.members.items() if mid != leaving_member_id]
        targets = {m.member_id: group.target.get(m.member_id, {}) for m in staying}
        return self._convert_to_classic(group_id, staying, targets, f"Downgrade group {group_id} from consumer to classic for member leaving.")

    def maybe_downgrade_with_replaced_member(self, group_id: str, replaced_member_id: str, joining: ConsumerGroupMember) -> bool:
        """Kafka's validateOnlineDowngradeWithReplacedMember then convertToClassicGroup: a static member
        using the classic protocol takes the instance id of the last member using the consumer
        protocol. The joining member gets the replaced member's target assignment; the classic group
        only rebalances when that assignment is stale (the join changes the subscription, or the
        group's target assignment is behind its epoch). True once converted."""
        group = self.manager.groups.get(group_id)
        if group is None or not group.all_members_use_classic_protocol_except(replaced_member_id):
            return False
        if not self._downgrade_allowed(group_id, len(group.members)):
            return False
        replaced = group.members[replaced_member_id]
        staying = [m for mid, m in group.members.items() if mid != replaced_member_id] + [joining]
        targets = {m.member_id: group.target.get(m.member_id, {}) for m in staying}
        targets[joining.member_id] = group.target.get(replaced_member_id, {})
        stale = group.group_epoch > group.assignment_epoch or bool(replaced.subscribed_topic_regex) or (
            joining.subscribed_topic_names != replaced.subscribed_topic_names)
        reason = f"Downgrade group {group_id} from consumer to classic with stale assignment." if stale else None
        return self._convert_to_classic(group_id, staying, targets, reason)

    def _downgrade_allowed(self, group_id: str, classic_members: int) -> bool:
        if not self.downgrade_enabled:
            log.info("Cannot downgrade consumer group %s to classic group because the online downgrade is disabled.", group_id)
            return False
        if classic_members > self.classic_max_size:
            log.info("Cannot downgrade consumer group %s to classic group because its group size is greater than classic group max size.", group_id)
            return False
        return True

    def _convert_to_classic(self, group_id: str, staying: list[ConsumerGroupMember], targets: dict[str, Partitions],
                            rebalance_reason: str | None) -> bool:
        """Kafka's convertToClassicGroup (ClassicGroup.fromConsumerGroup): the consumer group's
        tombstones, then the classic group (generation = group epoch, each member's target as its
        assignment); a rebalance when ``rebalance_reason`` is given."""
        group = self.manager.groups[group_id]
        classic = ClassicGroup(group_id, state=GroupState.STABLE, generation_id=group.group_epoch,
                               protocol_type=CONSUMER_PROTOCOL_TYPE, current_state_timestamp=now_ms())
        for m in staying:
            assert m.classic is not None
            classic.add(Member(m.member_id, m.instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                               m.classic.session_timeout_ms, CONSUMER_PROTOCOL_TYPE, list(m.classic.supported_protocols)))
        classic.protocol_name = classic.select_protocol()
        classic.subscribed_topics = classic.compute_subscribed_topics()
        assignments = {m.member_id: self.classic_members.assignment_bytes(m, targets[m.member_id]) for m in staying}
        for cm in classic.all_members():
            cm.assignment = assignments[cm.member_id]
        records = _consumer_group_tombstones(group_id, list(group.members), sorted(group.resolved_regexes))
        records.append(group_metadata_record(classic, assignments))
        for mid in group.members:
            self.manager.cancel_member_timers(group_id, mid)
        error = self.manager.writer.write_and_replay(group_id, records)
        if error:
            log.warning("[GroupId %s] could not downgrade the consumer group: error %d", group_id, error)
            return False
        self.store.put_group(classic)  # the group as converted, with every member's protocols (Kafka keeps it so)
        for cm in classic.all_members():
            self.rebalance.reschedule_heartbeat(classic, cm)
        if rebalance_reason is not None:
            self.rebalance.prepare_rebalance(classic, rebalance_reason)
        log.info("[GroupId %s] downgraded the consumer group to a classic group with %d members.", group_id, len(staying))
        return True


def _consumer_group_tombstones(gid: str, member_ids: list[str], regexes: list[str]) -> list[Record]:
    """Kafka's ConsumerGroup.createGroupTombstoneRecords."""
    records: list[Record] = [(consumer_key(CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, gid, mid), None) for mid in member_ids]
    records += [(consumer_key(CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, gid, mid), None) for mid in member_ids]
    records.append((consumer_key(CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, gid), None))
    records += [(consumer_key(CONSUMER_GROUP_MEMBER_METADATA, gid, mid), None) for mid in member_ids]
    records += [(regex_key(gid, r), None) for r in regexes]
    records.append((consumer_key(CONSUMER_GROUP_METADATA, gid), None))
    return records
