"""Group: members and their assignments, and per partition the committed offset, the end offset
and the lag (``kafka-consumer-groups.sh --describe``); for share groups the share-partition
start offset and lag (``kafka-share-groups.sh --describe``) and the in-flight state of each
share-partition: records acquired, available again, acknowledged or archived, and their
delivery counts."""

from __future__ import annotations

from ..http import HttpResponse
from ..security.acls import AclOperation, ResourceType
from ..share.partition import RecordState
from . import groups
from .context import Context
from .html import Html, facts, fmt_count, link, notice, table, url


async def render(ctx: Context) -> HttpResponse:
    b, s = ctx.broker, ctx.session
    group_id = ctx.request.query.get("id", "")
    listed = [g for g in await groups.list_groups(b, s) if g["group_id"] == group_id]
    if not listed:
        return ctx.html("Unknown group", [notice(f"group {group_id!r} does not exist, or this principal may not describe it (ListGroups does not list it)")],
                        status=404)
    group = (await groups.describe(b, s, listed))[0]
    body: list[object] = []
    if group.error:
        body.append(notice(group.error))
    body.append(facts([("type", group.type), ("state", group.state or "-"), ("members", len(group.members)),
                       ("total lag", fmt_count(group.total_lag)), *[(k, "-" if v in (None, "") else v) for k, v in group.facts]]))
    body.append(Html("<h2>Members</h2>"))
    body.append(table(["Member id", "Client id", "Host", "Instance id", "Epoch", "Assignment"],
                      [[m.member_id, m.client_id, m.host, m.instance_id or "-", "-" if m.epoch is None else m.epoch,
                        "; ".join(f"{t}: {','.join(map(str, ps))}" for t, ps in sorted(m.assignment.items())) or "-"]
                       for m in group.members], cls="members", empty="no members"))
    share = group.type == "share"
    body.append(Html("<h2>Offsets and lag</h2>"))
    body.append(table(["Topic", "Partition", "Start offset" if share else "Committed offset", "Log end offset", "Lag", "Member", "Host", "Client id"],
                      [[link(url("/topic", name=r.topic, p=r.partition), r.topic), r.partition,
                        "-" if r.committed is None else r.committed, "-" if r.end is None else r.end,
                        "-" if r.lag is None else r.lag, r.member.member_id if r.member else "-",
                        r.member.host if r.member else "-", r.member.client_id if r.member else "-"] for r in group.offsets],
                      numeric={1, 2, 3, 4}, cls="offsets", empty="no committed offsets or assigned partitions"))
    if share and group.error is None:
        body.append(Html("<h2>Share-partitions in flight</h2>"))
        body.append(_share_state(ctx, group_id))
    return ctx.html(f"Group {group_id}", body)


def _share_state(ctx: Context, group_id: str) -> Html:
    """The share coordinator's in-memory state of the group's share-partitions (no API has it)."""
    b = ctx.broker
    by_id = b.metadata.topics_by_id
    keys = sorted((by_id[k[1]].name, k[2], k) for k in list(b.share_coordinator.share_partitions) if k[0] == group_id and k[1] in by_id)
    az = b.authorizer
    allowed = az.filter(ctx.session, None, AclOperation.DESCRIBE, ResourceType.TOPIC, {t for t, _, _ in keys}, log_denied=False) \
        if az.enabled else {t for t, _, _ in keys}
    rows = []
    for topic, partition, key in keys:
        sp = b.share_coordinator.share_partitions.get(key)
        if sp is None or topic not in allowed:
            continue
        states, deliveries = sp.counts()
        rows.append([topic, partition, sp.start_offset if sp.initialized else "-", sp.next_fetch_offset_new if sp.initialized else "-",
                     sp.in_flight_count() if sp.initialized else 0, states[RecordState.ACQUIRED], states[RecordState.AVAILABLE],
                     states[RecordState.ACKNOWLEDGED], states[RecordState.ARCHIVED],
                     ", ".join(f"{n}×{c}" for c, n in sorted(((c, n) for c, n in deliveries.items()))) or "-"])
    return table(["Topic", "Partition", "Start offset", "Next new offset", "In flight", "Acquired", "Available", "Acknowledged",
                  "Archived", "Delivery counts (records × count)"], rows, numeric=set(range(1, 9)), cls="share-state",
                 empty="no share-partition state yet")
