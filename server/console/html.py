"""HTML building for the console: everything is escaped unless it is ``Html`` already.

Pages are plain server-rendered HTML with one small stylesheet (``STYLE``, served as
``/console.css``); no JavaScript, no fonts or scripts from elsewhere. Builders take values and
escape them (``esc``); a builder's output is ``Html`` so it is not escaped twice. A value that
reaches the page without going through ``esc`` must be ``Html`` made here from constants.
"""

from __future__ import annotations

import datetime
import html
from collections.abc import Iterable
from urllib.parse import urlencode


class Html(str):
    """Markup that is safe as it is (built by this module from escaped parts)."""

    __slots__ = ()


def esc(value: object) -> Html:
    """``value`` as text in HTML (attributes too: quotes are escaped); Html is left alone."""
    if isinstance(value, Html):
        return value
    return Html(html.escape(str(value), quote=True))


def join(parts: Iterable[object], sep: str = "") -> Html:
    return Html(sep.join(esc(p) for p in parts))


def tag(name: str, content: object = "", **attrs: object) -> Html:
    """``<name attrs>content</name>``; attribute names with ``_`` become ``-`` (``class_`` is ``class``)."""
    out = [f"<{name}"]
    for k, v in attrs.items():
        if v is None or v is False:
            continue
        key = k.rstrip("_").replace("_", "-")
        out.append(f" {key}" if v is True else f' {key}="{esc(v)}"')
    out.append(f">{esc(content)}</{name}>")
    return Html("".join(out))


def link(href: str, text: object, **attrs: object) -> Html:
    return tag("a", text, href=href, **attrs)


def url(path: str, **params: object) -> str:
    """``path?a=1&b=x``, parameters percent-encoded, None left out."""
    query = urlencode({k: v for k, v in params.items() if v is not None})
    return f"{path}?{query}" if query else path


def table(headers: list[object], rows: Iterable[list[object]], *, numeric: set[int] | frozenset[int] = frozenset(),
          cls: str | None = None, empty: str = "none") -> Html:
    """A table; columns in ``numeric`` are right-aligned. Cells are escaped unless Html."""
    head = "".join(f'<th{" class=num" if i in numeric else ""}>{esc(h)}</th>' for i, h in enumerate(headers))
    opens = [("<td class=num>" if i in numeric else "<td>") for i in range(len(headers))]
    escape = html.escape
    body = []
    for row in rows:  # esc() inlined: a topic page has a few hundred cells
        cells = "".join(f"{o}{c if isinstance(c, Html) else escape(str(c))}</td>" for o, c in zip(opens, row, strict=False))
        body.append(f"<tr>{cells}</tr>")
    if not body:
        body.append(f'<tr><td colspan="{len(headers)}" class="muted">{esc(empty)}</td></tr>')
    c = f' class="{esc(cls)}"' if cls else ""
    return Html(f"<table{c}><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>")


def notice(text: object, kind: str = "error") -> Html:
    """A message box (``error`` or ``ok``), with role=alert for errors."""
    role = ' role="alert"' if kind == "error" else ""
    return Html(f'<p class="notice {esc(kind)}"{role}>{esc(text)}</p>')


def facts(pairs: Iterable[tuple[str, object]]) -> Html:
    """A definition list of (name, value)."""
    return Html("<dl class=facts>" + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in pairs) + "</dl>")


def fmt_bytes(n: int | None) -> str:
    if n is None or n < 0:
        return "-"
    if n < 1024:
        return f"{n} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        n /= 1024
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}"
    return f"{n} B"


def fmt_count(n: int | None) -> str:
    return "-" if n is None or n < 0 else f"{n:,}"


def fmt_time_ms(ms: int | None) -> str:
    """A Kafka timestamp (ms since the epoch) as UTC ISO 8601 with milliseconds."""
    if ms is None or ms < 0:
        return "-"
    try:
        dt = datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)
    except (OverflowError, OSError, ValueError):
        return str(ms)
    return dt.strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d}Z"


def fmt_duration(seconds: float) -> str:
    s = int(seconds)
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    if d:
        return f"{d}d {h}h {m}m"
    if h:
        return f"{h}h {m}m {s}s"
    if m:
        return f"{m}m {s}s"
    return f"{s}s"


NAV = (("/", "Home"), ("/activity", "Activity"))


def page(title: str, body: object, *, active: str = "", principal: str | None = None, refresh: int | None = None,
         status_line: object = "") -> bytes:
    """A whole page: head, the navigation bar, ``body``."""
    nav = "".join(
        f'<a href="{href}"{" aria-current=page" if href == active else ""}>{name}</a>' for href, name in NAV
    )
    content = join(body) if isinstance(body, list) else esc(body)
    who = f'<span class="who">{esc(principal)}</span>' if principal else ""
    meta = f'<meta http-equiv="refresh" content="{int(refresh)}">' if refresh else ""
    return (
        "<!doctype html>\n<html lang=en><head><meta charset=utf-8>"
        '<meta name=viewport content="width=device-width, initial-scale=1">'
        f"{meta}<title>{esc(title)} · kafka-sidecar</title>"
        '<link rel=stylesheet href="/console.css"></head><body>'
        f'<header><a class="brand" href="/">kafka-sidecar</a><nav>{nav}</nav>{esc(status_line)}{who}</header>'
        f"<main><h1>{esc(title)}</h1>{content}</main></body></html>\n"
    ).encode()


STYLE = b"""
:root{--fg:#1d2330;--muted:#667085;--line:#d9dee7;--bg:#f6f7f9;--accent:#0b5cad;--ok:#17663a;--err:#a1261b}
*{box-sizing:border-box}body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg)}
header{display:flex;gap:1.2em;align-items:center;padding:.6em 1.2em;background:#1d2330;color:#fff}
header a{color:#dfe6f3;text-decoration:none}header a[aria-current]{color:#fff;font-weight:600;border-bottom:2px solid #7fb2ff}
.brand{font-weight:700;color:#fff!important}nav{display:flex;gap:1em}.who{margin-left:auto;color:#aab4c5}
main{padding:1em 1.4em;max-width:1400px}h1{font-size:1.4em;margin:.2em 0 .6em;word-break:break-all}h2{font-size:1.1em;margin:1.4em 0 .5em}
table{border-collapse:collapse;background:#fff;border:1px solid var(--line);margin:.3em 0 1em;min-width:30%}
th,td{padding:.3em .7em;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
th{background:#eef1f5;font-weight:600}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
.muted{color:var(--muted)}a{color:var(--accent)}
dl.facts{display:grid;grid-template-columns:max-content auto;gap:.2em 1em;background:#fff;border:1px solid var(--line);padding:.6em 1em;margin:0 0 1em}
dl.facts dt{color:var(--muted)}dl.facts dd{margin:0;word-break:break-all}
.notice{padding:.5em .8em;border-radius:4px;border:1px solid}.notice.error{color:var(--err);background:#fdecea;border-color:#f2b8b2}
.notice.ok{color:var(--ok);background:#e7f5ec;border-color:#a9d8b9}
pre{margin:0;white-space:pre-wrap;word-break:break-all;max-height:24em;overflow:auto;font:12px/1.4 ui-monospace,Menlo,Consolas,monospace}
.enc{font-size:11px;color:var(--muted);text-transform:uppercase;letter-spacing:.04em}.hdr{display:block}
form.inline{display:flex;flex-wrap:wrap;gap:.6em;align-items:end;background:#fff;border:1px solid var(--line);padding:.6em .8em;margin:.3em 0 1em}
form.inline label{display:flex;flex-direction:column;font-size:12px;color:var(--muted)}
input,select,textarea,button{font:inherit}textarea{min-width:18em;min-height:3.2em}button{padding:.3em .9em}
.pager{display:flex;gap:1em;margin:.3em 0}.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(420px,1fr));gap:1em}
figure{margin:0;background:#fff;border:1px solid var(--line);padding:.5em .8em}figcaption{font-weight:600;margin-bottom:.3em}
svg text{font:11px system-ui,sans-serif;fill:var(--muted)}svg text.s0{fill:#0b5cad}svg text.s1{fill:#d9730d}svg text.s2{fill:#17663a}svg text.s3{fill:#a1261b}.tag{display:inline-block;padding:0 .4em;border-radius:3px;background:#eef1f5;font-size:12px}
"""
