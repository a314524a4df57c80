"""The report's section on the lock's other promises: was it granted again, did queues move,
did a dead holder's lock end with its lease, were leases fresh when granted.

It only reads what the checkers wrote (results.json's `liveness`, `outlived` and
`fresh-leases`: harness/checker/liveness.py, leases.py) and draws it: a strip of the run
with every stretch in which the lock was free but nobody could get it (red past the bound),
availability by phase, and the findings with their ops. Everything shown is escaped.
"""

from __future__ import annotations

from typing import Any

from results.svg import esc

WIDTH, HEIGHT = 900, 28


def _pct(v: Any) -> str:
    return f"{round(100 * v)}%" if isinstance(v, (int, float)) and not isinstance(v, bool) else "—"


def _strip(fr: Any, bands: list[dict], bound: Any) -> str:
    """The run as one strip: faults shaded grey, free-but-unavailable stretches amber, red past the bound."""
    dur = max(fr.duration_s, 1e-9)

    def xs(sec: float) -> float:
        return round(max(0.0, min(1.0, sec / dur)) * WIDTH, 1)

    def x(ns: int) -> float:
        return xs(fr.s(ns))

    rects = []
    for f in fr.faults:
        a, b = xs(f["start_s"]), xs(f["end_s"] if f.get("end_s") is not None else dur)
        rects.append(f'<rect x="{a}" y="0" width="{max(1.0, round(b - a, 1))}" height="{HEIGHT}" fill="#ddd"><title>{esc(f["f"])}</title></rect>')
    for b in bands:
        color = "#c0392b" if b.get("stuck") else "#e8a33d"
        named = (" (STUCK: past the bound " + esc(bound) + " s)" if b.get("stuck") else
                 " (HANDOVER STALLED: released while others asked)" if b.get("handover_stalled") else "")
        rects.append(f'<rect x="{x(b["start_ns"])}" y="4" width="{max(1.0, round(x(b["end_ns"]) - x(b["start_ns"]), 1))}" '
                     f'height="{HEIGHT - 8}" fill="{color}"><title>free, asked for {esc(b.get("asking_s"))} s '
                     f'without a grant{named}</title></rect>')
    return (f'<svg viewBox="0 0 {WIDTH} {HEIGHT}" width="100%" role="img" aria-label="when the lock was free but '
            f'nobody could get it"><rect width="{WIDTH}" height="{HEIGHT}" fill="#f6f6f6"/>{"".join(rects)}</svg>')


def liveness_section(fr: Any, doc: dict) -> str:
    checkers = doc.get("checkers", {})
    live = checkers.get("liveness") or {}
    if not live:
        return ""  # a run stored before these checkers: `chaos report` rebuilds it
    summ, det = live.get("summary") or {}, live.get("details") or {}
    bound = (det.get("bound") or {})
    out = [f"<p>Verdict <b>{esc(live.get('valid'))}</b>: {esc(summ.get('stuck'))} stuck, "
           f"{esc('not judged (no queue promised)' if summ.get('starved') is None else summ.get('starved'))} starved. "
           f"Bound {esc(bound.get('bound_s'))} s = lease {esc(bound.get('lease_s'))} s + acquire timeout "
           f"{esc(bound.get('acquire_timeout_s'))} s + margin {esc(bound.get('margin_s'))} s. "
           + (f"Granted again {esc(summ['granted_after_heal_s'])} s after the last fault healed."
              if summ.get("granted_after_heal_s") is not None else "") + "</p>"]
    bands = det.get("bands") or []
    out.append("<p>Grey: faults. Amber: the lock was free (nobody could hold it) and acquires were asking for "
               "a second or more without a grant; red: past the bound (stuck).</p>" + _strip(fr, bands, bound.get("bound_s")))
    avail = summ.get("availability") or {}
    if avail:
        rows = "".join(f"<tr><td>{esc(p)}</td><td>{esc(v.get('ok'))}</td><td>{esc(v.get('attempts'))}</td>"
                       f"<td>{_pct(v.get('share'))}</td></tr>" for p, v in avail.items() if isinstance(v, dict))
        out.append("<table><thead><tr><th>phase</th><th>acquires ok</th><th>acquires</th><th>availability</th></tr>"
                   f"</thead><tbody>{rows}</tbody></table>")
    for h in det.get("handover_stalls") or []:
        out.append(f"<p class='bad'>HANDOVER STALLED: the lock was released while {esc(len(h.get('waiting') or []))} "
                   f"acquire(s) asked, and granted again only {esc(h.get('stalled_s'))} s later (bound "
                   f"{esc(summ.get('handover_bound_s'))} s, no fault near; ended by {esc(h.get('ended_by'))}).</p>")
    for s in det.get("starved") or []:
        w = s.get("waiter") or {}
        out.append(f"<p class='bad'>STARVED: process {esc(w.get('process'))} waited {esc(s.get('waited_s'))} s "
                   f"(acquire #{esc(w.get('index'))}) while others were granted {esc(s.get('granted_meanwhile'))} times.</p>")
    dead = checkers.get("outlived") or {}
    deaths = (dead.get("details") or {}).get("deaths") or []
    if deaths:
        rows = "".join(f"<tr class='{'bad' if d.get('outlived') else ''}'><td>{esc(d.get('process'))}</td>"
                       f"<td>{fr.s(d['died_ns']):.3f} s</td><td>{esc(d.get('outlived_s'))} s</td>"
                       f"<td>{esc(d.get('past_validity_s'))} s</td><td>{esc(len(d.get('renewals') or []))}</td>"
                       f"<td>{esc({True: 'OUTLIVED', False: 'ok', None: 'not judged'}[d.get('outlived')])}</td></tr>"
                       for d in deaths)
        out.append("<p>Holders that died holding the lock, and how long their lock lived on (to the next grant).</p>"
                   "<table><thead><tr><th>process</th><th>died</th><th>lock lived on</th><th>past its validity</th>"
                   f"<th>acquire/renewals</th><th></th></tr></thead><tbody>{rows}</tbody></table>")
    fresh = checkers.get("fresh-leases") or {}
    fdet = fresh.get("details") or {}
    stale = [("expired", e) for e in fdet.get("expired") or []] + [("longer than the TTL", e) for e in fdet.get("overlong") or []]
    if stale:
        items = "".join(f"<li>{esc(e['invoke'].get('f'))} #{esc(e['ok'].get('index'))} by process "
                        f"{esc(e['ok'].get('process'))}: granted a lease {esc(kind)} ({esc(e.get('left_ms'))} ms left "
                        f"when it returned, after {esc(e.get('took_ms'))} ms)</li>" for kind, e in stale)
        out.append(f"<p>Leases granted stale or too long:</p><ul>{items}</ul>")
    held = ((checkers.get("held") or {}).get("details") or {}).get("findings") or []
    if held:
        out.append("<p class='bad'>The client denied holding a lock it had just been granted:</p><ul>"
                   + "".join(f"<li>{esc(f.get('words'))}</li>" for f in held) + "</ul>")
    gdet = (checkers.get("grants") or {}).get("details") or {}
    linger = gdet.get("lingering") or []
    if linger:
        out.append("<p>Releases that answered fail or info while their lease was valid, after which nobody could "
                   "take the lock until it ran out:</p><ul>" + "".join(
                       f"<li>release #{esc(x['release'].get('index'))} by process {esc(x['release'].get('process'))}: "
                       f"next grant {esc(x.get('lingered_s'))} s later</li>" for x in linger) + "</ul>")
    for d in gdet.get("duplicates") or []:
        out.append(f"<p>Fencing token {esc(d.get('token'))} was granted twice (acquires #{esc(d['first'].get('index'))} "
                   f"and #{esc(d['again'].get('index'))}).</p>")
    return "".join(out)
