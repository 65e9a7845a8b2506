"""Small charts drawn on the server as inline SVG: no script, no external asset, CSP-safe.

Each function returns markup (`markupsafe.Markup`) whose every text is escaped; numbers are
formatted by Python. Bars scale to the largest value; an empty series draws an empty frame.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from markupsafe import Markup, escape


def bars(values: Mapping[str, int | float], *, width: int = 320, row: int = 18, label_w: int = 110,
         title: str = "") -> Markup:
    """Horizontal bars, one per key, labelled with the key and the value."""
    items = list(values.items())
    height = max(row, row * len(items))
    top = max([float(v) for _, v in items if v and v > 0] or [1.0])
    parts = [f'<svg class="chart" role="img" aria-label="{escape(title)}" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">']
    span = width - label_w - 50
    for i, (name, value) in enumerate(items):
        y = i * row
        w = 0 if value is None or value <= 0 else max(1, int(span * float(value) / top))
        parts.append(f'<text x="0" y="{y + row - 5}" class="lbl">{escape(str(name))}</text>'
                     f'<rect x="{label_w}" y="{y + 3}" width="{w}" height="{row - 6}" class="bar"/>'
                     f'<text x="{label_w + w + 4}" y="{y + row - 5}" class="val">{escape(_num(value))}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


def sparkline(points: Sequence[float], *, width: int = 220, height: int = 40, title: str = "") -> Markup:
    """A line over the last points (oldest first), with the last value printed beside it."""
    values = [max(0.0, float(p)) for p in points]
    top = max(values or [1.0]) or 1.0
    step = width / max(1, len(values) - 1)
    coords = " ".join(f"{i * step:.1f},{height - 4 - (height - 8) * v / top:.1f}" for i, v in enumerate(values))
    last = _num(values[-1]) if values else "–"
    return Markup(f'<svg class="chart spark" role="img" aria-label="{escape(title)}" width="{width + 50}" '
                  f'height="{height}" viewBox="0 0 {width + 50} {height}" xmlns="http://www.w3.org/2000/svg">'
                  f'<polyline points="{coords}" class="line"/>'
                  f'<text x="{width + 4}" y="{height / 2 + 4:.0f}" class="val">{escape(last)}</text></svg>')


def _num(value: int | float | None) -> str:
    if value is None:
        return "?"
    if value < 0:
        return "unknown"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"
