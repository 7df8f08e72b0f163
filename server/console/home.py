"""Home: the broker, its topics and its groups (each linking to its page)."""

from __future__ import annotations

import functools
import time

from ..http import HttpResponse
from . import cluster, groups
from .context import Context
from .html import Html, fmt_bytes, fmt_count, fmt_duration, link, notice, table, tag, url
from .html import facts as html_facts


@functools.cache
def version() -> str:
    """The installed distribution's version (as ``kafka-sidecar --version`` prints it)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("kafka-sidecar")
    except PackageNotFoundError:
        return "0+unknown"


async def render(ctx: Context) -> HttpResponse:
    b, s = ctx.broker, ctx.session
    dirs = await cluster.log_dirs(b, s)
    topic_list, _ = await cluster.topics(b, s)
    await cluster.fill_offsets_and_sizes(b, s, topic_list, dirs)
    for t in topic_list:  # the value in force, as DescribeConfigs reports it (the topic page asks it)
        lg = b.replica_manager.get_log(t.name, t.partitions[0].index) if t.partitions else None
        t.cleanup_policy = lg.config.cleanup_policy if lg is not None else ""
    listed = await groups.list_groups(b, s)
    described = await groups.describe(b, s, listed)

    started = getattr(b, "started_at", None) or ctx.started_at
    facts = [("cluster id", b.cluster_id), ("node id", b.node_id), ("version", f"kafka-sidecar {version()}"),
             ("listeners", b.listeners_value()), ("uptime", fmt_duration(time.time() - started))]
    if dirs is not None:
        facts += [("data dir", dirs["log_dir"]),
                  ("free space", f"{fmt_bytes(dirs['usable_bytes'])} of {fmt_bytes(dirs['total_bytes'])}")]
    else:
        facts.append(("data dir", "(not shown: DescribeLogDirs needs DESCRIBE on the cluster)"))
    body = [Html("<h2>Broker</h2>"), html_facts(facts)]

    body.append(Html(f"<h2>Topics <span class=muted>({len(topic_list)})</span></h2>"))
    rows = [[link(url("/topic", name=t.name), t.name), Html(tag("span", "internal", class_="tag")) if t.internal else "",
             len(t.partitions), fmt_count(t.records), fmt_bytes(t.size), t.cleanup_policy or "-"] for t in topic_list]
    body.append(table(["Topic", "", "Partitions", "Records", "Size on disk", "cleanup.policy"], rows, numeric={2, 3, 4},
                      cls="topics", empty="no topics (or none this principal may describe)"))

    body.append(Html(f"<h2>Groups <span class=muted>({len(described)})</span></h2>"))
    grows = [[link(url("/group", id=g.group_id), g.group_id), g.type, g.state or "-",
              len(g.members) if g.error is None else "-", fmt_count(g.total_lag),
              notice(g.error) if g.error else ""] for g in described]
    body.append(table(["Group", "Type", "State", "Members", "Total lag", ""], grows, numeric={3, 4}, cls="groups",
                      empty="no groups (or none this principal may describe)"))
    return ctx.html("Home", body, active="/")

