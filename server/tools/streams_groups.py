"""``kafka-sidecar groups`` for streams groups (KIP-1071): kafka-streams-groups.sh's --list and
--describe (offsets, --members, --state, each with --verbose), the same bytes as Kafka 4.3.1's tool.

What it prints comes from StreamsGroupDescribe (89): members with their process, client and
active/standby/warm-up tasks, the group and target-assignment epochs, and the topology's
subtopologies, whose source (and repartition source) topics turn a member's active tasks into the
partitions whose offsets are shown (OffsetFetch for the committed offsets, ListOffsets for the
log start and end). As in Kafka's tool the offset rows come in the iteration order of a Java
``HashMap`` keyed by TopicPartition (reproduced by ``JavaHashMap``).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any, TextIO

from kafka_sidecar.client import KafkaClient
from kafka_sidecar.server.groups.javaorder import JavaHashMap
from kafka_sidecar.server.groups.records import java_string_hash

from .admin import (
    EARLIEST,
    LATEST,
    OFFSET_FETCH,
    coordinator,
    coordinator_address,
    java_exception,
    list_offsets,
    request,
    retrying,
)
from .group_describe import GroupCommandError, describe_one, print_list

STREAMS_GROUP_DESCRIBE = 89
MISSING = "-"

TopicPartition = tuple[str, int]
Tasks = list[tuple[str, list[int]]]  # (subtopology id, partitions), in the answer's order


@dataclass
class StreamsMember:
    member_id: str
    member_epoch: int
    process_id: str
    client_id: str
    is_classic: bool
    active: Tasks
    standby: Tasks
    warmup: Tasks
    target_active: Tasks
    target_standby: Tasks
    target_warmup: Tasks


@dataclass
class StreamsGroup:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    topology_epoch: int
    members: list[StreamsMember]
    # subtopology id -> its source topics then its repartition source topics
    subtopology_topics: dict[str, list[str]] = field(default_factory=dict)


def _tasks(tasks: Any) -> Tasks:
    return [(t.subtopology_id, list(t.partitions)) for t in tasks or ()]


def describe_streams(client: KafkaClient, group: str) -> StreamsGroup:
    """StreamsGroupDescribe v0; GroupCommandError with Kafka's message if the group is not there."""
    g = describe_one(client, group, STREAMS_GROUP_DESCRIBE, "streams", 0)
    subtopologies = g.topology.subtopologies if g.topology is not None else ()
    members = []
    for m in g.members:
        a, t = m.assignment, m.target_assignment
        members.append(StreamsMember(
            m.member_id, m.member_epoch, m.process_id, m.client_id, bool(m.is_classic),
            _tasks(a.active_tasks), _tasks(a.standby_tasks), _tasks(a.warmup_tasks),
            _tasks(t.active_tasks), _tasks(t.standby_tasks), _tasks(t.warmup_tasks)))
    return StreamsGroup(
        g.group_id, g.group_state, g.group_epoch, g.assignment_epoch, g.topology.epoch if g.topology is not None else -1, members,
        {s.subtopology_id: [*s.source_topics, *(r.name for r in s.repartition_source_topics)] for s in subtopologies})


# ---- list ---------------------------------------------------------------------------------


def list_(client: KafkaClient, args: argparse.Namespace, out: TextIO) -> int:
    print_list(client, "streams", args.state, out)
    return 0


# ---- describe -----------------------------------------------------------------------------


def _note(group: str, state: str, out: TextIO) -> None:
    """StreamsGroupCommand.maybePrintEmptyGroupState (an error line on stdout, as Kafka's)."""
    if state == "Dead":
        out.write(f"\nError: Streams group '{group}' does not exist.\n")
    elif state == "Empty":
        out.write(f"\nError: Streams group '{group}' has no active members.\n")


def _task_string(tasks: Tasks, kind: str) -> str:
    if not tasks:
        return ""
    return f"{kind}: " + "".join(f"{sub}:[{','.join(str(p) for p in parts)}]; " for sub, parts in tasks)


def _assignments(m: StreamsMember, target: bool) -> str:
    text = _task_string(m.active, "ACTIVE") + _task_string(m.standby, "STANDBY") + _task_string(m.warmup, "WARMUP")
    if target:
        text += (_task_string(m.target_active, "TARGET-ACTIVE") + _task_string(m.target_standby, "TARGET-STANDBY")
                 + _task_string(m.target_warmup, "TARGET-WARMUP"))
    return text


def _print_members(g: StreamsGroup, out: TextIO, verbose: bool) -> None:
    if g.state == "Dead" or not g.members:
        return
    _note(g.group_id, g.state, out)
    wg = max(15, len(g.group_id))
    wm = max([15, *(len(m.member_id) for m in g.members)])
    wp = max([15, *(len(m.process_id) for m in g.members)])
    wc = max([15, *(len(m.client_id) for m in g.members)])
    if not verbose:
        fmt = f"{{:<{wg}}} {{:<{wm}}} {{:<{wp}}} {{:<{wc}}} {{}}\n"
        out.write(fmt.format("GROUP", "MEMBER", "PROCESS", "CLIENT-ID", "ASSIGNMENTS"))
        for m in g.members:
            out.write(fmt.format(g.group_id, m.member_id, m.process_id, m.client_id, _assignments(m, False)))
        return
    fmt = f"{{:<{wg}}} {{:<25}} {{:<15}}{{:<{wm}}} {{:<15}} {{:<15}} {{:<{wp}}} {{:<{wc}}} {{}}\n"
    out.write(fmt.format("GROUP", "TARGET-ASSIGNMENT-EPOCH", "TOPOLOGY-EPOCH", "MEMBER", "MEMBER-PROTOCOL", "MEMBER-EPOCH",
                         "PROCESS", "CLIENT-ID", "ASSIGNMENTS"))
    for m in g.members:
        out.write(fmt.format(g.group_id, str(g.assignment_epoch), str(g.topology_epoch), m.member_id,
                             "classic" if m.is_classic else "streams", str(m.member_epoch), m.process_id, m.client_id,
                             _assignments(m, True)))


def _print_state(client: KafkaClient, g: StreamsGroup, out: TextIO, verbose: bool) -> None:
    _note(g.group_id, g.state, out)
    node, host, port = coordinator_address(client, g.group_id)
    coord = f"{host}:{port} ({node})"
    wg, wc = max(15, len(g.group_id)), max(25, len(coord))
    if verbose:
        fmt = f"{{:<{wg}}} {{:<{wc}}} {{:<25}} {{:<15}} {{:<25}} {{}}\n"
        out.write(fmt.format("GROUP", "COORDINATOR (ID)", "STATE", "GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"))
        out.write(fmt.format(g.group_id, coord, g.state, str(g.group_epoch), str(g.assignment_epoch), len(g.members)))
    else:
        fmt = f"{{:<{wg}}} {{:<{wc}}} {{:<25}} {{}}\n"
        out.write(fmt.format("GROUP", "COORDINATOR (ID)", "STATE", "#MEMBERS"))
        out.write(fmt.format(g.group_id, coord, g.state, len(g.members)))


def _tp_hash(tp: TopicPartition) -> int:
    """Java's TopicPartition.hashCode (31 * (31 + partition) + topic.hashCode(), an int)."""
    h = (31 * (31 + tp[1]) + java_string_hash(tp[0])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def _committed(client: KafkaClient, g: StreamsGroup) -> dict[TopicPartition, tuple[int, int]]:
    """The group's committed (offset, leader epoch) on its source and repartition source topics (OffsetFetch)."""
    body = retrying(
        lambda: request(coordinator(client, g.group_id), OFFSET_FETCH, 8, {
            "groups": [{"group_id": g.group_id, "topics": None}], "require_stable": False}),
        lambda b: b.groups[0].error_code.value,
    )
    (og,) = body.groups
    sources = {t for topics in g.subtopology_topics.values() for t in topics}
    if og.error_code.value:
        raise GroupCommandError(f"Executing streams group command failed due to {java_exception(og.error_code.value)}")
    return {(t.name, p.partition_index): (p.committed_offset, p.committed_leader_epoch)
            for t in og.topics if t.name in sources for p in t.partitions
            if not p.error_code.value and p.committed_offset >= 0}


def _offset_rows(client: KafkaClient, g: StreamsGroup) -> list[tuple[TopicPartition, str, str, int, int]]:
    """(partition, current offset, leader epoch, log end offset, lag) for every partition of the
    members' active tasks, in Kafka's HashMap order."""
    rows: JavaHashMap[TopicPartition, None] = JavaHashMap(_tp_hash)
    for m in g.members:
        for sub, parts in m.active:
            topics = g.subtopology_topics.get(sub)
            if topics is None:
                raise GroupCommandError(f"Subtopology {sub} not found in group description!")
            for topic in topics:
                for p in parts:
                    rows[(topic, p)] = None
    tps = list(rows.keys())
    earliest, latest = list_offsets(client, tps, EARLIEST), list_offsets(client, tps, LATEST)
    committed = _committed(client, g)
    out = []
    for tp in tps:
        end = latest[tp]
        if tp in committed:
            current, epoch = committed[tp]
            out.append((tp, str(current), MISSING if epoch < 0 else str(epoch), end, end - current))
        else:
            out.append((tp, MISSING, MISSING, end, end - earliest[tp]))
    return out


def _print_offsets(client: KafkaClient, g: StreamsGroup, out: TextIO, verbose: bool) -> None:
    rows = _offset_rows(client, g)
    if g.state == "Dead" or not g.members:
        return
    _note(g.group_id, g.state, out)
    wg = max(15, len(g.group_id))
    wt = max([15, *(len(tp[0]) for tp, *_ in rows)])
    if verbose:
        fmt = f"{{:<{wg}}} {{:<{wt}}} {{:<10}} {{:<15}} {{:<15}} {{:<15}} {{:<15}}\n"
        out.write(fmt.format("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LEADER-EPOCH", "LOG-END-OFFSET", "OFFSET-LAG"))
        for (topic, p), current, epoch, end, lag in rows:
            out.write(fmt.format(g.group_id, topic, str(p), current, epoch, str(end), str(lag)))
    else:
        fmt = f"{{:<{wg}}} {{:<{wt}}} {{:<10}} {{}}\n"
        out.write(fmt.format("GROUP", "TOPIC", "PARTITION", "OFFSET-LAG"))
        for (topic, p), _, _, _, lag in rows:
            out.write(fmt.format(g.group_id, topic, str(p), str(lag)))


def describe(client: KafkaClient, group: str, args: argparse.Namespace, out: TextIO) -> int:
    """One streams group as kafka-streams-groups.sh --describe prints it."""
    g = describe_streams(client, group)
    if args.members:
        _print_members(g, out, args.verbose)
    elif args.state:
        _print_state(client, g, out, args.verbose)
    else:
        _print_offsets(client, g, out, args.verbose)
    return 0
