"""ShareGroup: members, epochs and the simple assignor of a KIP-932 share group.

Share groups have no revocation phase: the target assignment is given to every member at once
(its member epoch jumps to the assignment epoch), and a partition may be assigned to several
members, because the share-partition hands each record to one of them.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

# Kafka's ShareGroup.ShareGroupState names, as ShareGroupDescribe and ListGroups report them.
EMPTY, STABLE = "Empty", "Stable"
SIMPLE_ASSIGNOR = "simple"

TopicPartitions = dict[uuid.UUID, list[int]]


@dataclass
class ShareGroupMember:
    member_id: str
    member_epoch: int
    client_id: str
    client_host: str
    rack_id: str | None
    subscribed_topic_names: list[str]
    last_heartbeat_ms: int
    assignment: TopicPartitions = field(default_factory=dict)
    # The member's share of the group's target assignment; it becomes ``assignment`` (and the
    # member epoch the assignment epoch) at the member's next heartbeat.
    target_assignment: TopicPartitions = field(default_factory=dict)
    # The epoch before the last bump (ShareGroupCurrentMemberAssignment's previousMemberEpoch).
    previous_member_epoch: int = 0


def simple_assign(members: list[str], partitions: list[tuple[uuid.UUID, int]]) -> dict[str, TopicPartitions]:
    """Kafka's SimpleAssignor for homogeneous subscriptions: with at least as many partitions as
    members the partitions are spread round-robin; with more members than partitions each member
    gets one partition, round-robin, so each partition is shared by several members."""
    out: dict[str, TopicPartitions] = {m: {} for m in members}
    if not members or not partitions:
        return out
    if len(members) <= len(partitions):
        pairs = [(members[i % len(members)], tp) for i, tp in enumerate(partitions)]
    else:
        pairs = [(m, partitions[i % len(partitions)]) for i, m in enumerate(members)]
    for member, (topic_id, partition) in pairs:
        out[member].setdefault(topic_id, []).append(partition)
    for assignment in out.values():
        for parts in assignment.values():
            parts.sort()
    return out


class ShareGroup:
    """One share group's membership (Kafka's ShareGroup model, in memory)."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ShareGroupMember] = {}
        # (topic name -> (topic id, partition count, or the initialized partitions)) the group
        # epoch was last bumped for.
        self.subscription_metadata: dict[str, tuple[uuid.UUID, Any]] = {}
        # When the target assignment was last computed (share.assignment.interval.ms batches them).
        self.last_assignment_ms = 0

    @property
    def state(self) -> str:
        return STABLE if self.members else EMPTY

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed_topic_names}

    def compute_assignment(self, metadata: dict[str, tuple[uuid.UUID, int]]) -> None:
        """Bump the group epoch and give every member the target assignment over ``metadata``
        (the subscribed topics that exist: name -> (id, partition count))."""
        self.group_epoch += 1
        self.subscription_metadata = dict(metadata)
        self.assign({t: (tid, list(range(n))) for t, (tid, n) in metadata.items()})

    def assign(self, metadata: dict[str, tuple[uuid.UUID, list[int]]], now_ms: int = 0) -> None:
        """The target assignment at the current group epoch over ``metadata`` (name -> (id, the
        partitions that may be assigned: Kafka assigns only initialized share-partitions))."""
        self.last_assignment_ms = now_ms
        member_ids = sorted(self.members)
        # Homogeneous or not: each member gets its share of the topics it subscribes to.
        by_subscription: dict[tuple[str, ...], list[str]] = {}
        for mid in member_ids:
            key = tuple(sorted(set(self.members[mid].subscribed_topic_names) & set(metadata)))
            by_subscription.setdefault(key, []).append(mid)
        for topics, mids in by_subscription.items():
            partitions = [(metadata[t][0], p) for t in topics for p in metadata[t][1]]
            for mid, assignment in simple_assign(mids, partitions).items():
                self.members[mid].target_assignment = assignment
        self.assignment_epoch = self.group_epoch

    def reconcile(self, member: ShareGroupMember) -> bool:
        """Give ``member`` its target assignment (no revocation in share groups); True when its
        epoch moved, so the heartbeat answer carries the assignment."""
        if member.member_epoch == self.assignment_epoch:
            return False
        member.previous_member_epoch = member.member_epoch
        member.member_epoch = self.assignment_epoch
        member.assignment = member.target_assignment
        return True
