"""A streams group (KIP-1071) and its members: Kafka's StreamsGroup, StreamsGroupMember,
TasksTuple and the streams CurrentAssignmentBuilder's reconciliation.

A task is (subtopology id, partition). A member owns active, standby and warmup tasks; the
coordinator moves it towards the group's target assignment in Kafka's steps: tasks it must give
up are first kept "pending revocation" at its current epoch (UNREVOKED_TASKS), an active task
still owned by another member is withheld (UNRELEASED_TASKS), and only then does the member reach
the target epoch (STABLE). State changes only by replaying ``__consumer_offsets`` records
(streams_records.py), so a restart rebuilds what the broker served.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from enum import Enum, IntEnum

Tasks = dict[str, frozenset[int]]  # subtopology id -> partitions


class MemberState(IntEnum):
    """Kafka's streams MemberState (the int8 of StreamsGroupCurrentMemberAssignmentValue)."""

    STABLE = 0
    UNREVOKED_TASKS = 1
    UNRELEASED_TASKS = 2
    UNKNOWN = 127


class StreamsGroupState(Enum):
    """StreamsGroupState's toString (DescribeGroups, ListGroups and the tools print it)."""

    EMPTY = "Empty"
    NOT_READY = "NotReady"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


def tasks_of(items: Iterable[tuple[str, Iterable[int]]]) -> Tasks:
    out: dict[str, set[int]] = {}
    for sub, parts in items:
        out.setdefault(sub, set()).update(parts)
    return {s: frozenset(p) for s, p in out.items() if p}


def minus(a: Tasks, b: Tasks) -> Tasks:
    return {s: left for s, ps in a.items() if (left := ps - b.get(s, frozenset()))}


def intersect(a: Tasks, b: Tasks) -> Tasks:
    return {s: both for s, ps in a.items() if (both := ps & b.get(s, frozenset()))}


def union(a: Tasks, b: Tasks) -> Tasks:
    out = dict(a)
    for s, ps in b.items():
        out[s] = out.get(s, frozenset()) | ps
    return {s: ps for s, ps in out.items() if ps}


def task_list(tasks: Tasks) -> list[tuple[str, list[int]]]:
    """Sorted by subtopology, partitions ascending (the order Kafka's records and answers use)."""
    return [(s, sorted(tasks[s])) for s in sorted(tasks)]


@dataclass(frozen=True)
class TasksTuple:
    active: Tasks = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)
    warmup: Tasks = field(default_factory=dict)

    def is_empty(self) -> bool:
        return not (self.active or self.standby or self.warmup)

    def contains_any(self, other: TasksTuple) -> bool:
        return bool(intersect(self.active, other.active) or intersect(self.standby, other.standby)
                    or intersect(self.warmup, other.warmup))


EMPTY_TASKS = TasksTuple()


@dataclass(frozen=True)
class TopicInfo:
    name: str
    partitions: int = 0
    replication_factor: int = 0
    configs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Subtopology:
    subtopology_id: str
    source_topics: tuple[str, ...] = ()
    source_topic_regex: tuple[str, ...] = ()
    state_changelog_topics: tuple[TopicInfo, ...] = ()
    repartition_sink_topics: tuple[str, ...] = ()
    repartition_source_topics: tuple[TopicInfo, ...] = ()
    copartition_groups: tuple[tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]], ...] = ()


@dataclass(frozen=True)
class StreamsTopology:
    """The topology a member sent (StreamsGroupTopologyValue), sorted by subtopology id."""

    epoch: int
    subtopologies: tuple[Subtopology, ...]


@dataclass(frozen=True)
class StreamsGroupMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    topology_epoch: int = -1
    process_id: str = ""
    user_endpoint: tuple[str, int] | None = None
    client_tags: tuple[tuple[str, str], ...] = ()
    assigned: TasksTuple = EMPTY_TASKS
    pending_revocation: TasksTuple = EMPTY_TASKS
    # KIP-1251: the epoch at which each active task was assigned (OffsetCommit's check)
    active_epochs: dict[tuple[str, int], int] = field(default_factory=dict)

    def metadata(self) -> tuple[object, ...]:
        return (self.instance_id, self.rack_id, self.client_id, self.client_host, self.rebalance_timeout_ms,
                self.topology_epoch, self.process_id, self.user_endpoint, self.client_tags)

    def assignment(self) -> tuple[object, ...]:
        return (self.member_epoch, self.previous_member_epoch, self.state, self.assigned, self.pending_revocation,
                self.active_epochs)


@dataclass
class StreamsGroup:
    group_id: str
    # Kafka 4.3.1 starts a new group at group and assignment epoch 1 (TargetAssignmentMetadata.INITIAL):
    # the first member's join makes epoch 2, while the initial rebalance delay keeps members at 1.
    group_epoch: int = 1
    metadata_hash: int = 0
    validated_topology_epoch: int = -1
    last_assignment_configs: dict[str, str] = field(default_factory=dict)
    assignment_epoch: int = 1
    assignment_timestamp: int = 0
    topology: StreamsTopology | None = None
    members: dict[str, StreamsGroupMember] = field(default_factory=dict)
    target: dict[str, TasksTuple] = field(default_factory=dict)
    # not persisted (Kafka's too): recomputed from the topology and the topics
    configured: object | None = None
    endpoint_information_epoch: int = 0
    shutdown_request_member_id: str | None = None

    @property
    def state(self) -> StreamsGroupState:
        if not self.members:
            return StreamsGroupState.EMPTY
        ready = getattr(self.configured, "ready", False)
        if self.topology is None or not ready:
            return StreamsGroupState.NOT_READY
        if self.group_epoch > self.assignment_epoch:
            return StreamsGroupState.ASSIGNING
        if any(m.state != MemberState.STABLE or m.member_epoch != self.assignment_epoch for m in self.members.values()):
            return StreamsGroupState.RECONCILING
        return StreamsGroupState.STABLE

    def active_owner(self, sub: str, partition: int) -> str | None:
        """The member that owns an active task (assigned or pending revocation), if any."""
        for m in self.members.values():
            if partition in m.assigned.active.get(sub, ()) or partition in m.pending_revocation.active.get(sub, ()):
                return m.member_id
        return None


# ---- reconciliation (Kafka's streams CurrentAssignmentBuilder) -----------------------------------

def reconcile(member: StreamsGroupMember, target_epoch: int, target: TasksTuple,
              owned: TasksTuple | None, active_owner: Callable[[str, int], str | None]) -> StreamsGroupMember:
    """The member's next assignment towards ``target`` at ``target_epoch``. ``owned`` is what the
    member's heartbeat says it owns (None: not sent)."""
    if member.state == MemberState.UNREVOKED_TASKS:
        if owned is None or owned.contains_any(member.pending_revocation):
            return member  # still revoking
        return _next(member, target_epoch, target, active_owner)
    if member.state == MemberState.UNRELEASED_TASKS or member.member_epoch != target_epoch:
        return _next(member, target_epoch, target, active_owner)
    return member


def _next(member: StreamsGroupMember, target_epoch: int, target: TasksTuple,
          active_owner: Callable[[str, int], str | None]) -> StreamsGroupMember:
    held = member.assigned
    revoke = TasksTuple(minus(held.active, target.active), minus(held.standby, target.standby), minus(held.warmup, target.warmup))
    if not revoke.is_empty():
        kept = TasksTuple(intersect(held.active, target.active), intersect(held.standby, target.standby),
                          intersect(held.warmup, target.warmup))
        epochs = {k: e for k, e in member.active_epochs.items() if k[1] in kept.active.get(k[0], ())}
        return replace(member, state=MemberState.UNREVOKED_TASKS, assigned=kept, pending_revocation=revoke,
                       active_epochs=epochs)
    # active tasks still owned by another member are withheld until it releases them
    active: dict[str, set[int]] = {}
    unreleased = False
    for sub, parts in target.active.items():
        for p in parts:
            owner = active_owner(sub, p)
            if owner is None or owner == member.member_id:
                active.setdefault(sub, set()).add(p)
            else:
                unreleased = True
    new_active = {s: frozenset(ps) for s, ps in active.items()}
    epochs = {}
    for sub, parts in new_active.items():
        for p in parts:
            epochs[(sub, p)] = member.active_epochs.get((sub, p), target_epoch)
    return replace(member, state=MemberState.UNRELEASED_TASKS if unreleased else MemberState.STABLE,
                   previous_member_epoch=member.member_epoch if member.member_epoch != target_epoch else member.previous_member_epoch,
                   member_epoch=target_epoch, assigned=TasksTuple(new_active, dict(target.standby), dict(target.warmup)),
                   pending_revocation=EMPTY_TASKS, active_epochs=epochs)
