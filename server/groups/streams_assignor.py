"""The server-side task assignor of streams groups, after Kafka's StickyTaskAssignor ("sticky").

Active tasks stay with the member that had them (then with a member of the same process, then
with a member that had them as standby) as long as that keeps the load balanced; the rest go to
the least loaded member. Each task then gets ``num.standby.replicas`` standbys on other processes
than its active one, preferring the members that already had it. Kafka 4.3.1's sticky assignor
assigns no warmup tasks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .streams_group import Tasks, TasksTuple


@dataclass(frozen=True)
class AssignmentMember:
    member_id: str
    process_id: str
    previous: TasksTuple


def assign(members: list[AssignmentMember], tasks: dict[str, int], num_standby: int) -> dict[str, TasksTuple]:
    """member id -> its target tasks for ``tasks`` (subtopology id -> task count)."""
    if not members:
        return {}
    all_tasks = [(s, p) for s in sorted(tasks) for p in range(tasks[s])]
    order = sorted(members, key=lambda m: m.member_id)
    active: dict[str, set[tuple[str, int]]] = {m.member_id: set() for m in order}
    process_of = {m.member_id: m.process_id for m in order}
    limit = math.ceil(len(all_tasks) / len(order)) if all_tasks else 0
    prev_active = {(s, p): m.member_id for m in order for s, ps in m.previous.active.items() for p in ps}
    prev_standby: dict[tuple[str, int], list[str]] = {}
    for m in order:
        for s, ps in m.previous.standby.items():
            for p in ps:
                prev_standby.setdefault((s, p), []).append(m.member_id)
    unassigned = []
    for task in all_tasks:
        owner = prev_active.get(task)
        if owner is not None and len(active[owner]) < limit:
            active[owner].add(task)
        else:
            unassigned.append(task)
    rest = []
    for task in unassigned:
        cands = [mid for mid in prev_standby.get(task, ()) if len(active[mid]) < limit]
        if cands:
            active[min(cands, key=lambda mid: (len(active[mid]), mid))].add(task)
        else:
            rest.append(task)
    for task in rest:
        active[min(active, key=lambda mid: (len(active[mid]), mid))].add(task)
    standby: dict[str, set[tuple[str, int]]] = {m.member_id: set() for m in order}
    if num_standby > 0:
        active_process = {t: process_of[mid] for mid, ts in active.items() for t in ts}
        for task in all_tasks:
            used = {active_process[task]}
            preferred = prev_standby.get(task, [])
            for _ in range(num_standby):
                cands = [mid for mid in active if process_of[mid] not in used]
                if not cands:
                    break
                mid = min(cands, key=lambda m: (m not in preferred, len(active[m]) + len(standby[m]), m))
                standby[mid].add(task)
                used.add(process_of[mid])
    return {mid: TasksTuple(_tasks(active[mid]), _tasks(standby[mid]), {}) for mid in active}


def _tasks(items: set[tuple[str, int]]) -> Tasks:
    out: dict[str, set[int]] = {}
    for s, p in items:
        out.setdefault(s, set()).add(p)
    return {s: frozenset(ps) for s, ps in out.items()}
