"""report.html: one self-contained page that says what a run found and shows why.

The page reads the run's results (the `doc` written to results.json) and its history; it
never judges anything itself. It holds no link to the network: styles, the small script and
every chart (SVG drawn here, see `results/charts.py`) are inline, and a Content-Security-
Policy forbids fetching anything, so it opens the same from a CI artifact as from a laptop.

Everything that came from a history, a checker or a log (keys, values, errors, process
names, log lines) is escaped before it reaches the page. A section that fails to draw is
replaced by a note saying so; the rest of the report is still written.
"""

from __future__ import annotations

import os
import sys
import time
import urllib.parse
from pathlib import Path
from typing import Any, Callable, Sequence

from harness.core.history import Op
from results import charts
from results.lineage import shrink_section
from results.liveness import liveness_section
from harness.core.contracts.checker import verdict_word
from results.svg import esc, show

LOG_TAIL_LINES = 12


def _get(spec: Any, name: str, default: Any = None) -> Any:
    if isinstance(spec, dict):
        return spec.get(name, default)
    return getattr(spec, name, default)


def _verdict(valid) -> tuple[str, str]:
    """(word, css class) of a verdict."""
    word = verdict_word(valid)
    return word, word.lower()


def _num(v: Any, unit: str = "") -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        v = f"{v:,.1f}" if abs(v) >= 100 else f"{v:,.3g}" if abs(v) < 1 else f"{v:,.2f}"
    elif isinstance(v, int) and not isinstance(v, bool):
        v = f"{v:,}"
    return esc(f"{v}{unit}")


def reproduce_command(spec: Any) -> str:
    """spec.command, or a `chaos run` line rebuilt from the spec when it was not recorded."""
    cmd = _get(spec, "command") or ""
    if cmd:
        return cmd
    if _get(spec, "concurrency", 0) is None:  # TestSpec.bare: a history checked without its spec.json
        return "(a history checked without its spec.json: no command to reproduce it)"
    nem = list(_get(spec, "nemesis") or [])
    parts = ["chaos run", f"--backend {_get(spec, 'backend', 'redlock')}",
             f"--nemesis {','.join(nem) if nem else 'none'}", f"--time-limit {_get(spec, 'time_limit', 30)}",
             f"--seed {_get(spec, 'seed', 0)}"]
    if _get(spec, "fencing"):
        parts.append("--fencing")
    return " ".join(parts)


# ---------------------------------------------------------------- sections

def verdict_card(spec: Any, doc: dict) -> str:
    s = doc.get("summary", {})
    word, cls = _verdict(s.get("valid"))
    nem = s.get("nemesis") or list(_get(spec, "nemesis") or []) or ["none"]
    nem = nem if isinstance(nem, list) else [nem]

    def tile(label: str, value: str, bad: bool = False) -> str:
        return f'<div class="tile{" bad" if bad else ""}"><div class="v">{value}</div><div class="k">{esc(label)}</div></div>'

    viol = s.get("violations")
    acc, rej, lost = s.get("stale_writes_accepted"), s.get("stale_writes_rejected"), s.get("lost_updates")
    tiles = [
        tile("violations (two holders at once)", _num(viol), bool(viol)),
        tile("stale writes accepted", _num(acc), bool(acc)),
        tile("stale writes rejected", _num(rej)),
        tile("lost updates", _num(lost), bool(lost)),
        tile("acquires ok / fail / info", f"{_num(s.get('acquires_ok'))} / {_num(s.get('acquires_fail'))} / "
                                          f"{_num(s.get('acquires_info'))}"),
        tile("acquire latency p50 / p99", f"{_num(s.get('p50_acquire_ms'))} / {_num(s.get('p99_acquire_ms'), ' ms')}"),
        tile("ops / duration", f"{_num(s.get('ops'))} / {_num(s.get('duration_s'), ' s')}"),
        tile("max overlap", _num(s.get("max_overlap_ms"), " ms"), bool(s.get("max_overlap_ms"))),
    ]
    failed = [n for n, v in (s.get("checkers") or {}).items() if v is False]
    unknown = [n for n, v in (s.get("checkers") or {}).items() if v not in (True, False)]
    why = []
    from harness.checker.causes import cause_text

    if cause_text(s):
        why.append(f"{_num(viol)} violations: {cause_text(s)}")
    if failed:
        why.append(f"checkers that found a violation: {', '.join(failed)}")
    if unknown:
        reasons = s.get("not_judged") or {}
        why.append("checkers that could not decide: " + ", ".join(
            f"{n} ({reasons[n]})" if reasons.get(n) else n for n in unknown))
    if s.get("interrupted"):
        why.append("the run was interrupted; the history is a prefix")
    for e in s.get("errors") or []:
        why.append(f"error: {e}")
    if s.get("netns_fallback"):
        why.append(f"network namespaces unavailable: {s['netns_fallback']}")
    cmd = reproduce_command(spec)
    return f"""
<section class="card verdict {cls}" id="verdict">
  <div class="head"><span class="badge {cls}">{word}</span>
    <span class="what">backend <b>{esc(s.get('backend') or _get(spec, 'backend', '?'))}</b> ·
    nemesis <b>{esc('+'.join(map(str, nem)))}</b> · seed <b>{esc(s.get('seed', _get(spec, 'seed')))}</b>
    {'· <b>fencing on</b>' if s.get('fencing') or _get(spec, 'fencing') else ''}</span></div>
  <div class="tiles">{''.join(tiles)}</div>
  {''.join(f'<p class="why">{esc(w)}</p>' for w in why)}
  <div class="cmd"><span class="k">reproduce</span> <code id="cmd">{esc(cmd)}</code>
    <button id="copy-cmd" type="button">copy</button></div>
</section>"""


def causes_section(fr: charts.Frame, doc: dict) -> str:
    """One row per violation: who, when, for how long, and why (harness/checker/causes.py);
    then the releases and renews that said ok after the lock was lost."""
    from harness.checker.causes import cause_text

    mutex = doc.get("checkers", {}).get("mutex") or {}
    det, summ = mutex.get("details") or {}, mutex.get("summary") or {}
    overlaps = det.get("overlaps") or []
    late = [("release", e) for e in det.get("releases_ok_after_lease_lost") or []] + \
           [("renew", e) for e in det.get("renews_ok_after_lease_lost") or []]
    if not overlaps and not late:
        return ""
    out = []
    said = cause_text(summ)
    if said:
        out.append(f"<p><b>{_num(summ.get('violations'))} violations: {esc(said)}.</b> A holder that overran its "
                   f"lease is the design's known exposure (fencing is the defence); a grant while the earlier lease "
                   f"was still valid needs a fault on the lock service to explain it, and without one it is a bug.</p>")
    rows = []
    for ov in overlaps:
        a, b, c = ov.get("first") or {}, ov.get("second") or {}, ov.get("cause") or {}
        t = fr.s(ov["start_ns"]) if isinstance(ov.get("start_ns"), int) else None
        bad = c.get("cause") == "unexplained"
        rows.append(f'<tr class="{"bad" if bad else ""}"><td>{f"{t:.3f} s" if t is not None else "—"}</td>'
                    f'<td>{esc(a.get("process"))} → {esc(b.get("process"))}</td><td>{esc(ov.get("overlap_ms"))} ms</td>'
                    f'<td>{esc(c.get("cause", "unknown"))}</td><td>{esc(c.get("detail", ""))}</td></tr>')
    if rows:
        out.append("<table><thead><tr><th>at</th><th>holders</th><th>overlap</th><th>cause</th><th>why</th></tr></thead>"
                   f"<tbody>{''.join(rows)}</tbody></table>")
    if late:
        items = "".join(f"<li>{esc(f)} #{esc((e.get('op') or {}).get('index'))} by process "
                        f"{esc((e.get('op') or {}).get('process'))} said ok {esc(e.get('why'))}</li>" for f, e in late)
        out.append(f"<p>Ops that said ok after the lock was lost: the client cannot tell it lost the lock.</p><ul>{items}</ul>")
    return "".join(out)


def fencing_table(fr: charts.Frame, doc: dict) -> str:
    w = doc.get("checkers", {}).get("writes") or {}
    det, summ = w.get("details") or {}, w.get("summary") or {}
    rows = [("accepted", e) for e in det.get("stale_accepted") or []] + \
           [("rejected", e) for e in det.get("stale_rejected") or []]
    intro = ("A write is stale when another process acquired the lock after the writer's own acquire and "
             "before the write was sent. A fenced resource rejects it (good); an accepted one may have "
             "clobbered newer data.")
    counts = (f"<p>{_num(summ.get('stale_writes_accepted'))} accepted, {_num(summ.get('stale_writes_rejected'))} "
              f"rejected; final counter {_num(summ.get('final_counter'))}, writes ok {_num(summ.get('writes_ok'))}, "
              f"lost updates {_num(summ.get('lost_updates'))}.</p>")
    if not rows:
        return f"<p>{esc(intro)}</p>{counts}<p>No stale writes.</p>"
    rows.sort(key=lambda r: ((r[1].get("write") or {}).get("time_ns") or 0))
    body = []
    for outcome, e in rows:
        wr = e.get("write") or {}
        t = fr.s(wr["time_ns"]) if isinstance(wr.get("time_ns"), int) else None
        body.append(f'<tr class="{"bad" if outcome == "accepted" else "good"}"><td>{esc(outcome)}</td>'
                    f'<td>{f"{t:.3f} s" if t is not None else "—"}</td><td>{esc(wr.get("process"))}</td>'
                    f'<td>#{esc(wr.get("index"))}</td><td>{show(e.get("token"))}</td><td>{esc(e.get("outcome"))}</td></tr>')
    listed = len(rows)
    total = (summ.get("stale_writes_accepted") or 0) + (summ.get("stale_writes_rejected") or 0)
    more = f"<p class='note'>Listing {listed} of {total} (results.json keeps the first of each kind).</p>" \
        if total > listed else ""
    return (f"<p>{esc(intro)}</p>{counts}{more}<div class='scroll'><table><thead><tr><th>stale write</th><th>time</th>"
            f"<th>process</th><th>op</th><th>token</th><th>outcome</th></tr></thead><tbody>{''.join(body)}"
            f"</tbody></table></div>")


def _summary_items(summary: dict) -> str:
    items = []
    for k, v in summary.items():
        if isinstance(v, (list, dict)) and not v:
            continue
        items.append(f"<span class='kv'>{esc(k)} <b>{show(v, 120)}</b></span>")
    return " ".join(items)


def checkers_section(fr: charts.Frame, spec: Any, doc: dict) -> str:
    try:
        from harness.checker.policy import judged

        decides = judged(spec)
    except Exception:  # an old or partial spec: say nothing rather than something wrong
        decides = set()
    rows, extra = [], []
    for name, r in (doc.get("checkers") or {}).items():
        word, cls = _verdict(r.get("valid"))
        rows.append(f"<tr><td><a href='#chk-{esc(name)}'>{esc(name)}</a></td><td><span class='badge small {cls}'>{word}</span>"
                    f"</td><td>{'yes' if name in decides else 'reported only'}</td>"
                    f"<td>{_summary_items(r.get('summary') or {})}</td></tr>")
        det = r.get("details") or {}
        part = []
        if r.get("error"):
            part.append(f"<p class='bad'>error: {esc(r['error'])}</p>")
        if det.get("reason"):
            part.append(f"<p>{esc(det['reason'])}</p>")
        if det.get("traceback"):
            part.append(f"<details><summary>traceback</summary><pre>{esc(det['traceback'])}</pre></details>")
        cx = det.get("counterexample")
        if isinstance(cx, dict):
            part.append(_counterexample(cx))
        if part:
            extra.append(f"<div class='checker' id='chk-{esc(name)}'><h3>{esc(name)} "
                         f"<span class='badge small {cls}'>{word}</span></h3>{''.join(part)}</div>")
    table = ("<table><thead><tr><th>checker</th><th>verdict</th><th>decides the verdict</th><th>summary</th></tr>"
             f"</thead><tbody>{''.join(rows)}</tbody></table>")
    return table + "".join(extra)


def _counterexample(cx: dict) -> str:
    op = cx.get("op") or {}
    inv, comp = op.get("invoke") or {}, op.get("completion")
    outcome = comp.get("type") if isinstance(comp, dict) else "no completion"
    result = " → no completion"
    if isinstance(comp, dict):
        result = f" → {esc(outcome)}" + ("" if comp.get("value") is None else f" {show(comp.get('value'))}")
    states = cx.get("states") or []
    lines = [
        f"<p>Key <code>{show(cx.get('key'))}</code>: after {_num(cx.get('linearized_prefix_len'))} ops were "
        f"linearized, this op could not be placed: <code>#{esc(inv.get('index'))} process {esc(inv.get('process'))} "
        f"{esc(inv.get('f'))}{'' if inv.get('value') is None else ' ' + show(inv.get('value'))}{result}</code>.</p>",
        f"<p>Model states it could have been in just before that op: "
        f"{', '.join(f'<code>{show(s)}</code>' for s in states) or '—'}. "
        f"Ops concurrent with it: {len(cx.get('concurrent') or [])}.</p>",
        charts.counterexample(cx),
    ]
    return "".join(lines)


def clocks_section(fr: charts.Frame, max_rows: int = 60) -> str:
    """The measured offsets as a chart, and as a table when there are few measurements."""
    chart = charts.clocks(fr)
    if chart is None:
        return ""
    html_ = _chart(chart, "Each node's clock offset as the nemesis measured it after each clock fault and heal "
                          "(a node keeps its offset until it is measured again).")
    ops = [o for o in fr.nemesis_ops if o.type == "ok" and o.f.startswith("clock") and isinstance(o.value, dict)]
    if len(ops) > max_rows:
        return html_ + f"<p class='note'>{len(ops)} measurements; hover the points for values.</p>"
    nodes = sorted(charts.clock_series(fr))
    head = "".join(f"<th>{esc(n)}</th>" for n in nodes)
    rows = []
    for o in ops:
        cells = "".join(f"<td>{_offset(o.value.get(n))}</td>" for n in nodes)
        rows.append(f"<tr><td>{fr.s(o.time_ns):.3f} s</td><td>{esc(o.f)}</td>{cells}</tr>")
    return (html_ + "<details><summary>measured offsets (s)</summary><table class='narrow'><thead><tr><th>time</th>"
            f"<th>fault</th>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></details>")


def _offset(v: Any) -> str:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return f"{v:+.3f}"
    return "" if v is None else show(v, 40)


def logs_section(run_dir: Path) -> str:
    """Links to the run's files and the tail of each node log. A file that resolves outside
    the run dir, or is not a regular file (a FIFO would block the tail), is neither linked
    nor read: a note says it is not shown (harness/core/safefile.py)."""
    from harness.core.errors import BadArgument
    from harness.core.safefile import is_inside, open_inside

    files = [("history.jsonl", "every op"), ("ops.csv", "one row per op"), ("results.json", "verdicts"),
             ("spec.json", "the test")]
    out = ["<p class='files'>" + " · ".join(f"<a href='{n}'>{n}</a> ({d})" for n, d in files
                                          if (run_dir / n).exists() and is_inside(run_dir, run_dir / n)) + "</p>"]
    nodes = sorted((run_dir / "nodes").glob("*.log")) if (run_dir / "nodes").is_dir() else []
    if not nodes:
        return "".join(out) + "<p>No node logs in this run dir.</p>"
    for p in nodes:
        try:
            f = open_inside(run_dir, p)
        except BadArgument:
            out.append(f"<p class='note'>{esc(p.name)} is not shown: it is a link out of this run dir or not a "
                       f"regular file, so it is not followed.</p>")
            continue
        except OSError as e:
            out.append(f"<p class='note'>{esc(p.name)} is unreadable: {esc(e.strerror)}.</p>")
            continue
        with f:
            size = os.fstat(f.fileno()).st_size
            tail = _tail(f)
        href = esc("nodes/" + urllib.parse.quote(p.name))
        out.append(f"<details class='log'><summary><a href=\"{href}\">{esc(p.name)}</a> "
                   f"<span class='note'>{size:,} bytes; last lines below</span></summary>"
                   f"<pre>{esc(tail) or '(empty)'}</pre></details>")
    return "".join(out)


def _tail(f, lines: int = LOG_TAIL_LINES) -> str:
    """The last lines of the open binary file `f` (its last 16 KiB at most)."""
    try:
        f.seek(max(0, f.seek(0, os.SEEK_END) - 16384))
        data = f.read().decode("utf-8", "replace")
    except OSError as e:
        return f"(unreadable: {e})"
    return "\n".join(ln[:400] for ln in data.splitlines()[-lines:])


# ---------------------------------------------------------------- the page

def _chart(result: tuple[str, list[str]] | None, intro: str) -> str:
    if result is None:
        return ""
    body, notes = result
    return f"<p>{esc(intro)}</p>{body}" + "".join(f"<p class='note'>{esc(n)}</p>" for n in notes)


def render(run_dir: Path, spec: Any, history: Sequence[Op], doc: dict) -> str:
    """The report's HTML as a string."""
    fr = charts.frame(history, dict(getattr(spec, "facts", None) or {}) if not isinstance(spec, dict) else spec.get("facts"))
    sections: list[tuple[str, str, Callable[[], str]]] = [
        ("shrink", "Shrink", lambda: shrink_section(run_dir)),  # links to the run it was shrunk from / to
        ("timeline", "Who held the lock", lambda: _chart(charts.timeline(fr, doc, history),
         "One lane per client process; a bar is a window in which the process believed it held the lock "
         "(from its acquire's ok to its release); an rw lock's readers are drawn green, its writers blue. "
         "Shaded bands are faults; red marks holders the lock kind does not allow at once. "
         "Click a fault in a legend to hide its bands.")),
        ("latency", "Acquire latency", lambda: _chart(charts.latency(fr),
         "Each dot is an acquire that succeeded, placed at its invocation; lines are the median and 99th "
         "percentile per time bucket.")),
        ("throughput", "Throughput", lambda: _chart(charts.throughput(fr),
         "Client ops that completed ok, per second of the run.")),
        ("clocks", "Clock offsets", lambda: clocks_section(fr)),
        ("causes", "Why each violation happened", lambda: causes_section(fr, doc)),
        ("liveness", "Liveness, expiry and fresh leases", lambda: liveness_section(fr, doc)),
        ("fencing", "Stale writes and fencing", lambda: fencing_table(fr, doc)),
        ("checkers", "Checkers", lambda: checkers_section(fr, spec, doc)),
        ("logs", "Node logs and files", lambda: logs_section(run_dir)),
    ]
    drawn = []
    for anchor, title, fn in sections:
        try:
            body = fn()
        except Exception as e:  # one broken section must not cost the reader the rest
            body = f"<p class='bad'>This section could not be drawn: {esc(type(e).__name__)}: {esc(e)}</p>"
        if body:
            drawn.append((anchor, title, body))
    s = doc.get("summary", {})
    word, cls = _verdict(s.get("valid"))
    name = f"{_get(spec, 'backend', '?')} / {'+'.join(map(str, _get(spec, 'nemesis') or [])) or 'none'}"
    nav = " ".join(f"<a href='#{a}'>{esc(t)}</a>" for a, t, _ in drawn)
    body = "".join(f"<section class='card' id='{a}'><h2>{esc(t)}</h2>{b}</section>" for a, t, b in drawn)
    try:
        card = verdict_card(spec, doc)
    except Exception as e:
        card = f"<section class='card'><p class='bad'>The verdict card could not be drawn: {esc(e)}</p></section>"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{esc(word)} · chaoslock {esc(name)}</title>
<style>{CSS}</style></head>
<body data-ready="0" class="{cls}">
<header><h1>chaoslock report <span class="run">{esc(name)} · {esc(run_dir.name)}</span></h1>
<nav><a href="../../index.html">all runs</a> · {nav}</nav></header>
<main>{card}{body}</main>
<footer>written {esc(time.strftime('%Y-%m-%d %H:%M:%S'))} from {_num(len(history))} history ops;
times are seconds since the first op, on the host's monotonic clock (no nemesis skews it).</footer>
<script>{JS}</script></body></html>"""


def write_report(run_dir: Path, spec: Any, history: Sequence[Op], doc: dict, *, store: str | None = None) -> Path:
    """Write run_dir/report.html and refresh the store's index.html; return the report's path.
    Both replace their file, never writing through a link (harness/core/safefile.py).

    The index is that of the store the run dir lies in (run_dir/../..), refreshed when it is
    one: it has a `latest` link, or it is `store`, the store the caller ran the run in. The
    spec's own `store` is never asked: a spec read from a run dir must not lead a write
    outside it (docs/security.md)."""
    from harness.core.safefile import write_atomic

    run_dir = Path(run_dir)
    path = write_atomic(run_dir / "report.html", render(run_dir, spec, history, doc))
    root = run_dir.resolve().parent.parent
    if (root / "latest").exists() or (store and Path(store).resolve() == root):
        try:
            from results.index import write_index

            write_index(root)
        except OSError as e:  # the report is written; a stale index is only an inconvenience
            print(f"chaos: could not refresh {root / 'index.html'}: {e}", file=sys.stderr)
    return path


CSS = """
:root{--ok:#1e8e3e;--bad:#d62728;--unk:#c77c02;--ink:#24292f;--mute:#6a737d;--line:#e3e6ea}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;color:var(--ink);background:#f4f6f8}
header{background:#fff;border-bottom:1px solid var(--line);padding:10px 24px;position:sticky;top:0;z-index:2}
h1{font-size:18px;margin:0 0 4px}h1 .run{font-weight:400;color:var(--mute);font-size:14px;margin-left:8px}
nav a{margin-right:10px;color:#0b62c4;text-decoration:none}
main{max-width:1260px;margin:0 auto;padding:16px 24px}
.card{background:#fff;border:1px solid var(--line);border-radius:8px;padding:14px 18px;margin:0 0 16px}
h2{font-size:16px;margin:0 0 8px}h3{font-size:14px;margin:14px 0 6px}
.verdict{border-left:8px solid var(--unk)}.verdict.valid{border-left-color:var(--ok)}.verdict.invalid{border-left-color:var(--bad)}
.head{display:flex;align-items:center;gap:14px;flex-wrap:wrap}
.badge{display:inline-block;color:#fff;background:var(--unk);font-weight:700;letter-spacing:.05em;padding:6px 14px;border-radius:6px;font-size:20px}
.badge.small{font-size:11px;padding:2px 7px;border-radius:4px}
.badge.valid{background:var(--ok)}.badge.invalid{background:var(--bad)}
.tiles{display:grid;grid-template-columns:repeat(4,1fr);gap:10px;margin:14px 0 8px}
.tile{border:1px solid var(--line);border-radius:6px;padding:8px 10px}
.tile .v{font-size:20px;font-weight:600}.tile .k{color:var(--mute);font-size:12px}
.tile.bad{border-color:#f1b0b0;background:#fff5f5}.tile.bad .v{color:var(--bad)}
.why{margin:4px 0;color:#7a2020}
.cmd{margin-top:10px;display:flex;align-items:center;gap:8px}.cmd .k{color:var(--mute)}
code,pre{font:12.5px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
.cmd code{background:#f0f2f4;padding:4px 8px;border-radius:4px;word-break:break-all}
button{font:inherit;font-size:12px;padding:2px 10px;border:1px solid #c9ced4;border-radius:4px;background:#fff;cursor:pointer}
pre{background:#f6f8fa;padding:8px;border-radius:4px;overflow:auto;max-height:320px;white-space:pre-wrap;word-break:break-all}
table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:4px 8px;border-bottom:1px solid var(--line);vertical-align:top}
th{color:var(--mute);font-weight:600;font-size:12px}td:first-child{white-space:nowrap}
table.narrow{width:auto}table.narrow td{font-variant-numeric:tabular-nums;padding:2px 12px}
tr.bad td:first-child{color:var(--bad);font-weight:600}tr.good td:first-child{color:var(--ok);font-weight:600}
.scroll{max-height:360px;overflow:auto}
.kv{display:inline-block;margin:0 10px 2px 0;color:var(--mute);font-size:12px}.kv b{color:var(--ink);font-weight:500}
.note{color:var(--mute);font-size:12px;margin:4px 0}.bad{color:var(--bad)}
svg.chart{width:100%;height:auto;display:block;margin:6px 0}
svg text{font:12px system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;fill:#333}
svg .tick{fill:#6a737d;font-size:11px}svg .axis-label{fill:#444;font-size:12px}
svg .lane-label{font-size:12px;fill:#24292f}svg .bar-label{font-size:11px;fill:#fff;pointer-events:none}
svg .bar-label.dark{fill:#555}svg .legend{font-size:12px}
svg .grid{stroke:#eceef1;stroke-width:1}svg .axis{stroke:#9aa1a9;stroke-width:1}
svg .lane-bg{fill:#f7f8fa}svg .held{fill:#3b73b9}svg .held.open{fill:#8fb0dc}
svg .violation{fill:#d62728;fill-opacity:.85;stroke:#8b0000;stroke-width:1}svg .deadline{fill:#f0a000}
svg .q50{fill:none;stroke:#222;stroke-width:2}svg .q99{fill:none;stroke:#d62728;stroke-width:2;stroke-dasharray:6 3}
svg .tput-all{fill:none;stroke:#2a7d4f;stroke-width:1.8}svg .tput-acq{fill:none;stroke:#3b73b9;stroke-width:1.5}
svg .clock-line{fill:none;stroke-linejoin:round}
svg .tput-area{fill:#2a7d4f;fill-opacity:.12;stroke:none}
svg .fault-key{cursor:pointer}svg .fault-key.off{opacity:.35}
details.log summary{cursor:pointer;margin:4px 0}
footer{color:var(--mute);font-size:12px;text-align:center;padding:8px 24px 24px}
@media (max-width:800px){.tiles{grid-template-columns:repeat(2,1fr)}}
"""

# Small and optional: the page reads the same without it. It toggles fault bands from the
# legends, copies the reproduce command, and marks the page ready (the browser test checks it).
JS = """
(function(){
  function each(sel, fn){ Array.prototype.forEach.call(document.querySelectorAll(sel), fn); }
  each('.fault-key', function(k){
    k.addEventListener('click', function(){
      var f = k.getAttribute('data-f'), off = !k.classList.contains('off');
      each('.fault-key[data-f="' + f + '"]', function(e){ e.classList.toggle('off', off); });
      each('.fault-band[data-f="' + f + '"]', function(e){ e.style.display = off ? 'none' : ''; });
    });
  });
  var b = document.getElementById('copy-cmd'), c = document.getElementById('cmd');
  if (b && c && navigator.clipboard) {
    b.addEventListener('click', function(){ navigator.clipboard.writeText(c.textContent).then(function(){ b.textContent = 'copied'; }); });
  } else if (b) { b.hidden = true; }
  document.body.setAttribute('data-ready', '1');
})();
"""
