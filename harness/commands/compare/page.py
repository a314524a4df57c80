"""compare.md, compare.csv and compare.html: the articles' table beside the measurements.

Each cell: the measured value (median over the repetitions, with the spread when there
was more than one), the articles' claim and the verdict. The pages only read the table
built by `table()`; nothing is judged here. compare.html is self-contained (inline SVG
bar charts, no script fetched, a CSP forbidding any), like the run report. Each file
replaces its name, never writing through a link (harness/core/safefile.py).
"""

from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import Any

from harness.core.safefile import atomic_open, write_atomic
from harness.commands.compare.claims import (CONFIRMED, DRIVER_BOUND, INCONCLUSIVE, NOT_CLAIMED, REFUTED, ROWS,
                                             verdict, yardstick_ratio)
from results.svg import esc

COLOURS = {CONFIRMED: "#c8f0c8", REFUTED: "#f6c1c1", INCONCLUSIVE: "#fbe3a6", DRIVER_BOUND: "#fbe3a6",
           NOT_CLAIMED: "#ffffff"}
CHARTS = (("acquire_p50_ms", "acquire p50, 1 client (ms)"), ("contended_p99_ms", "P99 acquire, contended (ms)"),
          ("throughput", "best throughput (cycles/s)"), ("requests_per_grant", "server requests per grant, contended"))


def table(measured: dict[str, dict], backends: list[str]) -> list[dict]:
    """One dict per (row, backend): row, label, backend, value, spread, claim, verdict, runs."""
    out = []
    for row in ROWS:
        for b in backends:
            m = measured[b]
            value = m["medians"].get(row.id)
            claim, word = verdict(row, b, value, m["medians"])
            out.append({"row": row.id, "label": row.label, "unit": row.unit, "backend": b, "value": value,
                        "spread": m["spreads"].get(row.id), "claim": claim, "verdict": word,
                        "runs": m["runs"].get(row.id, []),
                        "yardstick": m["medians"].get(row.yardstick) if row.yardstick else None,
                        "ratio": yardstick_ratio(row, value, m["medians"])})
    return out


def show(value: Any, spread: Any = None) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        text = "yes" if value else "no"
    elif isinstance(value, float):
        text = f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"
    elif isinstance(value, int):
        text = f"{value:,}"
    else:
        text = str(value)
    if spread:
        text += f" ({show(spread[0])}–{show(spread[1])})"
    return text


def show_cell(c: dict) -> str:
    """The value, and for a performance row the yardstick's figure and our share of it."""
    text = show(c["value"], c["spread"])
    if c.get("yardstick") is not None:
        text += f" (yardstick {show(c['yardstick'])}, " + (f"{c['ratio']:.2f}x)" if c.get("ratio") is not None
                                                          else "ratio —)")
    return text


def ratios(cells: list[dict], backends: list[str]) -> list[str]:
    """For each charted row: every backend as a multiple of the first one measured."""
    out = []
    for row_id, title in CHARTS:
        vals = {c["backend"]: c["value"] for c in cells if c["row"] == row_id
                and isinstance(c["value"], (int, float)) and not isinstance(c["value"], bool) and c["value"] > 0}
        base = next((b for b in backends if b in vals), None)
        if base is None or len(vals) < 2:
            continue
        out.append(f"{title}, as a multiple of {base}: "
                   + ", ".join(f"{b} {vals[b] / vals[base]:.2g}x" for b in backends if b in vals and b != base))
    return out


def write_csv(path: Path, cells: list[dict]) -> None:
    with atomic_open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["row", "backend", "value", "spread_min", "spread_max", "claim", "verdict", "yardstick", "ratio",
                    "runs"])
        for c in cells:
            lo, hi = c["spread"] or ("", "")
            w.writerow([c["row"], c["backend"], "" if c["value"] is None else c["value"], lo, hi, c["claim"],
                        c["verdict"], "" if c.get("yardstick") is None else c["yardstick"],
                        "" if c.get("ratio") is None else c["ratio"], " ".join(c["runs"])])


def _grid(cells: list[dict], backends: list[str]) -> list[tuple[str, dict[str, dict]]]:
    rows: dict[str, dict[str, dict]] = {}
    labels: dict[str, str] = {}
    for c in cells:
        rows.setdefault(c["row"], {})[c["backend"]] = c
        labels[c["row"]] = c["label"]
    return [(labels[r], by) for r, by in rows.items()]


def write_md(path: Path, cells: list[dict], backends: list[str], meta: dict) -> None:
    lines = [f"# chaos compare ({meta['plan']})", "", f"Measured {meta['when']} on {meta['machine']}.",
             "Absolute numbers hold on this machine only; compare the backends by their ratios.", "",
             "| row | " + " | ".join(backends) + " |", "|---|" + "---|" * len(backends)]
    for label, by in _grid(cells, backends):
        parts = []
        for b in backends:
            c = by[b]
            cell = show_cell(c)
            if c["verdict"] != NOT_CLAIMED:
                cell += f" — claim {c['claim']}: **{c['verdict']}**"
            parts.append(cell)
        lines.append(f"| {label} | " + " | ".join(parts) + " |")
    counts = {w: sum(c["verdict"] == w for c in cells) for w in (CONFIRMED, REFUTED, INCONCLUSIVE, DRIVER_BOUND)}
    lines += ["", f"{counts[CONFIRMED]} claims confirmed, {counts[REFUTED]} refuted, "
              f"{counts[INCONCLUSIVE] + counts[DRIVER_BOUND]} inconclusive ({counts[DRIVER_BOUND]} of them driver-bound: "
              "our figure under half the service's own load tool's).", "", *[f"- {r}" for r in ratios(cells, backends)], "", *meta.get("notes", []), "", f"Run dirs are listed in compare.csv. Took "
              f"{meta['took_s']:.0f} s.", ""]
    write_atomic(path, "\n".join(lines))


def _bars(row_id: str, title: str, cells: list[dict], backends: list[str]) -> str:
    vals = {c["backend"]: c["value"] for c in cells if c["row"] == row_id}
    nums = {b: v for b, v in vals.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    w, bar_h, left = 520, 22, 110
    top = max(nums.values(), default=0) or 1
    body = [f"<text x='0' y='14' class='t'>{esc(title)}</text>"]
    for i, b in enumerate(backends):
        y = 24 + i * (bar_h + 6)
        v = nums.get(b)
        body.append(f"<text x='0' y='{y + 15}'>{esc(b)}</text>")
        if v is None:
            body.append(f"<text x='{left}' y='{y + 15}'>not measured</text>")
            continue
        length = max(1.0, (w - left - 90) * v / top)
        body.append(f"<rect class='bar' data-backend='{esc(b)}' x='{left}' y='{y}' width='{length:.1f}' height='{bar_h}'"
                    f" fill='#4a78b5'><title>{esc(b)}: {esc(show(v))}</title></rect>"
                    f"<text x='{left + length + 6:.1f}' y='{y + 15}'>{esc(show(v))}</text>")
    h = 24 + len(backends) * (bar_h + 6) + 4
    return (f"<svg class='chart' data-row='{esc(row_id)}' viewBox='0 0 {w} {h}' width='{w}' height='{h}' role='img' "
            f"aria-label='{esc(title)}'>{''.join(body)}</svg>")


def write_html(path: Path, cells: list[dict], backends: list[str], meta: dict) -> None:
    e = esc
    out = ["<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
           "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; style-src 'unsafe-inline'\">",
           f"<title>chaos compare ({e(meta['plan'])})</title><style>",
           "body{font:14px system-ui,sans-serif;margin:1.5em}table{border-collapse:collapse;margin:1em 0}"
           "th,td{border:1px solid #999;padding:.35em .55em;vertical-align:top}td small{color:#444}"
           "svg.chart{margin:.5em 1.5em .5em 0}svg text{font:12px system-ui,sans-serif}svg text.t{font-weight:bold}"
           ".charts{display:flex;flex-wrap:wrap}</style></head><body>",
           f"<h1>chaos compare ({e(meta['plan'])})</h1>",
           f"<p>Measured {e(meta['when'])} on {e(meta['machine'])}. Absolute numbers hold on this machine only; "
           "compare the backends by their ratios. Each cell: the measurement (median, with the spread over the "
           "repetitions), the articles' claim and the verdict.</p><div class='charts'>"]
    out += [_bars(r, t, cells, backends) for r, t in CHARTS]
    out.append("</div><table><tr><th>row</th>" + "".join(f"<th>{e(b)}</th>" for b in backends) + "</tr>")
    for label, by in _grid(cells, backends):
        out.append(f"<tr><th>{e(label)}</th>")
        for b in backends:
            c = by[b]
            link = ""
            if c["runs"]:
                report = Path(c["runs"][0]) / "report.html"
                link = f" <a href='{e(os.path.relpath(report, path.parent))}'>run</a>"
            claim = f"<br><small>claim: {e(c['claim'])}: <b>{e(c['verdict'])}</b></small>" \
                if c["verdict"] != NOT_CLAIMED else ""
            out.append(f"<td class='cell' data-row='{e(c['row'])}' data-backend='{e(b)}' data-verdict='{e(c['verdict'])}'"
                       f" style='background:{COLOURS[c['verdict']]}'>{e(show_cell(c))}{link}{claim}</td>")
        out.append("</tr>")
    out.append("</table><ul>" + "".join(f"<li>{e(r)}</li>" for r in ratios(cells, backends)) + "</ul>"
               + "".join(f"<p>{e(n)}</p>" for n in meta.get("notes", [])) + "</body></html>")
    write_atomic(path, "\n".join(out))
