"""``kafka-sidecar groups`` for share groups (KIP-932): kafka-share-groups.sh's --list and
--describe (offsets with --verbose leader epochs, --members, --state), same output.

Offsets are DescribeShareGroupOffsets' start offsets and lags (``-`` where the group has none
yet), from the group coordinator; members and state come from ShareGroupDescribe.
"""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from kafka_sidecar.client import KafkaClient

from .admin import coordinator, coordinator_address, java_exception, retrying
from .group_describe import (
    GroupCommandError,
    GroupDescription,
    assignment_string,
    describe_share,
    print_list,
)

DESCRIBE_SHARE_GROUP_OFFSETS = 90
MISSING = "-"


def list_(client: KafkaClient, args: argparse.Namespace, out: TextIO) -> int:
    print_list(client, "share", args.state, out)
    return 0


def _state_note(group: str, state: str, err: TextIO, out: TextIO, rows: int) -> bool:
    """ShareGroupService.maybePrintEmptyGroupState: True when the detail is to be printed."""
    if state == "Dead":
        out.write(f"\nError: Share group '{group}' does not exist.\n")
    elif state == "Empty":
        err.write(f"\nShare group '{group}' has no active members.\n")
    return state != "Dead" and rows > 0


def start_offsets(client: KafkaClient, group: str) -> list[tuple[str, int, int, int, int]]:
    """(topic, partition, start offset, leader epoch, lag) per partition the group has state for."""
    def ask() -> Any:
        _, body = coordinator(client, group).request(
            DESCRIBE_SHARE_GROUP_OFFSETS, {"groups": [{"group_id": group, "topics": None}]}, max_version=1)
        return body

    body = retrying(ask, lambda b: b.groups[0].error_code.value)
    (g,) = body.groups
    if g.error_code.value:
        raise GroupCommandError(f"Executing share group command failed due to {java_exception(g.error_code.value, g.error_message)}")
    return sorted((t.topic_name, p.partition_index, p.start_offset, p.leader_epoch, getattr(p, "lag", -1))
                  for t in g.topics for p in t.partitions if not p.error_code.value)


def _print_offsets(group: str, rows: list[tuple[str, int, int, int, int]], out: TextIO, verbose: bool) -> None:
    wg = max(15, len(group))
    wt = max([15, *(len(r[0]) for r in rows)])

    def num(v: int) -> str:
        return MISSING if v < 0 else str(v)

    def line(cols: list[str]) -> str:
        if verbose:
            return f"\n{cols[0]:<{wg}} {cols[1]:<{wt}} {cols[2]:<10} {cols[3]:<13} {cols[4]:<13} {cols[5]}"
        return f"\n{cols[0]:<{wg}} {cols[1]:<{wt}} {cols[2]:<10} {cols[4]:<13} {cols[5]}"

    out.write(line(["GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH", "START-OFFSET", "LAG"]))
    for topic, partition, start, epoch, lag in rows:
        out.write(line([group, topic, str(partition), num(epoch), num(start), num(lag)]))
    out.write("\n")


def _print_members(group: str, g: GroupDescription, out: TextIO, verbose: bool) -> None:
    members = sorted(g.members, key=lambda m: m.member_id)
    wg = max(15, len(group))
    wc = max([15, *(len(m.member_id) for m in members)])
    wh = max([15, *(len(m.host) for m in members)])
    wl = max([15, *(len(m.client_id) for m in members)])

    def line(cols: list[str]) -> str:
        base = f"\n{cols[0]:<{wg}} {cols[1]:<{wc}} {cols[2]:<{wh}} {cols[3]:<{wl}} {cols[4]:<12} "
        return base + (f"{cols[5]:<13} {cols[6]}" if verbose else cols[6])

    out.write(line(["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "MEMBER-EPOCH", "ASSIGNMENT"]))
    for m in members:
        out.write(line([group, m.member_id, m.host, m.client_id, str(len(m.assignment)), str(m.member_epoch),
                        assignment_string(m.assignment) if m.assignment else ""]))
    out.write("\n")


def _print_state(client: KafkaClient, group: str, g: GroupDescription, out: TextIO, verbose: bool) -> None:
    node, host, port = coordinator_address(client, group)
    coord = f"{host}:{port}  ({node})"
    wg, wc = max(15, len(group)), max(25, len(coord))
    if verbose:
        fmt = f"\n{{:<{wg}}} {{:<{wc}}} {{:<15}} {{:<12}} {{:<17}} {{}}"
        out.write(fmt.format("GROUP", "COORDINATOR (ID)", "STATE", "GROUP-EPOCH", "ASSIGNMENT-EPOCH", "#MEMBERS"))
        out.write(fmt.format(group, coord, g.state, g.group_epoch, g.assignment_epoch, len(g.members)))
    else:
        fmt = f"\n{{:<{wg}}} {{:<{wc}}} {{:<15}} {{}}"
        out.write(fmt.format("GROUP", "COORDINATOR (ID)", "STATE", "#MEMBERS"))
        out.write(fmt.format(group, coord, g.state, len(g.members)))
    out.write("\n")


def describe(client: KafkaClient, group: str, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """One share group as kafka-share-groups.sh --describe prints it."""
    g = describe_share(client, group)
    if args.members:
        if _state_note(group, g.state, err, out, len(g.members)):
            _print_members(group, g, out, args.verbose)
    elif args.state:
        _state_note(group, g.state, err, out, 1)
        _print_state(client, group, g, out, args.verbose)
    else:
        rows = start_offsets(client, group)
        if rows:
            _print_offsets(group, rows, out, args.verbose)
        else:
            out.write(f"\nShare group '{group}' has no offset information.\n")
    return 0
