"""Server-side SVG primitives for the HTML report: scales, ticks, axes, legends, escaping.

Every function returns a string of SVG markup. All text goes through `esc`, so a value that
came from a history or a log (a key, an error, a process name) can never become markup; a
caller that builds its own markup must do the same. Nothing here reads a history: charts
(`results/charts.py`) decide what to draw, this module only knows how.
"""

from __future__ import annotations

import html
import json
import math
import zlib
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

WIDTH = 1200          # viewBox width of every chart; CSS scales it to the page
LEFT = 120            # room for lane labels and y tick labels
RIGHT = 24
PLOT_W = WIDTH - LEFT - RIGHT

RED = "#d62728"
HELD = "#3b73b9"
DEADLINE = "#f0a000"  # the end of a lease, as its holder believed it
GRID = "#e3e6ea"
INK = "#333"
# Faults we know get fixed colours, so a reader learns them once; others hash to a palette.
FAULT_COLOURS = {"clock-bump": "#f0a030", "clock-skew": "#f0a030", "partition": "#8e6bbf",
                 "pause": "#2a9d8f", "kill": "#8c564b", "clock-strobe": "#e377c2"}
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31"]


def esc(x: Any) -> str:
    """Text safe for HTML and SVG content and attribute values."""
    return html.escape(x if isinstance(x, str) else str(x), quote=True)


def show(value: Any, limit: int = 300) -> str:
    """A JSON-ish rendering of a value, shortened, escaped."""
    try:
        s = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    except (TypeError, ValueError):
        s = repr(value)
    if len(s) > limit:
        s = s[:limit] + f"... ({len(s)} chars)"
    return esc(s)


def colour_of(name: str, known: dict[str, str] | None = None) -> str:
    if known and name in known:
        return known[name]
    return PALETTE[zlib.crc32(name.encode("utf-8", "replace")) % len(PALETTE)]


def slug(name: Any) -> str:
    """A class-name-safe token for a value (for CSS selectors and data attributes)."""
    s = "".join(c if c.isalnum() or c in "-_" else "_" for c in str(name))
    return s[:40] or "_"


@dataclass(frozen=True, slots=True, kw_only=True)
class Linear:
    d0: float
    d1: float
    r0: float
    r1: float

    def __call__(self, v: float) -> float:
        span = (self.d1 - self.d0) or 1.0
        return self.r0 + (v - self.d0) / span * (self.r1 - self.r0)


@dataclass(frozen=True, slots=True, kw_only=True)
class Log:
    """log10 scale; values at or below d0 sit on the bottom."""

    d0: float
    d1: float
    r0: float
    r1: float

    def __call__(self, v: float) -> float:
        lo, hi = math.log10(self.d0), math.log10(self.d1)
        x = math.log10(max(v, self.d0))
        return self.r0 + (x - lo) / ((hi - lo) or 1.0) * (self.r1 - self.r0)


def nice_ticks(lo: float, hi: float, n: int = 8) -> list[float]:
    """Round tick values covering [lo, hi], at most about n of them (1-2-5 steps)."""
    if not math.isfinite(lo) or not math.isfinite(hi) or hi <= lo:
        return [lo] if math.isfinite(lo) else []
    raw = (hi - lo) / max(1, n)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    out, v = [], first
    while v <= hi + step * 1e-9:
        out.append(round(v, 12))
        v += step
    return out


def fmt(v: float) -> str:
    """A tick label: no trailing zeros, thousands apart."""
    if v == 0:
        return "0"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if float(v).is_integer():
        return str(int(v))
    return f"{v:.3f}".rstrip("0").rstrip(".")


def log_ticks(lo: float, hi: float) -> list[float]:
    """Decades between lo and hi (both powers of ten)."""
    a, b = int(round(math.log10(lo))), int(round(math.log10(hi)))
    return [10.0 ** k for k in range(a, b + 1)]


def decade_bounds(lo: float, hi: float) -> tuple[float, float]:
    lo = max(lo, 1e-3)
    hi = max(hi, lo * 10)
    return 10.0 ** math.floor(math.log10(lo)), 10.0 ** math.ceil(math.log10(hi))


def rect(x: float, y: float, w: float, h: float, *, cls: str = "", fill: str | None = None,
         title: str | None = None, attrs: str = "") -> str:
    """A rect; `title` is plain text (escaped here) shown as the native tooltip."""
    style = f' fill="{fill}"' if fill else ""
    c = f' class="{cls}"' if cls else ""
    body = f"<title>{esc(title)}</title>" if title else ""
    return (f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(w, 0):.1f}" height="{h:.1f}"{c}{style}'
            f'{" " + attrs if attrs else ""}>{body}</rect>')


def text(x: float, y: float, s: str, *, anchor: str = "start", cls: str = "", attrs: str = "") -> str:
    c = f' class="{cls}"' if cls else ""
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{c}{" " + attrs if attrs else ""}>{esc(s)}</text>'


def path_of(points: Iterable[tuple[float, float] | None]) -> str:
    """An SVG path's d attribute through points; None breaks the line."""
    out, pen = [], False
    for p in points:
        if p is None:
            pen = False
            continue
        out.append(f"{'L' if pen else 'M'}{p[0]:.1f},{p[1]:.1f}")
        pen = True
    return "".join(out)


def x_axis(scale: Linear, y_top: float, y_bottom: float, label: str, *, n: int = 12) -> str:
    """Vertical grid lines from y_top to y_bottom, tick labels and the axis label below."""
    parts = []
    for t in nice_ticks(scale.d0, scale.d1, n):
        x = scale(t)
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y_top:.1f}" y2="{y_bottom:.1f}" class="grid"/>')
        parts.append(text(x, y_bottom + 14, fmt(t), anchor="middle", cls="tick"))
    parts.append(f'<line x1="{scale.r0:.1f}" x2="{scale.r1:.1f}" y1="{y_bottom:.1f}" y2="{y_bottom:.1f}" class="axis"/>')
    parts.append(text((scale.r0 + scale.r1) / 2, y_bottom + 32, label, anchor="middle", cls="axis-label"))
    return "".join(parts)


def y_axis(scale: Linear | Log, ticks: Sequence[float], label: str, *, x_left: float = LEFT,
           x_right: float = LEFT + PLOT_W, unit: str = "") -> str:
    parts = []
    for t in ticks:
        y = scale(t)
        parts.append(f'<line x1="{x_left:.1f}" x2="{x_right:.1f}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>')
        parts.append(text(x_left - 6, y + 4, fmt(t) + unit, anchor="end", cls="tick"))
    parts.append(f'<line x1="{x_left:.1f}" x2="{x_left:.1f}" y1="{min(scale.r0, scale.r1):.1f}" '
                 f'y2="{max(scale.r0, scale.r1):.1f}" class="axis"/>')
    mid = (scale.r0 + scale.r1) / 2
    parts.append(text(16, mid, label, anchor="middle", cls="axis-label",
                      attrs=f'transform="rotate(-90 16 {mid:.1f})"'))
    return "".join(parts)


def legend(items: Sequence[tuple], x: float, y: float) -> str:
    """Items of (kind, colour, label[, group attrs]) in a row; kind is dot, line, dash, box
    or band. The optional attrs (already safe markup) go on the item's <g>, e.g. data-f."""
    parts, cx = [], x
    for item in items:
        kind, colour, label = item[:3]
        attrs = item[3] if len(item) > 3 else ""
        parts.append(f"<g{' ' + attrs if attrs else ''}>")
        if kind == "dot":
            parts.append(f'<circle cx="{cx + 6:.1f}" cy="{y - 4:.1f}" r="4" fill="{colour}"/>')
        elif kind in ("line", "dash"):
            dash = ' stroke-dasharray="5 3"' if kind == "dash" else ""
            parts.append(f'<line x1="{cx:.1f}" x2="{cx + 14:.1f}" y1="{y - 4:.1f}" y2="{y - 4:.1f}" '
                         f'stroke="{colour}" stroke-width="2.5"{dash}/>')
        else:
            op = ' fill-opacity="0.3"' if kind == "band" else ""
            parts.append(f'<rect x="{cx:.1f}" y="{y - 10:.1f}" width="14" height="12" fill="{colour}"{op}/>')
        parts.append(text(cx + 19, y, label, cls="legend"))
        parts.append("</g>")
        cx += 19 + 6.6 * len(label) + 20
    return "".join(parts)


def svg(height: float, body: str, *, cls: str = "chart", label: str = "") -> str:
    aria = f' role="img" aria-label="{esc(label)}"' if label else ""
    return (f'<svg class="{cls}" viewBox="0 0 {WIDTH} {height:.0f}" width="{WIDTH}" height="{height:.0f}" '
            f'xmlns="http://www.w3.org/2000/svg"{aria}>{body}</svg>')
