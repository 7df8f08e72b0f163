"""``kafka-sidecar groups``: kafka-consumer-groups.sh's list, describe (with lag) and reset.

Same options and output as Kafka 4's tool for what they share::

    kafka-sidecar groups --bootstrap-server HOST:PORT --list [--state]
    kafka-sidecar groups --bootstrap-server HOST:PORT --describe (--group G ... | --all-groups) [--members | --state]
    kafka-sidecar groups --bootstrap-server HOST:PORT --reset-offsets --group G
                         (--topic T[:P,P...] ... | --all-topics)
                         (--to-earliest | --to-latest | --to-offset N | --to-current | --shift-by N | --to-datetime ISO)
                         [--execute | --dry-run]

Describe prints one row per partition: committed offset, log end offset, lag, and the member it
is assigned to (decoded from the consumer protocol assignment) or ``-``. Reset only touches
inactive groups (Empty or unknown), like Kafka; without ``--execute`` it is a dry run that
prints the plan. Only the Kafka protocol is used (FindCoordinator, ListGroups, DescribeGroups,
OffsetFetch, OffsetCommit, ListOffsets, Metadata), so the tool works against any Kafka broker.
Errors print Kafka's ``Error: ...`` line; the exit status is 1 then (Kafka's tool exits 0).
"""

from __future__ import annotations

import argparse
import datetime
import struct
import sys
from typing import Any, TextIO

from kafka_sidecar.client import KafkaClient
from kafka_sidecar.server.tools.command_config import command_config

from .admin import (
    DESCRIBE_GROUPS,
    EARLIEST,
    LATEST,
    LIST_GROUPS,
    OFFSET_FETCH,
    commit_offsets,
    coordinator,
    coordinator_address,
    java_exception,
    list_offsets,
    request,
    retrying,
)

MISSING = "-"
RESETTABLE_STATES = {"Empty", "Dead"}
REBALANCING_STATES = {"PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"}


class GroupCommandError(Exception):
    pass


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


def decode_assignment(data: bytes | None) -> list[tuple[str, int]]:
    """ConsumerProtocolAssignment (any version): the assigned (topic, partition)s."""
    if not data or len(data) < 6:
        return []
    out: list[tuple[str, int]] = []
    try:
        pos = 2  # version
        (n_topics,) = struct.unpack_from(">i", data, pos)
        pos += 4
        for _ in range(max(0, n_topics)):
            (ln,) = struct.unpack_from(">h", data, pos)
            pos += 2
            topic = data[pos:pos + ln].decode()
            pos += ln
            (n_parts,) = struct.unpack_from(">i", data, pos)
            pos += 4
            for _ in range(max(0, n_parts)):
                (p,) = struct.unpack_from(">i", data, pos)
                pos += 4
                out.append((topic, p))
    except (struct.error, UnicodeDecodeError):
        return out
    return out


def describe_group(client: KafkaClient, group: str) -> Any:
    body = retrying(
        lambda: request(coordinator(client, group), DESCRIBE_GROUPS, 5, {"groups": [group], "include_authorized_operations": False}),
        lambda b: b.groups[0].error_code.value,
    )
    (g,) = body.groups
    code = g.error_code.value
    if code == 69 or (not code and g.group_state == "Dead"):
        return None
    if code:
        raise GroupCommandError(f"Executing consumer group command failed due to {java_exception(code)}")
    return g


def committed_offsets(client: KafkaClient, group: str) -> dict[tuple[str, int], int]:
    body = retrying(
        lambda: request(coordinator(client, group), OFFSET_FETCH, 8, {
            "groups": [{"group_id": group, "topics": None}], "require_stable": False,
        }),
        lambda b: b.groups[0].error_code.value,
    )
    (g,) = body.groups
    if g.error_code.value:
        raise GroupCommandError(f"Executing consumer group command failed due to {java_exception(g.error_code.value)}")
    return {(t.name, p.partition_index): p.committed_offset for t in g.topics for p in t.partitions
            if not p.error_code.value and p.committed_offset >= 0}


def list_groups(client: KafkaClient) -> list[tuple[str, str]]:
    body = request(client.bootstrap, LIST_GROUPS, 4, {"states_filter": []})
    if body.error_code.value:
        raise GroupCommandError(f"Executing consumer group command failed due to {java_exception(body.error_code.value)}")
    return [(g.group_id, g.group_state) for g in body.groups if g.protocol_type in ("consumer", "")]


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


def _offset_rows(client: KafkaClient, group: str, g: Any) -> list[list[str]]:
    committed = committed_offsets(client, group)
    members = [(m, sorted(decode_assignment(m.member_assignment))) for m in g.members]
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
        return [group, tp[0], str(tp[1]), MISSING if off is None else str(off), MISSING if end is None else str(end),
                lag, member, host, client_id]

    for m, a in members:
        rows += [row(tp, m.member_id, m.client_host, m.client_id) for tp in a]
    rows += [row(tp, MISSING, MISSING, MISSING) for tp in unassigned]
    return rows


def _print_offsets(rows: list[list[str]], out: TextIO) -> None:
    wg = max([15, *(len(r[0]) for r in rows)])
    wt = max([15, *(len(r[1]) for r in rows)])
    wc = max([15, *(len(r[6]) for r in rows)])
    wh = max([15, *(len(r[7]) for r in rows)])

    def fmt(r: list[str]) -> str:
        return (f"\n{r[0]:<{wg}} {r[1]:<{wt}} {r[2]:<10} {r[3]:<15} {r[4]:<15} {r[5]:<15} "
                f"{r[6]:<{wc}} {r[7]:<{wh}} {r[8]}")

    out.write(fmt(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]))
    for r in rows:
        out.write(fmt(r))
    out.write("\n")


def _print_members(group: str, g: Any, out: TextIO) -> None:
    members = [(m, decode_assignment(m.member_assignment)) for m in g.members]
    wg = max([15, len(group)])
    wc = max([15, *(len(m.member_id) for m, _ in members)])
    wh = max([15, *(len(m.client_host) for m, _ in members)])
    wi = max([15, *(len(m.client_id) for m, _ in members)])
    out.write(f"\n{'GROUP':<{wg}} {'CONSUMER-ID':<{wc}} {'HOST':<{wh}} {'CLIENT-ID':<{wi}} {'#PARTITIONS':<15} \n")
    for m, a in members:
        out.write(f"{group:<{wg}} {m.member_id:<{wc}} {m.client_host:<{wh}} {m.client_id:<{wi}} {len(a):<15} \n")


def _print_state(client: KafkaClient, group: str, g: Any, out: TextIO) -> None:
    node, host, port = coordinator_address(client, group)
    coord = f"{host}:{port}  ({node})"
    wc = max(25, len(coord))
    wg = max(15, len(group))
    strategy = g.protocol_data or MISSING
    fmt = f"\n{{:<{wg}}} {{:<{wc}}} {{:<20}} {{:<20}} {{}}"
    out.write(fmt.format("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"))
    out.write(fmt.format(group, coord, strategy, g.group_state, len(g.members)))
    out.write("\n")


def _describe(client: KafkaClient, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    groups = sorted(g for g, _ in list_groups(client)) if args.all_groups else list(args.group)
    if not groups:
        raise GroupCommandError("Option [describe] takes one of these options: [all-groups], [group]")
    for group in sorted(groups):
        g = describe_group(client, group)
        if g is None:
            out.write(f"\nError: Executing consumer group command failed due to "
                      f"org.apache.kafka.common.errors.GroupIdNotFoundException: Group {group} not found.\n")
            return 1
        if args.members:
            if _state_note(group, g.group_state, err, out):
                _print_members(group, g, out)
        elif args.state:
            if _state_note(group, g.group_state, err, out):
                _print_state(client, group, g, out)
        else:
            rows = _offset_rows(client, group, g)
            if _state_note(group, g.group_state, err, out) and rows:
                _print_offsets(rows, out)
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
        state = g.group_state if g is not None else "Dead"
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
    groups = list_groups(client)  # in the broker's order, as Kafka's tool prints them
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
