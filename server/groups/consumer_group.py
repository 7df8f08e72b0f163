"""Consumer groups of the KIP-848 protocol: the group, its members and their reconciliation.

Ports of Kafka's ``ConsumerGroup``, ``ConsumerGroupMember`` and ``CurrentAssignmentBuilder``:

- the *group epoch* bumps whenever membership or subscriptions (or the subscribed topics'
  partitions) change; the *assignment epoch* is the group epoch the target assignment was
  computed for;
- each member has a *member epoch*; it moves to the assignment epoch as the member reconciles
  towards its target: partitions it must give up are revoked first (UNREVOKED_PARTITIONS, the
  member keeps its epoch), and a partition is only handed to a member once no other member owns
  it anymore (UNRELEASED_PARTITIONS otherwise), so no partition ever has two owners;
- ``partition_epochs`` maps each owned (or pending revocation) partition to its owner's epoch:
  Kafka's ``currentPartitionEpoch``.

State is only changed by replaying records (``server/groups/consumer_records.py``), as Kafka's
shard does: this module has no I/O.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from enum import Enum, IntEnum

Partitions = dict[uuid.UUID, frozenset[int]]


class MemberState(IntEnum):
    """Kafka's MemberState, with the byte it has in ConsumerGroupCurrentMemberAssignmentValue."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


class ConsumerGroupState(Enum):
    """Kafka's ConsumerGroup.ConsumerGroupState and the names DescribeGroups/ListGroups show."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True)
class ClassicMemberMetadata:
    """A member that speaks the classic protocol inside a consumer group (KIP-848's online
    migration): its session timeout and its JoinGroup protocols (name, metadata)."""

    session_timeout_ms: int
    supported_protocols: tuple[tuple[str, bytes], ...]

    def protocol_name(self) -> str:
        return self.supported_protocols[0][0] if self.supported_protocols else ""


@dataclass(frozen=True)
class ConsumerGroupMember:
    """One member (Kafka's ConsumerGroupMember): its metadata and its current assignment."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    rebalance_timeout_ms: int = -1
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Partitions = field(default_factory=dict)
    pending_revocation: Partitions = field(default_factory=dict)
    # (topic id, partition) -> the epoch it was assigned at (KIP-1251): a commit with an older
    # member epoch is accepted for the partitions the member already had at that epoch.
    assignment_epochs: dict[tuple[uuid.UUID, int], int] = field(default_factory=dict, compare=False)
    # set for a member using the classic protocol (JoinGroup/SyncGroup/Heartbeat), else None
    classic: ClassicMemberMetadata | None = None

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic is not None

    def assignment_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        return self.assignment_epochs.get((topic_id, partition), max(self.member_epoch, 0))

    def metadata_equals(self, other: ConsumerGroupMember) -> bool:
        """Same ConsumerGroupMemberMetadataValue (no record needed)."""
        return (self.instance_id, self.rack_id, self.client_id, self.client_host, self.subscribed_topic_names,
                self.subscribed_topic_regex, self.server_assignor, self.rebalance_timeout_ms, self.classic) == (
                other.instance_id, other.rack_id, other.client_id, other.client_host, other.subscribed_topic_names,
                other.subscribed_topic_regex, other.server_assignor, other.rebalance_timeout_ms, other.classic)

    def assignment_equals(self, other: ConsumerGroupMember) -> bool:
        """Same ConsumerGroupCurrentMemberAssignmentValue (no record needed)."""
        return (self.member_epoch, self.previous_member_epoch, self.state, self.assigned, self.pending_revocation) == (
            other.member_epoch, other.previous_member_epoch, other.state, other.assigned, other.pending_revocation)

    def with_epoch(self, epoch: int, **changes: object) -> ConsumerGroupMember:
        """Kafka's Builder.updateMemberEpoch: the previous epoch is the one replaced."""
        return replace(self, member_epoch=epoch, previous_member_epoch=self.member_epoch, **changes)  # type: ignore[arg-type]


@dataclass(frozen=True)
class ResolvedRegularExpression:
    """Kafka's ResolvedRegularExpression: the topics a regex matched, at which metadata version and when."""

    topics: frozenset[str]
    version: int
    timestamp_ms: int


@dataclass
class ConsumerGroup:
    """A consumer group's state (Kafka's ConsumerGroup)."""

    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerGroupMember] = field(default_factory=dict)
    # member id -> its target assignment (ConsumerGroupTargetAssignmentMember records)
    target: dict[str, Partitions] = field(default_factory=dict)
    # (topic id, partition) -> epoch of the member owning it
    partition_epochs: dict[tuple[uuid.UUID, int], int] = field(default_factory=dict)
    # instance id -> member id of the static members
    static_members: dict[str, str] = field(default_factory=dict)
    # topic name -> partition count the last target assignment saw (Kafka: the metadata hash)
    subscribed_metadata: dict[str, int] = field(default_factory=dict)
    # when the last target assignment was computed (monotonic ms; 0: not since start)
    last_assignment_ms: int = 0
    # regex -> the topics it resolved to (ConsumerGroupRegularExpression records)
    resolved_regexes: dict[str, ResolvedRegularExpression] = field(default_factory=dict)

    @property
    def state(self) -> ConsumerGroupState:
        """Kafka's ConsumerGroup.maybeUpdateGroupState."""
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for m in self.members.values():
            if m.state != MemberState.STABLE or m.member_epoch != self.assignment_epoch:
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def subscribed_topic_names(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed_topic_names}

    def preferred_assignor(self, default: str) -> str:
        """The assignor most members ask for, else ``default`` (Kafka's computePreferredServerAssignor)."""
        counts: dict[str, int] = {}
        for m in self.members.values():
            if m.server_assignor:
                counts[m.server_assignor] = counts.get(m.server_assignor, 0) + 1
        return max(sorted(counts), key=lambda a: counts[a]) if counts else default

    def classic_members(self) -> list[ConsumerGroupMember]:
        return [m for m in self.members.values() if m.classic is not None]

    def supports_classic_protocols(self, protocol_type: str, names: set[str]) -> bool:
        """Kafka's ConsumerGroup.supportsClassicProtocols: one of ``names`` every classic member supports."""
        if protocol_type != "consumer":
            return False
        if not self.members:
            return bool(names)
        classic = self.classic_members()
        return any(all(n in {p for p, _ in m.classic.supported_protocols} for m in classic if m.classic) for n in names)

    def all_members_use_classic_protocol_except(self, member_id: str) -> bool:
        member = self.members.get(member_id)
        return member is not None and member.classic is None and len(self.classic_members()) == len(self.members) - 1

    def waiting_on_unreleased_partition(self, member: ConsumerGroupMember) -> bool:
        """Kafka's waitingOnUnreleasedPartition: a target partition still owned by another member."""
        if member.state != MemberState.UNRELEASED_PARTITIONS:
            return False
        for t, ps in self.target.get(member.member_id, {}).items():
            mine = member.assigned.get(t, frozenset())
            if any(p not in mine and self.current_partition_epoch(t, p) != -1 for p in ps):
                return True
        return False

    def current_partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        return self.partition_epochs.get((topic_id, partition), -1)

    def update_member(self, member: ConsumerGroupMember) -> None:
        """Replace a member, moving its partitions' epochs (Kafka's updateMember)."""
        old = self.members.get(member.member_id)
        if old is not None:
            self._release(old)
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        for parts in (member.assigned, member.pending_revocation):
            for t, ps in parts.items():
                for p in ps:
                    self.partition_epochs[(t, p)] = member.member_epoch

    def remove_member(self, member_id: str) -> None:
        old = self.members.pop(member_id, None)
        if old is not None:
            self._release(old)
            if old.instance_id is not None and self.static_members.get(old.instance_id) == member_id:
                del self.static_members[old.instance_id]

    def _release(self, member: ConsumerGroupMember) -> None:
        for parts in (member.assigned, member.pending_revocation):
            for t, ps in parts.items():
                for p in ps:
                    self.partition_epochs.pop((t, p), None)


def owned_partitions(owned: Iterable[tuple[uuid.UUID, Iterable[int]]] | None) -> Partitions | None:
    """The ``topic_partitions`` of a heartbeat as a map (None: not sent)."""
    if owned is None:
        return None
    out: dict[uuid.UUID, frozenset[int]] = {}
    for t, ps in owned:
        out[t] = out.get(t, frozenset()) | frozenset(ps)
    return out


def is_subset(owned: Partitions | None, assigned: Partitions) -> bool:
    """Whether every owned partition is assigned (Kafka's isSubset for the epoch check)."""
    if owned is None:
        return False
    return all(ps <= assigned.get(t, frozenset()) for t, ps in owned.items() if ps)


def _owns_any(owned: Partitions | None, partitions: Partitions) -> bool:
    """Kafka's ownsRevokedPartitions: unknown ownership counts as owning."""
    if owned is None:
        return True
    return any(owned.get(t, frozenset()) & ps for t, ps in partitions.items())


def reconcile(
    member: ConsumerGroupMember, target_epoch: int, target: Partitions, subscribed_topic_ids: set[uuid.UUID],
    owned: Partitions | None, partition_epoch: Callable[[uuid.UUID, int], int],
) -> ConsumerGroupMember:
    """The member's next state towards ``target`` (Kafka's CurrentAssignmentBuilder.build)."""
    if member.state == MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return _next_assignment(member, member.member_epoch, target_epoch, target, subscribed_topic_ids, owned, partition_epoch)
        return member
    if member.state == MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            return member
        return _next_assignment(member, member.member_epoch, target_epoch, target, subscribed_topic_ids, owned, partition_epoch)
    if member.state == MemberState.UNRELEASED_PARTITIONS:
        return _next_assignment(member, member.member_epoch, target_epoch, target, subscribed_topic_ids, owned, partition_epoch)
    return _next_assignment(member, target_epoch, target_epoch, target, subscribed_topic_ids, owned, partition_epoch)


def _next_assignment(
    member: ConsumerGroupMember, member_epoch: int, target_epoch: int, target: Partitions,
    subscribed_topic_ids: set[uuid.UUID], owned: Partitions | None, partition_epoch: Callable[[uuid.UUID, int], int],
) -> ConsumerGroupMember:
    """Kafka's computeNextAssignment: revoke first; then assign what is free; else wait."""
    unreleased = False
    assigned: dict[uuid.UUID, frozenset[int]] = {}
    revoking: dict[uuid.UUID, frozenset[int]] = {}
    pending: dict[uuid.UUID, frozenset[int]] = {}
    for t in set(target) | set(member.assigned):
        want = target.get(t, frozenset()) if t in subscribed_topic_ids else frozenset()
        current = member.assigned.get(t, frozenset())
        keep = current & want
        revoke = current - keep
        to_assign = want - keep
        own_revoking = member.pending_revocation.get(t, frozenset())
        free = frozenset(p for p in to_assign if partition_epoch(t, p) == -1 or p in own_revoking)
        if free != to_assign:
            unreleased = True
        if keep:
            assigned[t] = keep
        if revoke:
            revoking[t] = revoke
        if free:
            pending[t] = free
    epochs = {(t, p): member.assignment_epoch(t, p) for t, ps in assigned.items() for p in ps}
    if revoking and _owns_any(owned, revoking):
        return member.with_epoch(member_epoch, state=MemberState.UNREVOKED_PARTITIONS, assigned=assigned,
                                 pending_revocation=revoking, assignment_epochs=epochs)
    for t, ps in pending.items():
        assigned[t] = assigned.get(t, frozenset()) | ps
        epochs.update(((t, p), target_epoch) for p in ps)
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return member.with_epoch(target_epoch, state=state, assigned=assigned, pending_revocation={}, assignment_epochs=epochs)
