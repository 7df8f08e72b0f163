"""Activity: produce and fetch rates, request latencies and connections over the last minutes,
as inline SVG charts of the sampler's history (server/console/sampler.py). The page refreshes
itself every ``REFRESH_S`` seconds (a meta refresh: no script)."""

from __future__ import annotations

from ..http import HttpResponse
from .charts import line_chart
from .context import Context
from .html import Html, esc, fmt_count
from .sampler import take_sample

REFRESH_S = 10


async def render(ctx: Context) -> HttpResponse:
    sampler = ctx.sampler
    now = take_sample(ctx.broker)
    series = sampler.series(now)
    oldest = sampler.samples[0].at if sampler.samples else now.at
    span = max(60.0, min(sampler.interval_s * sampler.samples.maxlen, now.at - oldest))
    charts = [
        ("Records per second", series["records"], "/s"),
        ("Bytes per second", series["bytes"], "B/s"),
        ("Mean request latency", series["latency"], " ms"),
        ("Open connections", series["connections"], ""),
    ]
    figures = "".join(
        f"<figure><figcaption>{esc(title)}</figcaption>{line_chart(data, span_s=span, unit=unit, label=title)}</figure>"
        for title, data, unit in charts)
    apis = sorted(now.requests.items(), key=lambda kv: -kv[1][0])[:12]
    totals = "".join(f"<tr><td>{esc(api)}</td><td class=num>{fmt_count(n)}</td><td class=num>{(s / n * 1000 if n else 0):.2f}</td></tr>"
                     for api, (n, s) in apis)
    body = [
        Html(f'<p class="muted">Sampled every {sampler.interval_s:g} s from the broker\'s own metrics (the ones /metrics exports); '
             f"{len(sampler.samples)} samples kept, up to {sampler.samples.maxlen}. This page reloads every {REFRESH_S} s.</p>"),
        Html(f'<div class="charts">{figures}</div>'),
        Html("<h2>Requests since start</h2>"),
        Html(f"<table><thead><tr><th>API</th><th class=num>Requests</th><th class=num>Mean ms</th></tr></thead><tbody>{totals}</tbody></table>"
             if apis else '<p class="muted">no requests yet</p>'),
    ]
    return ctx.html("Activity", body, active="/activity", refresh=REFRESH_S)
