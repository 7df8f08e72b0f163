"""Server-side partition assignors of consumer groups (KIP-848): ``uniform`` and ``range``.

The coordinator computes a group's target assignment itself (Kafka's TargetAssignmentBuilder
calling a ConsumerGroupPartitionAssignor). Both assignors here are sticky the way Kafka's are in
spirit: a member keeps the partitions of its current target assignment while that stays balanced,
so a rebalance moves as few partitions as it can (fewer revocations to reconcile).

- ``uniform`` (Kafka's UniformAssignor): every partition of every subscribed topic, spread so that
  the number of partitions of any two members eligible for a partition differs by at most one.
- ``range`` (Kafka's RangeAssignor): per topic, the members subscribed to it sorted by member id
  each get a contiguous range; the first ``partitions % members`` members get one more.

Assignments are ``{topic id: set of partitions}`` per member id.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

Assignment = dict[uuid.UUID, set[int]]


@dataclass(frozen=True)
class MemberSubscription:
    """What an assignor knows of a member (Kafka's MemberSubscriptionAndAssignmentImpl)."""

    topic_ids: frozenset[uuid.UUID]
    instance_id: str | None = None
    rack_id: str | None = None
    assignment: Mapping[uuid.UUID, frozenset[int] | set[int]] = field(default_factory=dict)


Assignor = Callable[[Mapping[str, MemberSubscription], Mapping[uuid.UUID, int]], dict[str, Assignment]]


def uniform_assign(members: Mapping[str, MemberSubscription], partitions: Mapping[uuid.UUID, int]) -> dict[str, Assignment]:
    """Balanced and sticky: keep valid current partitions, give the rest to the least loaded
    eligible member, then move partitions from members with two or more than an eligible one."""
    order = sorted(members)
    owner: dict[tuple[uuid.UUID, int], str] = {}
    load = dict.fromkeys(order, 0)
    eligible: dict[uuid.UUID, list[str]] = {}
    for m in order:
        for t in members[m].topic_ids:
            if t in partitions:
                eligible.setdefault(t, []).append(m)
    # 1. stickiness: each member keeps what it had, if still subscribed and existing
    for m in order:
        sub = members[m]
        for t, parts in sub.assignment.items():
            if t not in sub.topic_ids or t not in partitions:
                continue
            for p in sorted(parts):
                if p < partitions[t] and (t, p) not in owner:
                    owner[(t, p)] = m
                    load[m] += 1
    # 2. unassigned partitions to the least loaded eligible member
    for t in sorted(eligible, key=str):
        for p in range(partitions[t]):
            if (t, p) not in owner:
                m = min(eligible[t], key=lambda x: (load[x], x))
                owner[(t, p)] = m
                load[m] += 1
    # 3. balance: a member with two more than an eligible member gives it one partition
    moved = True
    while moved:
        moved = False
        for tp in sorted(owner, key=lambda k: (str(k[0]), k[1])):
            a = owner[tp]
            b = min(eligible[tp[0]], key=lambda x: (load[x], x))
            if load[a] > load[b] + 1:
                owner[tp] = b
                load[a] -= 1
                load[b] += 1
                moved = True
    out: dict[str, Assignment] = {m: {} for m in order}
    for (t, p), m in owner.items():
        out[m].setdefault(t, set()).add(p)
    return out


def range_assign(members: Mapping[str, MemberSubscription], partitions: Mapping[uuid.UUID, int]) -> dict[str, Assignment]:
    """Per topic, contiguous ranges over the subscribed members in member id order."""
    out: dict[str, Assignment] = {m: {} for m in sorted(members)}
    topics = {t for sub in members.values() for t in sub.topic_ids if t in partitions}
    for t in sorted(topics, key=str):
        subscribed = sorted(m for m, sub in members.items() if t in sub.topic_ids)
        n = partitions[t]
        base, extra = divmod(n, len(subscribed))
        start = 0
        for i, m in enumerate(subscribed):
            count = base + (1 if i < extra else 0)
            if count:
                out[m][t] = set(range(start, start + count))
            start += count
    return out


ASSIGNORS: dict[str, Assignor] = {"uniform": uniform_assign, "range": range_assign}
