"""audit.html: `chaos audit`'s report card as one self-contained page; it only reads audit.json's doc.

One row per promise (PASS, FAIL, NOT TESTED with why), each FAIL's runs with their cause, a
link to the run's report and the replay command, its shrunk schedule and rate, then the scenarios run and those refused.
Every value is escaped; the page fetches nothing (the same Content-Security-Policy as a run's
report). The file replaces its name, never writing through a link (harness/core/safefile.py).
"""

from __future__ import annotations

import html
import os
from pathlib import Path

from harness.core.safefile import write_atomic

COLOURS = {"PASS": "#c8f0c8", "FAIL": "#f6c1c1", "NOT TESTED": "#eeeeee"}


def write_card_html(path: Path, doc: dict) -> None:
    e = html.escape
    title = f"chaos audit of {doc.get('client')}"
    out = ["<!doctype html><html><head><meta charset='utf-8'>"
           "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
           f"<title>{e(title)}</title><style>body{{font:14px system-ui,sans-serif;margin:1.5em}}"
           "table{border-collapse:collapse}th,td{border:1px solid #999;padding:.4em .6em;vertical-align:top;text-align:left}"
           "code{font-size:12px}.note{color:#444;font-size:12px}</style></head><body>",
           f"<h1>{e(title)}</h1>",
           f"<p class='note'>TTL {e(str(doc.get('ttl_ms')))} ms, acquire timeout {e(str(doc.get('acquire_timeout_s')))} s"
           + (f", session {e(str(doc.get('session_s')))} s" if doc.get("session_s") else "")
           + f"; {'renewing, ' if doc.get('renew') else ''}{'fenced' if doc.get('fenced') else 'no fencing tokens'}; "
             f"{len(doc.get('runs') or [])} runs in {e(str(doc.get('wall_s')))} s; exit code {e(str(doc.get('exit_code')))}"
           + (f"; INTERRUPTED by {e(str(doc['interrupted']))}: covers only the finished runs" if doc.get("interrupted") else "")
           + (f"<br>asked to describe itself: {e(str(doc['described']))}" if doc.get("described") else "")
           + (f"<br>fault-free run: {e(str(doc['calibration_said']))}" if doc.get("calibration_said") else "")
           + (f"<br><b>stopped</b>: {e(str(doc['stopped']))}" if doc.get("stopped") else "")
           + f"<br><code>{e(str(doc.get('command') or ''))}</code></p>",
           "<table><tr><th>promise</th><th>verdict</th><th>why</th></tr>"]
    for r in doc.get("rows") or []:
        colour = COLOURS.get(r.get("status"), "#fff")
        out.append(f"<tr data-promise='{e(str(r.get('promise')))}'><td>{e(str(r.get('title')))}</td>"
                   f"<td style='background:{colour}'><b>{e(str(r.get('status')))}</b></td>"
                   f"<td>{'' if r.get('failures') else e(str(r.get('why')))}")
        for f in r.get("failures") or []:
            report = Path(str(f.get("run_dir"))) / "report.html"
            link = os.path.relpath(report, path.parent) if report.is_absolute() == path.is_absolute() else str(report)
            out.append(f"<p><b>{e(str(f.get('scenario')))} seed {e(str(f.get('seed')))}</b>: {e(str(f.get('cause')))} "
                       f"(<a href='{e(link)}'>report</a>)<br>replay: <code>{e(str(f.get('replay')))}</code>")
            sh = f.get("shrunk") if isinstance(f.get("shrunk"), dict) else {}
            if sh.get("error"):
                out.append(f"<br><span class='note'>not shrunk: {e(str(sh['error']))}</span>")
            elif sh:
                out.append(f"<br>shrunk to <b>{e(str(sh.get('schedule')))}</b> ({e(str(sh.get('faults')))} of "
                           f"{e(str(sh.get('of_faults')))} fault(s), {e(str(sh.get('time_limit')))} s): "
                           f"{e(str(sh.get('rate')))}<br>replay the smallest: <code>{e(str(sh.get('replay')))}</code>")
        for n in (r.get("notes") or [])[:5]:
            out.append(f"<br><span class='note'>{e(str(n))}</span>")
        out.append("</td></tr>")
    out.append("</table><h2>Scenarios</h2><table><tr><th>scenario</th><th>what</th><th>runs</th></tr>")
    for s in doc.get("scenarios") or []:
        out.append(f"<tr><td>{e(str(s.get('name')))}</td><td>{e(str(s.get('what')))}</td><td>{e(str(s.get('runs')))}</td></tr>")
    for name, why in (doc.get("not_tested") or {}).items():
        out.append(f"<tr><td>{e(str(name))}</td><td colspan='2'>NOT TESTED: {e(str(why))}</td></tr>")
    out.append("</table></body></html>")
    write_atomic(path, "\n".join(out))
