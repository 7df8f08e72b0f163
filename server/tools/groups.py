"""``kafka-sidecar groups``: kafka-consumer-groups.sh's list, describe (with lag) and reset,
kafka-share-groups.sh's list and describe for share groups, and kafka-streams-groups.sh's for
streams groups.

Same options and output as Kafka 4's tools for what they share::

    kafka-sidecar groups --bootstrap-server HOST:PORT --list [--state] [--type consumer|share|streams]
    kafka-sidecar groups --bootstrap-server HOST:PORT --describe (--group G ... | --all-groups) [--members | --state] [--verbose]
    kafka-sidecar groups --bootstrap-server HOST:PORT --reset-offsets --group G
                         (--topic T[:P,P...] ... | --all-topics)
                         (--to-earliest | --to-latest | --to-offset N | --to-current | --shift-by N | --to-datetime ISO)
                         [--execute | --dry-run]

Describe finds each group's type (ListGroups v5) and prints it as Kafka's tool for that type
does: classic and KIP-848 consumer groups as kafka-consumer-groups.sh (one row per partition:
committed offset, log end offset, lag, and the member it is assigned to, or ``-``), share groups
as kafka-share-groups.sh (``share_groups.py``), streams groups as kafka-streams-groups.sh
(``streams_groups.py``). The describe APIs per type are in
``group_describe.py``. Reset only touches
inactive groups (Empty or unknown), like Kafka; without ``--execute`` it is a dry run that
prints the plan. Only the Kafka protocol is used (FindCoordinator, ListGroups, DescribeGroups,
ConsumerGroupDescribe, ShareGroupDescribe, DescribeShareGroupOffsets, StreamsGroupDescribe,
OffsetFetch, OffsetCommit,
ListOffsets, Metadata), so the tool works against any Kafka broker.
Errors print Kafka's ``Error: ...`` line; the exit status is 1 then (Kafka's tool exits 0).
"""

from __future__ import annotations

import argparse
import datetime
import sys
from typing import TextIO

from kafka_sidecar.client import KafkaClient
from kafka_sidecar.server.tools.command_config import command_config

from . import share_groups, streams_groups
from .admin import (
    EARLIEST,
    LATEST,
    OFFSET_FETCH,
    commit_offsets,
    coordinator,
    coordinator_address,
    java_exception,
    list_offsets,
    request,
    retrying,
)
from .group_describe import (
    DESCRIBERS,
    GroupCommandError,
    GroupDescription,
    assignment_string,
    describe_consumer,
    list_groups,
)

MISSING = "-"
RESETTABLE_STATES = {"Empty", "Dead"}
REBALANCING_STATES = {"PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"}


CONSUMER_TYPES = ["classic", "consumer"]  # what kafka-consumer-groups.sh lists


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="list consumer groups")
    action.add_argument("--describe", action="store_true", help="describe groups: offsets and lag (default), --members or --state")
    action.add_argument("--reset-offsets", action="store_true", help="reset committed offsets of an inactive group")
    p.add_argument("--group", action="append", default=[], help="group id (repeatable)")
    p.add_argument("--all-groups", action="store_true", help="every group (--describe)")
    p.add_argument("--members", action="store_true", help="describe members")
    p.add_argument("--state", action="store_true", help="describe (or list with) the group state")
    p.add_argument("--offsets", action="store_true", help="describe offsets (the default)")
    p.add_argument("--verbose", action="store_true", help="describe with epochs and assignments (KIP-848, share and streams groups)")
    p.add_argument("--type", choices=["consumer", "share", "streams"], default=None,
                   help="--list: consumer groups (classic and KIP-848, the default), share or streams groups; "
                        "--describe finds each group's type itself")
    p.add_argument("--topic", action="append", default=[], metavar="TOPIC[:P,P]", help="topic (and partitions) to reset")
    p.add_argument("--all-topics", action="store_true", help="reset every partition the group has committed")
    to = p.add_mutually_exclusive_group()
    to.add_argument("--to-earliest", action="store_true")
    to.add_argument("--to-latest", action="store_true")
    to.add_argument("--to-offset", type=int)
    to.add_argument("--to-current", action="store_true")
    to.add_argument("--shift-by", type=int)
    to.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss")
    run = p.add_mutually_exclusive_group()
    run.add_argument("--execute", action="store_true", help="commit the new offsets (default: dry run)")
    run.add_argument("--dry-run", action="store_true", help="only print the new offsets (the default)")
    p.add_argument("--command-config", default=None, metavar="FILE",
                   help="client properties (security.protocol, ssl.*, sasl.*), as Kafka's tools take them")


# ---- protocol helpers ---------------------------------------------------------------------


def describe_group(client: KafkaClient, group: str) -> GroupDescription | None:
    """A consumer group (KIP-848 or classic) as kafka-consumer-groups.sh sees it; None if none."""
    return describe_consumer(client, group)


def committed_offsets_and_epochs(client: KafkaClient, group: str) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]]:
    """The group's committed offsets and their leader epochs (OffsetFetch v8)."""
    body = retrying(
        lambda: request(coordinator(client, group), OFFSET_FETCH, 8, {
            "groups": [{"group_id": group, "topics": None}], "require_stable": False,
        }),
        lambda b: b.groups[0].error_code.value,
    )
    (g,) = body.groups
    if g.error_code.value:
        raise GroupCommandError(f"Executing consumer group command failed due to {java_exception(g.error_code.value)}")
    parts = [(t.name, p) for t in g.topics for p in t.partitions if not p.error_code.value and p.committed_offset >= 0]
    return ({(t, p.partition_index): p.committed_offset for t, p in parts},
            {(t, p.partition_index): p.committed_leader_epoch for t, p in parts})


def committed_offsets(client: KafkaClient, group: str) -> dict[tuple[str, int], int]:
    return committed_offsets_and_epochs(client, group)[0]


# ---- describe -----------------------------------------------------------------------------


def _state_note(group: str, state: str | None, err: TextIO, out: TextIO) -> bool:
    """Kafka's shouldPrintMemberState: the note for the state; False if there is nothing to print."""
    if state is None or state == "Dead":
        out.write(f"\nError: Consumer group '{group}' does not exist.\n")
        return False
    if state == "Empty":
        err.write(f"\nConsumer group '{group}' has no active members.\n")
    elif state in REBALANCING_STATES:
        err.write(f"\nWarning: Consumer group '{group}' is rebalancing.\n")
    return True


def _offset_rows(client: KafkaClient, group: str, g: GroupDescription) -> list[list[str]]:
    committed, epochs = committed_offsets_and_epochs(client, group)
    members = [(m, sorted(m.assignment)) for m in g.members]
    members = [(m, a) for m, a in members if a]
    members.sort(key=lambda ma: -len(ma[1]))  # Kafka: members with the most partitions first
    assigned = {tp for _, a in members for tp in a}
    unassigned = sorted(tp for tp in committed if tp not in assigned)
    ends = list_offsets(client, sorted(assigned | set(unassigned)), LATEST)
    rows: list[list[str]] = []

    def row(tp: tuple[str, int], member: str, host: str, client_id: str) -> list[str]:
        off = committed.get(tp)
        end = ends.get(tp)
        lag = str(end - off) if off is not None and end is not None else MISSING
        epoch = epochs.get(tp, -1)
        return [group, tp[0], str(tp[1]), MISSING if off is None else str(off), MISSING if end is None else str(end),
                lag, member, host, client_id, MISSING if epoch < 0 else str(epoch)]

    for m, a in members:
        rows += [row(tp, m.member_id, m.host, m.client_id) for tp in a]
    rows += [row(tp, MISSING, MISSING, MISSING) for tp in unassigned]
    return rows


def _print_offsets(rows: list[list[str]], out: TextIO, verbose: bool) -> None:
    wg = max([15, *(len(r[0]) for r in rows)])
    wt = max([15, *(len(r[1]) for r in rows)])
    wc = max([15, *(len(r[6]) for r in rows)])
    wh = max([15, *(len(r[7]) for r in rows)])

    def fmt(r: list[str]) -> str:
        epoch = f"{r[9]:<15} " if verbose else ""
        return (f"\n{r[0]:<{wg}} {r[1]:<{wt}} {r[2]:<10} {epoch}{r[3]:<15} {r[4]:<15} {r[5]:<15} "
                f"{r[6]:<{wc}} {r[7]:<{wh}} {r[8]}")

    out.write(fmt(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID",
                   "LEADER-EPOCH"]))
    for r in rows:
        out.write(fmt(r))
    out.write("\n")


def _print_members(group: str, g: GroupDescription, out: TextIO, verbose: bool) -> None:
    """ConsumerGroupCommand.printMembers: GROUP-INSTANCE-ID when a member has one; with
    --verbose the epochs and assignments (KIP-848), UPGRADED when classic and consumer members mix."""
    members = g.members
    wg = max([15, len(group)])
    wc = max([15, *(len(m.member_id) for m in members)])
    wi = max([17, *(len(m.instance_id or "") for m in members)])
    wh = max([15, *(len(m.host) for m in members)])
    wl = max([15, *(len(m.client_id) for m in members)])
    with_instance = any(m.instance_id for m in members)
    current = [assignment_string(m.assignment) for m in members]
    target = [assignment_string(m.target_assignment) for m in members]
    wa = max([20, *(len(a) for a in current)])
    wt = max([20, *(len(a) for a in target)])
    upgraded = any(m.upgraded is False for m in members) and any(m.upgraded for m in members)

    def line(cols: list[str], extra: list[str]) -> str:
        base = f"{cols[0]:<{wg}} {cols[1]:<{wc}} "
        if with_instance:
            base += f"{cols[2]:<{wi}} "
        base += f"{cols[3]:<{wh}} {cols[4]:<{wl}} {cols[5]:<15} "
        if verbose:
            base += f"{extra[0]:<15} {extra[1]:<{wa}} {extra[2]:<15} {extra[3]:<{wt}}"
            if upgraded:
                base += f" {extra[4]}"
        return base

    out.write("\n" + line(["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS"],
                           ["CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT", "UPGRADED"]))
    target_epoch = MISSING if g.assignment_epoch is None else str(g.assignment_epoch)
    for m, cur, tgt in zip(members, current, target, strict=True):
        epoch = MISSING if m.member_epoch is None else str(m.member_epoch)
        up = MISSING if m.upgraded is None else str(m.upgraded).lower()
        out.write("\n" + line([group, m.member_id, m.instance_id or "", m.host, m.client_id, str(len(m.assignment))],
                               [epoch, cur, target_epoch, tgt, up]))
    out.write("\n")


def _print_state(client: KafkaClient, group: str, g: GroupDescription, out: TextIO, verbose: bool) -> None:
    node, host, port = coordinator_address(client, group)
    coord = f"{host}:{port}  ({node})"
    wc = max(25, len(coord))
    wg = max(15, len(group))
    strategy = g.assignor or MISSING
    if verbose:
        fmt = f"\n{{:<{wg}}} {{:<{wc}}} {{:<20}} {{:<20}} {{:<15}} {{:<25}} {{}}"
        out.write(fmt.format("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"))
        epoch = MISSING if g.group_epoch is None else g.group_epoch
        target = MISSING if g.assignment_epoch is None else g.assignment_epoch
        out.write(fmt.format(group, coord, strategy, g.state, epoch, target, len(g.members)))
    else:
        fmt = f"\n{{:<{wg}}} {{:<{wc}}} {{:<20}} {{:<20}} {{}}"
        out.write(fmt.format("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"))
        out.write(fmt.format(group, coord, strategy, g.state, len(g.members)))
    out.write("\n")


def _group_types(client: KafkaClient) -> dict[str, str]:
    return {gid: gtype for gid, _, gtype, _ in list_groups(client, [])}


def _describe(client: KafkaClient, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    kinds = _group_types(client)
    if args.type == "streams":
        # kafka-streams-groups.sh: the groups in the order given (or listed), each as its type
        streams = [g for g, t in kinds.items() if t == "streams"] if args.all_groups else list(args.group)
        for group in streams:
            streams_groups.describe(client, group, args, out)
        return 0
    if args.all_groups:
        wanted = ["share"] if args.type == "share" else CONSUMER_TYPES
        groups = sorted(g for g, t in kinds.items() if t in wanted)
    else:
        groups = list(args.group)
    if not groups:
        raise GroupCommandError("Option [describe] takes one of these options: [all-groups], [group]")
    for group in sorted(groups):
        kind = kinds.get(group)
        if kind == "streams":
            streams_groups.describe(client, group, args, out)
            continue
        if kind == "share" or (kind is None and args.type == "share"):
            status = share_groups.describe(client, group, args, out, err)
            if status:
                return status
            continue
        if kind not in DESCRIBERS and kind is not None:
            raise GroupCommandError(f"Group '{group}' is a {kind} group: this tool does not describe {kind} groups yet")
        g = describe_group(client, group)
        if g is None:
            out.write(f"\nError: Executing consumer group command failed due to "
                      f"org.apache.kafka.common.errors.GroupIdNotFoundException: Group {group} not found.\n")
            return 1
        if args.members:
            if _state_note(group, g.state, err, out):
                _print_members(group, g, out, args.verbose)
        elif args.state:
            if _state_note(group, g.state, err, out):
                _print_state(client, group, g, out, args.verbose)
        else:
            rows = _offset_rows(client, group, g)
            if _state_note(group, g.state, err, out) and rows:
                _print_offsets(rows, out, args.verbose)
    return 0


# ---- reset --------------------------------------------------------------------------------


def _partitions_to_reset(client: KafkaClient, group: str, args: argparse.Namespace) -> list[tuple[str, int]]:
    if args.all_topics:
        return sorted(committed_offsets(client, group))
    if not args.topic:
        raise GroupCommandError("One of the reset scopes should be defined: --all-topics, --topic.")
    out: list[tuple[str, int]] = []
    named = []
    for spec in args.topic:
        topic, sep, parts = spec.partition(":")
        if sep:
            out += [(topic, int(p)) for p in parts.split(",") if p.strip()]
        else:
            named.append(topic)
    if named:
        meta = client.metadata(named)
        for t in meta.topics:
            if t.error_code.value:
                raise GroupCommandError(f"Executing consumer group command failed due to {java_exception(t.error_code.value)}")
            out += [(t.name, p.partition_index) for p in t.partitions]
    return sorted(set(out))


def _parse_datetime(text: str) -> int:
    try:
        dt = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise GroupCommandError(f"Error parsing timestamp: {text} (expected YYYY-MM-DDTHH:mm:SS.sss)") from None
    if dt.tzinfo is None:
        dt = dt.astimezone()  # local time, as Kafka's tool assumes
    return int(dt.timestamp() * 1000)


def _new_offsets(client: KafkaClient, group: str, tps: list[tuple[str, int]], args: argparse.Namespace, out: TextIO) -> dict[tuple[str, int], int]:
    earliest = list_offsets(client, tps, EARLIEST)
    latest = list_offsets(client, tps, LATEST)
    missing = [tp for tp in tps if tp not in latest]
    if missing:
        t, p = missing[0]
        raise GroupCommandError(f"Executing consumer group command failed due to {java_exception(3)} ({t}-{p})")

    def clamp(tp: tuple[str, int], offset: int) -> int:
        lo, hi = earliest[tp], latest[tp]
        if offset < lo:
            out.write(f"New offset ({offset}) is lower than earliest offset for topic partition {tp[0]}-{tp[1]}. Value will be set to {lo}\n")
            return lo
        if offset > hi:
            out.write(f"New offset ({offset}) is higher than latest offset for topic partition {tp[0]}-{tp[1]}. Value will be set to {hi}\n")
            return hi
        return offset

    if args.to_earliest:
        return {tp: earliest[tp] for tp in tps}
    if args.to_latest:
        return {tp: latest[tp] for tp in tps}
    if args.to_offset is not None:
        return {tp: clamp(tp, args.to_offset) for tp in tps}
    if args.to_current or args.shift_by is not None:
        current = committed_offsets(client, group)
        shift = args.shift_by or 0
        return {tp: clamp(tp, current.get(tp, latest[tp]) + shift) for tp in tps}
    if args.to_datetime is not None:
        ts = _parse_datetime(args.to_datetime)
        found = list_offsets(client, tps, ts)
        return {tp: found.get(tp, latest[tp]) if found.get(tp, -1) >= 0 else latest[tp] for tp in tps}
    raise GroupCommandError("Option '[reset-offsets]' requires one of the following scenarios: "
                            "[to-offset], [to-datetime], [to-earliest], [to-latest], [to-current], [shift-by]")


def _reset(client: KafkaClient, args: argparse.Namespace, out: TextIO) -> int:
    if not args.group:
        raise GroupCommandError("Option [reset-offsets] takes one of these options: [all-groups], [group]")
    plans: dict[str, dict[tuple[str, int], int]] = {}
    status = 0
    for group in args.group:
        g = describe_group(client, group)
        state = g.state if g is not None else "Dead"
        if state not in RESETTABLE_STATES:
            out.write(f"\nError: Assignments can only be reset if the group '{group}' is inactive, but the current state is {state}.\n")
            plans[group] = {}
            status = 1
            continue
        tps = _partitions_to_reset(client, group, args)
        plan = _new_offsets(client, group, tps, args, out)
        if args.execute:
            code = commit_offsets(client, group, plan)
            if code:
                raise GroupCommandError(f"Executing consumer group command failed due to {java_exception(code)}")
        plans[group] = plan
    if any(plans.values()) or plans:
        fmt = "\n{:<30} {:<30} {:<10} {:<15}"
        out.write(fmt.format("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"))
        for group, plan in plans.items():
            for (t, p), off in sorted(plan.items()):
                out.write(fmt.format(group, t, str(p), str(off)))
        out.write("\n")
    return status


def _list(client: KafkaClient, args: argparse.Namespace, out: TextIO) -> int:
    if args.type == "share":
        return share_groups.list_(client, args, out)
    if args.type == "streams":
        return streams_groups.list_(client, args, out)
    # In the broker's order, as Kafka's tool prints them; consumer-protocol groups only.
    groups = [(g, s) for g, s, _, protocol in list_groups(client, CONSUMER_TYPES) if protocol in ("consumer", "")]
    if args.state:
        width = max([15, *(len(g) for g, _ in groups)]) + 10
        out.write(f"{'GROUP':<{width}} {'STATE':<20}\n")
        for g, s in groups:
            out.write(f"{g:<{width}} {s:<20}\n")
    else:
        for g, _ in groups:
            out.write(g + "\n")
    return 0


def main(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    client = KafkaClient(args.bootstrap_server, client_id="kafka-sidecar-groups", command_config=command_config(args))
    try:
        if args.list:
            return _list(client, args, out)
        if args.describe:
            return _describe(client, args, out, err)
        return _reset(client, args, out)
    except GroupCommandError as e:
        out.write(f"\nError: {e}\n")
        out.flush()
        return 1
    finally:
        client.close()
