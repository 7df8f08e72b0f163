"""Topic: partitions (offsets, segments, size, leader epoch), configs with their source, the
message browser, and with ``--console-allow-writes`` the produce and delete-records forms."""

from __future__ import annotations

import datetime

from ..http import HttpResponse
from ..metrics import error_name
from . import cluster, records, writes
from .context import Context
from .html import Html, esc, fmt_bytes, fmt_count, fmt_time_ms, join, link, notice, table, tag, url
from .html import facts as html_facts

MODES = ("newest", "offset", "timestamp")


def parse_timestamp(text: str | None) -> int | None:
    """Milliseconds since the epoch, or an ISO date and time (UTC unless it names a zone)."""
    if text is None or not text.strip():
        return None
    t = text.strip()
    if t.lstrip("-").isdigit():
        return records.parse_int(t, "timestamp", low=-1, high=2**63 - 1)
    try:
        dt = datetime.datetime.fromisoformat(t.replace("Z", "+00:00"))
    except ValueError:
        raise records.BrowseError(f"timestamp {t[:40]!r} is neither milliseconds since the epoch nor a date and time like 2026-11-29T08:00:00") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=datetime.UTC)
    return int(dt.timestamp() * 1000)


async def render(ctx: Context, *, error: str | None = None, form: dict[str, str] | None = None, status: int = 200) -> HttpResponse:
    b, s, q = ctx.broker, ctx.session, ctx.request.query
    name = (form or {}).get("name") or q.get("name", "")
    found, failed = await cluster.topics(b, s, [name]) if name else ([], [(name, 3)])
    if not found:
        code = failed[0][1] if failed else 3
        why = ("is not a topic this principal may describe" if code == 29 else "does not exist") if name else "is not given"
        return ctx.html("Unknown topic", [notice(f"topic {name!r} {why} (Metadata answered {error_name(code)})")], status=404)
    topic = found[0]
    # Sizes from the logs: the number DescribeLogDirs reports (Log.size_in_bytes), without its statvfs.
    await cluster.fill_offsets_and_sizes(b, s, [topic], None)
    configs = (await cluster.describe_configs(b, s, [topic.name])).get(topic.name)
    body: list[object] = []
    if error:
        body.append(notice(error))
    done = _done_notice(q)
    if done:
        body.append(notice(done, "ok"))
    policy = ""
    if configs and not configs["error_code"]:
        policy = next((c["value"] for c in configs["configs"] if c["name"] == "cleanup.policy"), "")
    body.append(html_facts([("topic id", topic.topic_id), ("partitions", len(topic.partitions)), ("internal", "yes" if topic.internal else "no"),
                            ("records", fmt_count(topic.records)), ("size on disk", fmt_bytes(topic.size)), ("cleanup.policy", policy or "-")]))
    body.append(Html("<h2>Partitions</h2>"))
    body.append(table(["Partition", "Leader", "Leader epoch", "Replicas", "ISR", "Log start offset", "Log end offset", "Records", "Segments", "Size"],
                      [[p.index, p.leader, p.leader_epoch, ",".join(map(str, p.replicas)), ",".join(map(str, p.isr)),
                        p.start_offset, p.end_offset, fmt_count(p.records), fmt_count(p.segments), fmt_bytes(p.size)]
                       for p in topic.partitions], numeric={0, 1, 2, 5, 6, 7, 8, 9}, cls="partitions"))
    body.append(Html("<h2>Messages</h2>"))
    body += await _browser(ctx, topic)
    if ctx.allow_writes:
        body += _write_forms(ctx, topic, form or {})
    body.append(Html("<h2>Configs</h2>"))
    if configs is None or configs["error_code"]:
        body.append(notice(f"DescribeConfigs: {configs['error_message'] if configs else 'no answer'}"))
    else:
        rows = sorted(configs["configs"], key=lambda c: (c["config_source"] == 5, c["name"]))
        body.append(table(["Name", "Value", "Source"],
                          [[c["name"], "(sensitive)" if c["is_sensitive"] else ("null" if c["value"] is None else c["value"]),
                            cluster.CONFIG_SOURCES.get(c["config_source"], c["config_source"])] for c in rows], cls="configs"))
    return ctx.html(f"Topic {topic.name}", body, status=status)


def _done_notice(q: dict[str, str]) -> str:
    try:
        if q.get("done") == "produced":
            return f"Produced a record to partition {int(q['p'])} at offset {int(q['at'])}."
        if q.get("done") == "deleted":
            return f"Deleted the records of partition {int(q['p'])} before offset {int(q['at'])}: the log now starts there."
    except (KeyError, ValueError):
        pass
    return ""


async def _browser(ctx: Context, topic: cluster.TopicInfo) -> list[object]:
    q = ctx.request.query
    out: list[object] = []
    parts = [p.index for p in topic.partitions]
    try:
        partition = records.parse_int(q.get("p"), "partition", low=0, high=2**31 - 1)
        partition = parts[0] if partition is None and parts else partition
        if partition not in parts:
            raise records.BrowseError(f"topic {topic.name} has no partition {partition} (it has {len(parts)})")
        mode = q.get("mode", "newest")
        if mode not in MODES:
            raise records.BrowseError(f"mode must be one of {', '.join(MODES)}")
        limit = records.parse_int(q.get("limit"), "limit", low=1, high=records.MAX_LIMIT) or records.DEFAULT_LIMIT
        offset = records.parse_int(q.get("offset"), "offset", low=0, high=2**63 - 1)
        before = records.parse_int(q.get("before"), "offset", low=0, high=2**63 - 1)
        ts = parse_timestamp(q.get("ts")) if mode == "timestamp" else None
    except records.BrowseError as e:
        partition, mode, limit, offset, ts, before = (parts[0] if parts else 0), "newest", records.DEFAULT_LIMIT, None, None, None
        out.append(notice(e))
        if not parts:
            return out
    out.append(_browse_form(topic, partition, mode, q, limit))
    try:
        page = await records.browse(ctx.broker, ctx.session, topic.name, partition, mode=mode, offset=offset, before=before,
                                    timestamp=ts, limit=limit)
    except records.BrowseError as e:
        out.append(notice(e))
        return out
    if page.note:
        out.append(notice(page.note, "ok"))
    shown = f"offsets {page.first} to {page.last}" if page.last >= page.first >= 0 else "no offsets"
    out.append(Html(f'<p class=muted>Partition {page.partition}: log start {page.log_start}, high watermark {page.high_watermark}; '
                    f'{"newest first" if page.mode == "newest" else "oldest first"}, {esc(shown)}.</p>'))
    out.append(_pager(topic.name, page, limit))
    out.append(table(["Offset", "Timestamp", "Key", "Value", "Headers"],
                     [[r.offset, fmt_time_ms(r.timestamp), _cell(r.key), _cell(r.value), _headers(r.headers)] for r in page.records],
                     numeric={0}, cls="records", empty="no records in this window"))
    out.append(_pager(topic.name, page, limit))
    return out


def _browse_form(topic: cluster.TopicInfo, partition: int, mode: str, q: dict[str, str], limit: int) -> Html:
    opts = join(tag("option", f"partition {p.index}", value=p.index, selected=p.index == partition) for p in topic.partitions)
    modes = join(tag("option", text, value=m, selected=m == mode) for m, text in
                 (("newest", "newest first"), ("offset", "from offset"), ("timestamp", "from timestamp")))
    return Html(
        '<form class="inline" method="get" action="/topic">'
        f'<input type="hidden" name="name" value="{esc(topic.name)}">'
        f'<label>Partition<select name="p">{opts}</select></label>'
        f'<label>Show<select name="mode">{modes}</select></label>'
        f'<label>Offset<input name="offset" inputmode="numeric" size="10" value="{esc(q.get("offset", ""))}"></label>'
        f'<label>Timestamp (ms or UTC date-time)<input name="ts" size="22" placeholder="2026-11-29T08:00:00" value="{esc(q.get("ts", ""))}"></label>'
        f'<label>Records<input name="limit" inputmode="numeric" size="4" value="{esc(limit)}"></label>'
        '<button type="submit">Show</button></form>')


def _pager(name: str, page: records.BrowsePage, limit: int) -> Html:
    links = []
    if page.mode == "newest":
        if page.newer is not None:
            links.append(link(url("/topic", name=name, p=page.partition, mode="newest", limit=limit,
                                  before=min(page.high_watermark, page.last + 1 + limit)), "← newer"))
        if page.older is not None:
            links.append(link(url("/topic", name=name, p=page.partition, mode="newest", limit=limit, before=page.older), "older →"))
    else:
        if page.first > page.log_start:
            links.append(link(url("/topic", name=name, p=page.partition, mode="newest", limit=limit, before=page.first), "← older"))
        if page.newer is not None:
            links.append(link(url("/topic", name=name, p=page.partition, mode="offset", limit=limit, offset=page.newer), "newer →"))
    links.append(link(url("/topic", name=name, p=page.partition), "latest"))
    return Html('<p class="pager">' + "".join(links) + "</p>")


def _cell(data: bytes | None) -> Html:
    shown = records.show_bytes(data)
    if shown.kind == "null":
        return Html('<span class="muted">null</span>')
    more = f" · {shown.size:,} bytes, first shown" if shown.truncated else ""
    return Html(f'<span class="enc">{esc(shown.kind)}{esc(more)}</span><pre>{esc(shown.text)}</pre>')


def _headers(headers: list[tuple[str, bytes | None]]) -> Html:
    if not headers:
        return Html('<span class="muted">none</span>')
    parts = []
    for k, v in headers:
        shown = records.show_bytes(v, 1024)
        value = "null" if shown.kind == "null" else shown.text
        parts.append(f'<span class="hdr"><b>{esc(k)}</b>: {esc(value)}{" <span class=enc>hex</span>" if shown.kind == "hex" else ""}</span>')
    return Html("".join(parts))


def _write_forms(ctx: Context, topic: cluster.TopicInfo, form: dict[str, str]) -> list[object]:
    def opts(selected: str) -> Html:
        return join(tag("option", f"partition {p.index}", value=p.index, selected=str(p.index) == selected) for p in topic.partitions)

    def enc(field: str) -> Html:
        current = form.get(field, "text")
        return join(tag("option", t, value=v, selected=v == current) for v, t in (("text", "UTF-8 text"), ("hex", "hex")))

    p_sel = form.get("p") or ctx.request.query.get("p", "0")
    hidden = Html(f'<input type="hidden" name="name" value="{esc(topic.name)}">') + ctx.token_field()
    produce = Html(
        '<h2>Produce a record</h2><form class="inline" method="post" action="/topic/produce" id="produce">'
        f'{hidden}<label>Partition<select name="p">{opts(p_sel)}</select></label>'
        f'<label>Key (empty: null)<textarea name="key">{esc(form.get("key", ""))}</textarea></label>'
        f'<label>Key as<select name="key_enc">{enc("key_enc")}</select></label>'
        f'<label>Value (empty: null)<textarea name="value">{esc(form.get("value", ""))}</textarea></label>'
        f'<label>Value as<select name="value_enc">{enc("value_enc")}</select></label>'
        f'<label>Headers (name: value, one a line)<textarea name="headers">{esc(form.get("headers", ""))}</textarea></label>'
        '<button type="submit">Produce</button></form>')
    delete = Html(
        '<h2>Delete records</h2><form class="inline" method="post" action="/topic/delete-records" id="delete-records">'
        f'{hidden}<label>Partition<select name="p">{opts(p_sel)}</select></label>'
        f'<label>Delete every record before offset<input name="offset" inputmode="numeric" size="12" value="{esc(form.get("offset", ""))}"></label>'
        '<button type="submit">Delete records</button></form>')
    return [produce, delete]


async def post(ctx: Context, action: str) -> HttpResponse:
    """The produce and delete-records forms; on success back to the topic page (303)."""
    try:
        form = ctx.request.form_strict()
    except UnicodeDecodeError:
        lenient = ctx.request.form()
        return await render(ctx, error="the form is not valid UTF-8 text (choose hex to send other bytes): nothing was written",
                            form={"name": lenient.get("name", "")}, status=400)
    name = form.get("name", "")
    if not ctx.allow_writes:
        return ctx.html("Writes are off", [notice("this console is read-only: start the broker with --console-allow-writes to produce or delete records")], status=403)
    if form.get("token") != ctx.token:
        return ctx.html("Refused", [notice("the form is stale or from another site (no valid token): reload the topic page and try again")], status=403)
    found, failed = await cluster.topics(ctx.broker, ctx.session, [name])
    if not found:
        code = failed[0][1] if failed else 3
        return ctx.html("Unknown topic", [notice(f"topic {name!r}: {error_name(code)}; nothing was written")], status=404)
    parts = [p.index for p in found[0].partitions]
    try:
        partition = records.parse_int(form.get("p"), "partition", low=0, high=2**31 - 1)
        if partition not in parts:
            raise writes.WriteError(f"topic {name} has no partition {partition}; nothing was written")
        if action == "produce":
            key = writes.field_bytes(form.get("key", ""), form.get("key_enc", "text"), "key")
            value = writes.field_bytes(form.get("value", ""), form.get("value_enc", "text"), "value")
            headers = writes.parse_headers(form.get("headers", ""))
            at = await writes.produce(ctx.broker, ctx.session, name, partition, key, value, headers)
            done = "produced"
        else:
            offset = records.parse_int(form.get("offset"), "offset", low=-1, high=2**63 - 1)
            if offset is None:
                raise writes.WriteError("give the offset to delete records before; nothing was deleted")
            at = await writes.delete_records(ctx.broker, ctx.session, name, partition, offset)
            done = "deleted"
    except (writes.WriteError, records.BrowseError) as e:
        return await render(ctx, error=str(e), form=form, status=400)
    return HttpResponse(303, headers=[("Location", url("/topic", name=name, p=partition, done=done, at=at))])
