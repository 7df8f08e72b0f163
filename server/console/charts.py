"""Small inline SVG line charts for the Activity page: no library, no script.

``line_chart`` draws one or more series over the same time axis, with the y axis scaled to the
largest value, its top value and unit as a label, and the time span as the x label. Points are
(seconds ago, value) pairs; ``None`` values leave a gap.
"""

from __future__ import annotations

from .html import Html, esc

WIDTH, HEIGHT = 400, 120
PAD_LEFT, PAD_BOTTOM, PAD_TOP = 44, 16, 8
COLORS = ("#0b5cad", "#d9730d", "#17663a", "#a1261b")


def _nice_max(v: float) -> float:
    """The smallest 1/2/5 x 10^n at or above ``v`` (a readable top of the y axis)."""
    if v <= 0:
        return 1.0
    magnitude = 10 ** (len(str(int(v))) - 1) if v >= 1 else 1.0
    while magnitude > v:
        magnitude /= 10
    for step in (1, 2, 5, 10):
        if step * magnitude >= v:
            return step * magnitude
    return 10 * magnitude


def _fmt(v: float) -> str:
    if v >= 1e9:
        return f"{v / 1e9:g}G"
    if v >= 1e6:
        return f"{v / 1e6:g}M"
    if v >= 1e3:
        return f"{v / 1e3:g}k"
    return f"{v:g}"


def line_chart(series: dict[str, list[tuple[float, float | None]]], *, span_s: float, unit: str = "", label: str = "") -> Html:
    """An SVG of ``series`` (name -> points of (age in seconds, value)) over the last ``span_s`` seconds."""
    values = [v for pts in series.values() for _, v in pts if v is not None]
    top = _nice_max(max(values, default=0.0))
    plot_w, plot_h = WIDTH - PAD_LEFT - 4, HEIGHT - PAD_BOTTOM - PAD_TOP
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{esc(label)}">',
        f'<line x1="{PAD_LEFT}" y1="{PAD_TOP}" x2="{PAD_LEFT}" y2="{PAD_TOP + plot_h}" stroke="#d9dee7"/>',
        f'<line x1="{PAD_LEFT}" y1="{PAD_TOP + plot_h}" x2="{WIDTH - 4}" y2="{PAD_TOP + plot_h}" stroke="#d9dee7"/>',
        f'<line x1="{PAD_LEFT}" y1="{PAD_TOP}" x2="{WIDTH - 4}" y2="{PAD_TOP}" stroke="#eef1f5"/>',
        f'<text x="{PAD_LEFT - 4}" y="{PAD_TOP + 9}" text-anchor="end">{esc(_fmt(top))}{esc(unit)}</text>',
        f'<text x="{PAD_LEFT - 4}" y="{PAD_TOP + plot_h}" text-anchor="end">0</text>',
        f'<text x="{PAD_LEFT}" y="{HEIGHT - 2}">-{esc(_span(span_s))}</text>',
        f'<text x="{WIDTH - 4}" y="{HEIGHT - 2}" text-anchor="end">now</text>',
    ]
    for i, (name, pts) in enumerate(series.items()):
        color = COLORS[i % len(COLORS)]
        runs: list[list[str]] = [[]]
        for age, v in sorted(pts, key=lambda p: -p[0]):
            if v is None or age > span_s:
                if runs[-1]:
                    runs.append([])
                continue
            x = PAD_LEFT + plot_w * (1 - age / span_s) if span_s else PAD_LEFT + plot_w
            y = PAD_TOP + plot_h * (1 - v / top)
            runs[-1].append(f"{x:.1f},{y:.1f}")
        for run in runs:
            if len(run) == 1:
                x, y = run[0].split(",")
                parts.append(f'<circle cx="{x}" cy="{y}" r="1.8" fill="{color}"/>')
            elif run:
                parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.6" points="{" ".join(run)}"/>')
        if len(series) > 1:
            parts.append(f'<text x="{PAD_LEFT + 6 + 110 * i}" y="{PAD_TOP + 10}" class="s{i % len(COLORS)}">{esc(name)}</text>')
    parts.append("</svg>")
    return Html("".join(parts))


def _span(seconds: float) -> str:
    return f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds:g} s"
