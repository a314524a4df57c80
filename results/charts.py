"""The report's charts, drawn as SVG on the server from a history and its results.

Every chart shares one time axis: seconds since the first op of the history (the host's
monotonic clock, which no nemesis skews). Fault intervals are shaded on each of them.
Charts only read: the verdicts come from results.json, the series from the history.

Large histories are thinned so a page of 100k ops stays quick to draw: holding windows
closer together than a pixel are merged into one bar, and the latency scatter keeps one
point per pixel cell and at most `MAX_POINTS` of them (the slowest always kept). Each
chart returns notes that say when it did so; quantile lines always use every op.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Sequence

from harness.core.history import NEMESIS, Op, pair_ops
from results import svg
from results.svg import DEADLINE, HELD, LEFT, PLOT_W, RED, WIDTH, Linear, esc

MAX_POINTS = 5000
NOT_CLIENTS = (NEMESIS, "final")  # "final" is the harness's closing read, not a lock client


def _process_order(p: Any) -> tuple:
    return (0, p, "") if isinstance(p, int) else (1, 0, str(p))


@dataclass(slots=True, kw_only=True)
class Frame:
    """What every chart needs: the time base, the faults, the client processes, the pairs."""

    t0: int
    duration_s: float
    x: Linear
    faults: list[dict]
    processes: list
    pairs: list[tuple[Op, Op | None]]  # client (invoke, completion) pairs, by invocation time
    nemesis_ops: list[Op] = field(default_factory=list)

    def s(self, ns: int) -> float:
        return (ns - self.t0) / 1e9


def frame(history: Sequence[Op], facts: dict | None = None) -> Frame:
    """The time base and faults of a history; `facts` (the run's, harness/core/facts.py) name the
    fault kinds its nemeses declared."""
    from harness.core.faults import fault_intervals, table

    ops = sorted(history, key=lambda o: (o.time_ns, o.index))
    t0 = ops[0].time_ns if ops else 0
    dur = (ops[-1].time_ns - t0) / 1e9 if ops else 0.0
    dur = dur if dur > 0 else 1.0
    procs = sorted({o.process for o in ops if o.process not in NOT_CLIENTS}, key=_process_order)
    pairs = [(i, c) for i, c in pair_ops(ops) if i.process not in NOT_CLIENTS]
    faults = []
    for iv in fault_intervals(ops, table(facts)):
        end = iv["end_ns"]
        faults.append({"f": iv["f"], "start_s": (iv["start_ns"] - t0) / 1e9,
                       "end_s": (end - t0) / 1e9 if end is not None else None, "value": iv["value"]})
    return Frame(t0=t0, duration_s=dur, x=Linear(d0=0.0, d1=dur, r0=LEFT, r1=LEFT + PLOT_W),
                 faults=faults, processes=procs, pairs=pairs,
                 nemesis_ops=[o for o in ops if o.process == NEMESIS])


def fault_colour(f: str) -> str:
    return svg.colour_of(f, svg.FAULT_COLOURS)


def _fault_title(iv: dict) -> str:
    end = f"{iv['end_s']:.3f} s" if iv["end_s"] is not None else "never healed"
    return f"{iv['f']}: {iv['start_s']:.3f} s to {end}\nvalue: {_plain(iv['value'])}"


def _plain(value: Any, limit: int = 400) -> str:
    """Like svg.show but unescaped, for tooltips (svg.rect escapes its title)."""
    try:
        s = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    except (TypeError, ValueError):
        s = repr(value)
    return s if len(s) <= limit else s[:limit] + "..."


def fault_bands(fr: Frame, y0: float, y1: float) -> str:
    """A shaded band per fault interval over [y0, y1], tooltip with its f and value."""
    out = []
    for iv in fr.faults:
        x0 = fr.x(iv["start_s"])
        x1 = fr.x(iv["end_s"] if iv["end_s"] is not None else fr.duration_s)
        out.append(svg.rect(x0, y0, max(x1 - x0, 1.5), y1 - y0, cls="fault-band", fill=fault_colour(iv["f"]),
                            title=_fault_title(iv), attrs=f'data-f="{svg.slug(iv["f"])}" fill-opacity="0.16"'))
    return "".join(out)


def fault_legend(fr: Frame) -> list[tuple]:
    kinds = sorted({iv["f"] for iv in fr.faults})
    return [("band", fault_colour(f), f"{f} active", f'class="fault-key" data-f="{svg.slug(f)}"') for f in kinds]


# ---------------------------------------------------------------- the lock timeline

LANE_H, LANE_STEP = 20, 27
READ = "#2ca58d"  # a window held to read (an rw lock); writers keep svg.HELD


def _windows(doc: dict, history: Sequence[Op]) -> list[list]:
    """The holding windows the mutex checker found (the renderer never recomputes them;
    results.json without them, from before the checker listed them, draws no bars)."""
    det = (doc.get("checkers", {}).get("mutex") or {}).get("details") or {}
    return det["windows"] if isinstance(det.get("windows"), list) else []


def timeline(fr: Frame, doc: dict, history: Sequence[Op]) -> tuple[str, list[str]]:
    """One lane per client process: holding windows as bars, faults as bands, overlaps red."""
    notes: list[str] = []
    wins = _windows(doc, history)
    lanes = list(fr.processes)
    for p in sorted({w[0] for w in wins} - set(lanes), key=_process_order):
        lanes.append(p)
    row = {str(p): i for i, p in enumerate(lanes)}
    top_nem = 34
    top = top_nem + LANE_STEP + 4
    bottom = top + LANE_STEP * max(len(lanes), 1)
    reads = [w for w in wins if len(w) > 5 and w[5] == "read"]  # an rw lock's readers (harness/checker/kinds.py)
    parts = [svg.legend([("box", HELD, "held to write" if reads else "lock held")]
                        + ([("box", READ, "held to read")] if reads else [])
                        + [("box", RED, "held by two at once (violation)"),
                           ("box", DEADLINE, "end of the lease, as its holder believed")]
                        + fault_legend(fr), LEFT, 16)]
    parts.append(fault_bands(fr, top_nem, bottom))
    parts.append(svg.x_axis(fr.x, top_nem, bottom, "time since start (s)"))

    # the nemesis row: one labelled bar per fault
    parts.append(svg.text(LEFT - 8, top_nem + 14, "nemesis", anchor="end", cls="lane-label"))
    for iv in fr.faults:
        x0 = fr.x(iv["start_s"])
        x1 = fr.x(iv["end_s"] if iv["end_s"] is not None else fr.duration_s)
        parts.append(svg.rect(x0, top_nem, max(x1 - x0, 1.5), LANE_H, cls="fault-bar", fill=fault_colour(iv["f"]),
                              title=_fault_title(iv), attrs=f'data-f="{svg.slug(iv["f"])}"'))
        if x1 - x0 > 7 * len(iv["f"]) + 8:
            parts.append(svg.text(x0 + 4, top_nem + 14, iv["f"], cls="bar-label"))

    det = (doc.get("checkers", {}).get("mutex") or {}).get("details") or {}
    overran = {(str((ov.get("first") or {}).get("process")), (ov.get("first") or {}).get("time_ns"))
               for ov in det.get("overlaps") or []}
    ticks: list[str] = []  # drawn last, over the red of a violation
    by_lane: dict[str, list[list]] = {}
    for w in wins:
        by_lane.setdefault(str(w[0]), []).append(w)
    drawn = merged_total = 0
    end_s = fr.duration_s
    for p in lanes:
        i = row[str(p)]
        y = top + i * LANE_STEP
        label = str(p) if len(str(p)) <= 14 else str(p)[:13] + "…"
        n = len(by_lane.get(str(p), []))
        parts.append(f'<g class="lane" data-process="{esc(p)}">')
        parts.append(f'<text x="{LEFT - 8}" y="{y + 14}" text-anchor="end" class="lane-label">'
                     f'<title>{esc(f"process {p}: {n} holding windows")}</title>process {esc(label)}</text>')
        parts.append(svg.rect(LEFT, y, PLOT_W, LANE_H, cls="lane-bg"))
        bars, merged = _lane_bars(fr, sorted(by_lane.get(str(p), []), key=lambda w: w[1]), end_s)
        merged_total += merged
        drawn += len(bars)
        for x0, x1, title, open_ in bars:
            cls = "held open" if open_ else "held"
            parts.append(svg.rect(x0, y + 2, max(x1 - x0, 1.0), LANE_H - 4, cls=cls, title=title))
        for w in by_lane.get(str(p), []):  # readers drawn apart from writers, over the bars
            if len(w) > 5 and w[5] == "read":
                s0, s1 = fr.s(w[1]), (fr.s(w[2]) if w[2] is not None else end_s)
                parts.append(svg.rect(fr.x(s0), y + 2, max(fr.x(s1) - fr.x(s0), 1.0), LANE_H - 4, cls="held read",
                                      fill=READ, title=f"process {p} held it to read, {s0:.3f} s to {s1:.3f} s"))
        # Each lease's end, as its holder believed it, is a tick: on every window where no bar is
        # merged, and always on the earlier holder of a violation (where an overrun shows).
        for w in by_lane.get(str(p), []):
            if (len(bars) == n or (str(w[0]), w[1]) in overran) and len(w) > 4 and isinstance(w[4], int):
                xd = fr.x(fr.s(w[4]))
                ticks.append(svg.rect(xd - 1, y, 2, LANE_H, cls="deadline",
                                      title=f"process {p}'s lease valid until {fr.s(w[4]):.3f} s, by its own "
                                            f"reckoning; a bar past this tick overran it"))
        parts.append("</g>")

    mutex = doc.get("checkers", {}).get("mutex") or {}
    overlaps = (mutex.get("details") or {}).get("overlaps") or []
    total = (mutex.get("summary") or {}).get("violations", len(overlaps))
    for ov in overlaps:
        a, b = ov.get("first") or {}, ov.get("second") or {}
        s0, s1 = fr.s(ov["start_ns"]), fr.s(ov["end_ns"])
        x0, x1 = fr.x(s0), fr.x(s1)
        who = (f" ({' and '.join(ov['modes'])})" if ov.get("modes") and not ov.get("holders", 2) > 2
               else f" ({ov['holders']} holders at once)" if ov.get("holders", 2) > 2 else "")
        title = (f"violation{who}: processes {a.get('process')} and {b.get('process')} both held the lock for "
                 f"{ov.get('overlap_ms')} ms, {s0:.3f} s to {s1:.3f} s (tokens {a.get('token')} and "
                 f"{b.get('token')}; acquires #{a.get('index')} and #{b.get('index')})"
                 + (f". {(ov.get('cause') or {}).get('detail')}" if (ov.get("cause") or {}).get("detail") else ""))
        for p in (a.get("process"), b.get("process")):
            if str(p) in row:
                y = top + row[str(p)] * LANE_STEP
                parts.append(svg.rect(x0 - 1, y, max(x1 - x0, 1.0) + 2, LANE_H, cls="violation", title=title))
    parts.extend(ticks)
    if total and len(overlaps) < total:
        notes.append(f"{len(overlaps)} of {total} violations are drawn (results.json lists the first {len(overlaps)}).")
    if reads:
        notes.append(f"A read-write lock: {len(reads):,} windows held to read (green), {len(wins) - len(reads):,} "
                     f"to write (blue). Readers may overlap each other; a writer overlaps nobody.")
    if merged_total:
        notes.append(f"{len(wins):,} holding windows are drawn as {drawn:,} bars: windows less than a pixel apart "
                     f"are merged into one bar; hover a bar for how many it holds.")
    height = bottom + 44
    return svg.svg(height, "".join(parts), cls="chart timeline", label="who held the lock when"), notes


def _lane_bars(fr: Frame, wins: list[list], end_s: float) -> tuple[list[tuple], int]:
    """(x0, x1, tooltip, open) bars for one lane, merging windows under a pixel apart."""
    bars: list[list] = []  # [x0, x1, count, first_s, last_s, token, open]
    merged = 0
    for w in wins:
        s0 = fr.s(w[1])
        s1 = fr.s(w[2]) if w[2] is not None else end_s
        x0, x1 = fr.x(s0), fr.x(s1)
        if bars and x0 - bars[-1][1] < 0.75:
            b = bars[-1]
            b[1], b[2], b[4], b[6] = max(b[1], x1), b[2] + 1, max(b[4], s1), b[6] or w[2] is None
            merged += 1
        else:
            bars.append([x0, x1, 1, s0, s1, w[3] if len(w) > 3 else None, w[2] is None])
    out = []
    p = wins[0][0] if wins else ""
    for x0, x1, count, a, b, token, open_ in bars:
        if count == 1:
            end = "never released" if open_ else f"{b:.3f} s ({(b - a) * 1000:.1f} ms)"
            title = f"process {p} held the lock {a:.3f} s to {end}; token {token}"
        else:
            title = f"process {p}: {count} holding windows between {a:.3f} s and {b:.3f} s (merged: under a pixel apart)"
        out.append((x0, x1, title, open_))
    return out, merged


# ---------------------------------------------------------------- latency and throughput

def _acquire_latencies(fr: Frame) -> list[tuple[float, float, Any]]:
    out = []
    for inv, done in fr.pairs:
        if inv.f == "acquire" and done is not None and done.type == "ok":
            out.append((fr.s(inv.time_ns), max((done.time_ns - inv.time_ns) / 1e6, 0.0), inv.process))
    return out


def _quantile(vals: list[float], q: float) -> float:
    return vals[min(len(vals) - 1, max(0, int(round(q * (len(vals) - 1)))))]


def _buckets(fr: Frame, target: int, floor: float = 1.0) -> tuple[float, int]:
    width = max(fr.duration_s / target, floor)
    width = float(f"{width:.2g}")  # 5.5 s, not 5.535 s
    return width, int(math.ceil(fr.duration_s / width)) or 1


def latency(fr: Frame) -> tuple[str, list[str]]:
    pts = _acquire_latencies(fr)
    notes: list[str] = []
    top, h = 30, 260
    if not pts:
        return "", ["No acquire completed ok, so there is no latency to plot."]
    lo, hi = svg.decade_bounds(min(p[1] for p in pts) or 1e-3, max(p[1] for p in pts))
    y = svg.Log(d0=lo, d1=hi, r0=top + h, r1=top)
    # about 15 acquires per bucket, so a bucket's p99 means something; between 4 and 80 buckets
    width, nb = _buckets(fr, min(80, max(4, len(pts) // 15)), floor=0.1)
    per: list[list[float]] = [[] for _ in range(nb)]
    for t, ms, _ in pts:
        per[min(nb - 1, int(t / width))].append(ms)
    q50: list = []
    q99: list = []
    for i, vals in enumerate(per):
        if len(vals) < 3:  # too few to call a quantile; break the line
            q50.append(None)
            q99.append(None)
            continue
        vals.sort()
        xa, xb = fr.x(i * width), fr.x(min((i + 1) * width, fr.duration_s))
        for line, q in ((q50, 0.5), (q99, 0.99)):
            yy = y(_quantile(vals, q))
            line += [(xa, yy), (xb, yy)]
    shown = _thin(pts, fr, y)
    if len(shown) < len(pts):
        notes.append(f"The scatter shows {len(shown):,} of {len(pts):,} ok acquires (points on the same pixel are "
                     f"drawn once, then at most {MAX_POINTS:,} kept, the slowest always); the p50/p99 lines use all of them.")
    titles = len(shown) <= 2000
    r, alpha = (2.0, 0.45) if len(shown) > 500 else (3.0, 0.7)
    parts = [svg.legend([("dot", HELD, "ok acquire"), ("line", "#222", "p50"), ("dash", RED, "p99")]
                        + fault_legend(fr), LEFT, 16)]
    parts.append(fault_bands(fr, top, top + h))
    parts.append(svg.y_axis(y, svg.log_ticks(lo, hi), "acquire latency (ms, log)"))
    parts.append(svg.x_axis(fr.x, top, top + h, f"time since start (s); p50 and p99 per {width:g} s bucket (of 3 or more acquires)"))
    dots = []
    for t, ms, p in shown:
        cx, cy = fr.x(t), y(ms)
        if titles:
            dots.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="{r}"><title>{esc(f"{t:.3f} s: {ms:.1f} ms, process {p}")}</title></circle>')
        else:
            dots.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="{r}"/>')
    parts.append(f'<g class="points" fill="{HELD}" fill-opacity="{alpha}">{"".join(dots)}</g>')
    parts.append(f'<path d="{svg.path_of(q50)}" class="q50"/>')
    parts.append(f'<path d="{svg.path_of(q99)}" class="q99"/>')
    return svg.svg(top + h + 44, "".join(parts), cls="chart latency", label="acquire latency over time"), notes


def _thin(pts: list[tuple], fr: Frame, y) -> list[tuple]:
    """One point per 2-px cell, then at most MAX_POINTS: the slowest tenth and an even stride."""
    seen, out = set(), []
    for p in pts:
        cell = (int(fr.x(p[0]) / 2), int(y(p[1]) / 2))
        if cell not in seen:
            seen.add(cell)
            out.append(p)
    if len(out) <= MAX_POINTS:
        return out
    by_slow = sorted(range(len(out)), key=lambda i: -out[i][1])
    keep = set(by_slow[: MAX_POINTS // 10])
    rest = [i for i in range(len(out)) if i not in keep]
    step = len(rest) / (MAX_POINTS - len(keep))
    keep.update(rest[int(k * step)] for k in range(MAX_POINTS - len(keep)))
    return [out[i] for i in sorted(keep)]


def throughput(fr: Frame) -> tuple[str, list[str]]:
    width, nb = _buckets(fr, 300)
    ok_all, ok_acq = [0] * nb, [0] * nb
    for inv, done in fr.pairs:
        if done is None or done.type != "ok":
            continue
        i = min(nb - 1, max(0, int(fr.s(done.time_ns) / width)))
        ok_all[i] += 1
        ok_acq[i] += inv.f == "acquire"
    if not any(ok_all):
        return "", ["No client op completed ok."]
    top, h = 30, 180
    ymax = max(c / max(min((i + 1) * width, fr.duration_s) - i * width, width / 4) for i, c in enumerate(ok_all))
    ticks = svg.nice_ticks(0, ymax * 1.05, 5)
    y = Linear(d0=0, d1=max(ticks[-1], ymax), r0=top + h, r1=top)

    def steps(counts: list[int]) -> list[tuple[float, float]]:
        pts = []
        for i, c in enumerate(counts):
            a, b = i * width, min((i + 1) * width, fr.duration_s)
            yy = y(c / max(b - a, width / 4))  # the last bucket is partial: divide by its own width
            pts += [(fr.x(a), yy), (fr.x(b), yy)]
        return pts

    parts = [svg.legend([("line", "#2a7d4f", "ok ops/s (all client ops)"), ("line", HELD, "ok acquires/s")]
                        + fault_legend(fr), LEFT, 16)]
    parts.append(fault_bands(fr, top, top + h))
    parts.append(svg.y_axis(y, ticks, "ok ops per second"))
    parts.append(svg.x_axis(fr.x, top, top + h, f"time since start (s); {width:g} s buckets"))
    all_pts = steps(ok_all)
    base = y(0)
    area = svg.path_of(all_pts) + f"L{all_pts[-1][0]:.1f},{base:.1f}L{all_pts[0][0]:.1f},{base:.1f}Z"
    parts.append(f'<path d="{area}" class="tput-area"/>')
    parts.append(f'<path d="{svg.path_of(all_pts)}" class="tput-all"/>')
    parts.append(f'<path d="{svg.path_of(steps(ok_acq))}" class="tput-acq"/>')
    return svg.svg(top + h + 44, "".join(parts), cls="chart throughput", label="throughput over time"), []


# ---------------------------------------------------------------- clock offsets

def clock_series(fr: Frame) -> dict[str, list[tuple[float, float, str]]]:
    """node -> [(t s, offset s, f)] from ok clock-bump/clock-reset values ({node: offset})."""
    series: dict[str, list[tuple[float, float, str]]] = {}
    for op in fr.nemesis_ops:
        if op.type != "ok" or not op.f.startswith("clock") or not isinstance(op.value, dict):
            continue
        for node, off in op.value.items():
            if isinstance(off, (int, float)) and not isinstance(off, bool) and math.isfinite(off):
                series.setdefault(str(node), []).append((fr.s(op.time_ns), float(off), op.f))
    return series


def clocks(fr: Frame) -> tuple[str, list[str]] | None:
    series = clock_series(fr)
    if not series:
        return None
    vals = [v for pts in series.values() for _, v, _ in pts] + [0.0]
    lo, hi = min(vals), max(vals)
    pad = (hi - lo) * 0.08 or 1.0
    ticks = svg.nice_ticks(lo - pad, hi + pad, 6)
    top, h = 30, 200
    y = Linear(d0=min(ticks[0], lo - pad), d1=max(ticks[-1], hi + pad), r0=top + h, r1=top)
    nodes = sorted(series)
    colours = {n: svg.PALETTE[i % len(svg.PALETTE)] for i, n in enumerate(nodes)}
    parts = [svg.legend([("line", colours[n], n) for n in nodes] + fault_legend(fr), LEFT, 16)]
    parts.append(fault_bands(fr, top, top + h))
    parts.append(svg.y_axis(y, ticks, "clock offset (s)"))
    parts.append(svg.x_axis(fr.x, top, top + h, "time since start (s)"))
    for n in nodes:
        pts, line = series[n], []
        for i, (t, v, _) in enumerate(pts):
            t_next = pts[i + 1][0] if i + 1 < len(pts) else fr.duration_s
            line += [(fr.x(t), y(v)), (fr.x(t_next), y(v))]
        # earlier nodes drawn wider, so nodes at the same offset show as stacked stripes
        width = 2 + 1.5 * (len(nodes) - 1 - nodes.index(n)) if len(nodes) <= 6 else 2
        parts.append(f'<path d="{svg.path_of(line)}" stroke="{colours[n]}" stroke-width="{width}" class="clock-line" '
                     f'data-node="{esc(n)}"/>')
        for t, v, f in pts:
            parts.append(f'<circle cx="{fr.x(t):.1f}" cy="{y(v):.1f}" r="3" fill="{colours[n]}">'
                         f'<title>{esc(f"{n}: {v:+.3f} s measured after {f} at {t:.3f} s")}</title></circle>')
    return svg.svg(top + h + 44, "".join(parts), cls="chart clocks", label="clock offsets per node"), []


# ---------------------------------------------------------------- a counterexample

def counterexample(cx: dict) -> str:
    """The op that could not be placed (red), its concurrent ops, and the last placed ones."""
    rows: list[tuple[str, dict]] = [("placed", o) for o in cx.get("linearized_prefix_tail") or []]
    rows += [("concurrent", o) for o in cx.get("concurrent") or []]
    rows.append(("unplaced", cx.get("op") or {}))
    rows = [(k, o) for k, o in rows if isinstance(o, dict) and isinstance(o.get("invoke"), dict)]
    if not rows:
        return ""
    anchor = rows[-1][1]["invoke"].get("time_ns", 0)
    ends = [o["completion"]["time_ns"] for _, o in rows if isinstance(o.get("completion"), dict)
            and o["completion"].get("type") == "ok"]
    t_lo = min(o["invoke"]["time_ns"] for _, o in rows)
    t_hi = max(ends + [o["invoke"]["time_ns"] for _, o in rows])
    span = (t_hi - t_lo) or 1
    t_hi += span * 0.08  # room for ops that never completed
    ms = lambda ns: (ns - anchor) / 1e6  # noqa: E731
    x = Linear(d0=ms(t_lo), d1=ms(t_hi), r0=LEFT + 180, r1=WIDTH - 24)
    top, step = 30, 22
    bottom = top + step * len(rows)
    parts = [svg.legend([("box", "#9aa5b1", "already linearized"), ("box", HELD, "concurrent"),
                         ("box", RED, "could not be placed")], LEFT + 180, 16)]
    parts.append(svg.x_axis(x, top, bottom, "ms relative to the invocation of the op that could not be placed", n=8))
    colour = {"placed": "#9aa5b1", "concurrent": HELD, "unplaced": RED}
    for i, (kind, o) in enumerate(rows):
        inv, comp = o["invoke"], o.get("completion")
        yy = top + i * step
        ctype = comp.get("type") if isinstance(comp, dict) else None
        out = comp.get("value") if isinstance(comp, dict) else None
        arg = "" if inv.get("value") is None else " " + _plain(inv.get("value"), 12)
        label = f"p{inv.get('process')} {inv.get('f')}{arg} → {ctype or 'pending'}"
        label = label if len(label) <= 34 else label[:33] + "…"
        x0 = x(ms(inv["time_ns"]))
        x1 = x(ms(comp["time_ns"])) if ctype == "ok" else x.r1
        title = (f"#{inv.get('index')} process {inv.get('process')} {inv.get('f')} key {_plain(inv.get('key'))} "
                 f"value {_plain(inv.get('value'))} -> {ctype or 'no completion'} {_plain(out)}"
                 + (f" error {comp.get('error')}" if isinstance(comp, dict) and comp.get("error") else ""))
        parts.append(svg.text(LEFT + 172, yy + 13, label, anchor="end", cls="lane-label"))
        dash = "" if ctype == "ok" else ' stroke-dasharray="4 3" fill-opacity="0.35"'
        parts.append(svg.rect(x0, yy + 2, max(x1 - x0, 2.0), step - 6, cls=f"cx-{kind}", fill=colour[kind],
                              title=title, attrs=f'stroke="{colour[kind]}"{dash}'))
        if ctype != "ok":
            parts.append(svg.text(x1 - 4, yy + 14, ctype or "no completion", anchor="end", cls="bar-label dark"))
    return svg.svg(bottom + 44, "".join(parts), cls="chart counterexample", label="counterexample")
