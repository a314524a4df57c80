"""matrix.html: the judged cells as one self-contained grid; it only reads what judge.py decided.
The file replaces its name, never writing through a link (harness/core/safefile.py)."""

from __future__ import annotations

import html
import os
from pathlib import Path

from harness.core.safefile import write_atomic

COLOURS = {"safe": "#c8f0c8", "unsafe": "#f6c1c1", "unknown": "#fbe3a6", "unsupported": "#d8d8f0", "crash": "#b9b9b9",
           "skipped": "#eeeeee"}


def write_html(path: Path, cells: list[dict], skipped: list[dict], *, title: str, note: str = "") -> None:
    """A self-contained grid: rows backend (+fencing), columns nemesis, one <td class=cell> each."""
    e = html.escape
    present = {(c["backend"], c["fencing"]) for c in cells + skipped}
    rows = [(b, f) for b in dict.fromkeys(c["backend"] for c in cells + skipped) for f in (False, True) if (b, f) in present]
    cols = list(dict.fromkeys(c["nemesis"] for c in cells + skipped))
    by = {(c["backend"], c["fencing"], c["nemesis"]): c for c in cells}
    skip = {(s["backend"], s["fencing"], s["nemesis"]): s for s in skipped}
    out = [f"<!doctype html><html><head><meta charset='utf-8'><title>{e(title)}</title><style>"
           "body{font:14px system-ui,sans-serif;margin:1.5em}table{border-collapse:collapse}"
           "th,td{border:1px solid #999;padding:.4em .6em;vertical-align:top}td.cell{min-width:9em}"
           "td.mismatch{outline:3px solid #c00;outline-offset:-3px}.exp{color:#444;font-size:12px}"
           "a{color:#024}.legend span{padding:.1em .5em;margin-right:.4em}</style></head><body>",
           f"<h1>{e(title)}</h1><p class='exp'>{e(note)}</p><p class='legend'>"
           + "".join(f"<span style='background:{c}'>{e(k)}</span>" for k, c in COLOURS.items())
           + " a red outline marks a cell that did not match its expectation</p>",
           "<table><tr><th>backend</th>" + "".join(f"<th>{e(n)}</th>" for n in cols) + "</tr>"]
    for backend, fenced in rows:
        out.append(f"<tr><th>{e(backend)}{' +fencing' if fenced else ''}</th>")
        for n in cols:
            attrs = f"data-backend='{e(backend)}' data-nemesis='{e(n)}' data-fencing='{'on' if fenced else 'off'}'"
            if (c := by.get((backend, fenced, n))) is not None:
                cls = "cell" + ("" if c["matched"] else " mismatch")
                seeds = "<br>".join(_seed_html(r, path.parent) for r in c["runs"])
                mark = "matches" if c["matched"] else "MISMATCH"
                share = f" <span class='rate'>invalid in {e(c['invalid_rate'])}</span>" if c.get("invalid_rate") else ""
                out.append(f"<td class='{cls}' {attrs} style='background:{COLOURS[c['observed']]}'><b>{e(c['observed'])}</b>"
                           f"{share} <span class='exp'>expected {e(c['expected'])}: {mark}</span><br>{seeds}</td>")
            elif (s := skip.get((backend, fenced, n))) is not None:
                out.append(f"<td class='cell skipped' {attrs} style='background:{COLOURS['skipped']}'>skipped: {e(s['reason'])}</td>")
            else:
                out.append("<td></td>")
        out.append("</tr>")
    out.append("</table></body></html>")
    write_atomic(path, "\n".join(out))


def _seed_html(r: dict, base: Path) -> str:
    e = html.escape
    v = r.get("valid")
    text = f"seed {r['seed']}: " + (f"{r.get('violations') or 0} violations" if v in ("true", "false") else v)
    for k in ("stale_writes_accepted", "stale_writes_rejected"):
        if r.get(k) not in (None, "", 0, "0"):
            text += f", {r[k]} stale {k.rsplit('_', 1)[1]}"
    if r.get("causes"):
        text += f" ({r['causes'].replace(';', ', ').replace('=', ' ')})"
    report = Path(r["run_dir"]) / "report.html" if r.get("run_dir") else None
    if report is not None and report.exists():
        return f"<a href='{e(os.path.relpath(report, base))}'>{e(text)}</a>"
    return e(text) + (f" <span class='exp'>{e(r['error'][:120])}</span>" if r.get("error") else "")
