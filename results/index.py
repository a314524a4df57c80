"""store/index.html: every run in the store, newest first, each linked to its report, and above
them every `chaos audit` card (store/audit/<timestamp>/), linked to its audit.html.

A run is a directory store/<test>/<timestamp>/ holding results.json. Only the "summary"
object of each results.json is read, and only from the start of the file (analyse writes it
first), so the index stays quick with many runs of 100k ops. The page is self-contained,
like the reports, and every name and value in it is escaped. A results.json that resolves
outside its run dir is not read (the run shows as unreadable), and a run whose summary says
it was interrupted is marked INTERRUPTED beside its verdict: its history is only a prefix.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from urllib.parse import quote

from harness.core.contracts.checker import verdict_word
from harness.core.errors import BadArgument
from harness.core.safefile import open_inside, write_atomic
from results.svg import esc

_STAMP = re.compile(r"^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})(?:-\d+)?$")
_HEAD = 65536


def read_summary(results_json: Path) -> dict | None:
    """The "summary" of a results.json without parsing the rest; None if unreadable, and if
    it resolves outside its run dir or is not a regular file (it is then not read)."""
    try:
        with open_inside(Path(results_json).parent, results_json) as f:
            raw = f.read(_HEAD)
            found = _summary_in(raw.decode("utf-8", errors="replace"))
            if found is not None:
                return found
            raw += f.read()
        doc = json.loads(raw.decode("utf-8", errors="replace"))
        return doc.get("summary") if isinstance(doc, dict) else None
    except (OSError, ValueError, BadArgument):
        return None


def _summary_in(head: str) -> dict | None:
    """The summary object at the start of a results.json's text, or None if it is not there whole."""
    at = head.find('"summary"')
    if at < 0:
        return None
    try:
        colon = head.index(":", at)
        start = colon + 1 + (len(head[colon + 1:]) - len(head[colon + 1:].lstrip()))
        obj, _ = json.JSONDecoder().raw_decode(head, start)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def _when(run: Path) -> tuple[float, str]:
    m = _STAMP.match(run.name)
    if m:
        y, mo, d, h, mi, s = (int(g) for g in m.groups())
        t = time.mktime((y, mo, d, h, mi, s, 0, 0, -1))
        return t, f"{y:04d}-{mo:02d}-{d:02d} {h:02d}:{mi:02d}:{s:02d}"
    t = run.stat().st_mtime
    return t, time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def runs(store_dir: Path) -> list[dict]:
    """One row per run dir under store_dir, newest first."""
    out = []
    for test in sorted(p for p in Path(store_dir).iterdir() if p.is_dir() and not p.is_symlink()):
        for run in test.iterdir():
            if not run.is_dir() or run.is_symlink() or not (run / "results.json").exists():
                continue
            t, label = _when(run)
            out.append({"test": test.name, "run": run.name, "t": t, "when": label,
                        "summary": read_summary(run / "results.json"),
                        "report": (run / "report.html").exists(), "lineage": _lineage(run)})
    out.sort(key=lambda r: (r["t"], r["run"]), reverse=True)
    return out


AUDIT_DIR, AUDIT_MAX_BYTES = "audit", 4 << 20  # store/audit/<timestamp>/audit.json (chaos audit's card)


def audits(store_dir: Path) -> list[dict]:
    """One row per `chaos audit` card under store_dir/audit/, newest first: its client, the
    counts of its rows by status, its exit code; an unreadable card is a row that says so
    (read only inside its dir, never through a link, at most AUDIT_MAX_BYTES)."""
    top = Path(store_dir) / AUDIT_DIR
    if not top.is_dir() or top.is_symlink():
        return []
    out = []
    for d in top.iterdir():
        if not d.is_dir() or d.is_symlink() or not (d / "audit.json").exists():
            continue
        t, label = _when(d)
        doc = None
        try:
            with open_inside(d, d / "audit.json") as f:
                doc = json.loads(f.read(AUDIT_MAX_BYTES + 1)[:AUDIT_MAX_BYTES].decode("utf-8", errors="replace"))
        except (OSError, ValueError, BadArgument):
            pass
        if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list):
            doc = None
        out.append({"run": d.name, "t": t, "when": label, "doc": doc, "html": (d / "audit.html").exists()})
    out.sort(key=lambda r: (r["t"], r["run"]), reverse=True)
    return out


def _audit_rows(store_dir: Path) -> str:
    """The audits table, or "" when the store has none."""
    found = audits(store_dir)
    if not found:
        return ""
    rows = []
    for a in found:
        href = esc(f"{AUDIT_DIR}/{quote(a['run'])}/" + ("audit.html" if a["html"] else "audit.json"))
        doc = a["doc"]
        if doc is None:
            rows.append(f"<tr><td>{esc(a['when'])}</td><td colspan='4' class='mute'>audit.json unreadable</td>"
                        f"<td><a href=\"{href}\">open</a></td></tr>")
            continue
        status = [r.get("status") for r in doc["rows"] if isinstance(r, dict)]
        fails = status.count("FAIL")
        cls, word = ("invalid", f"{fails} FAIL") if fails else ("valid", "PASS") if "PASS" in status else \
            ("unknown", "NOTHING JUDGED")
        if doc.get("interrupted"):
            word += " · INTERRUPTED"
        failed = ", ".join(str(r.get("title")) for r in doc["rows"] if isinstance(r, dict) and r.get("status") == "FAIL")
        rows.append(f"<tr class='{cls}'><td>{esc(a['when'])}</td><td>{esc(str(doc.get('client')))}</td>"
                    f"<td><span class='badge {cls}'>{esc(word)}</span></td><td class='{'bad' if fails else ''}'>"
                    f"{esc(failed) or '—'}</td><td>{status.count('PASS')} pass · {status.count('NOT TESTED')} not tested"
                    f" · {len(doc.get('runs') or [])} runs</td><td><a href=\"{href}\">card</a></td></tr>")
    return (f"<h2>Audits <span class='mute'>{len(found)}</span></h2><table><thead><tr><th>time</th><th>client</th>"
            f"<th>card</th><th>failed promises</th><th>rows</th><th></th></tr></thead><tbody>{''.join(rows)}"
            f"</tbody></table><h2>Runs</h2>")


def _lineage(run: Path):
    """The run's shrink links (results/lineage.py), read only when it has a shrink file."""
    from results.lineage import SHRINK, SHRUNK_FROM, lineage

    if (run / SHRINK).exists() or (run / SHRUNK_FROM).exists():
        return lineage(run)
    return None


def _shrink_note(lin, store_dir: Path) -> str:
    """ "shrunk from X" / "shrunk to Y" under a run's test name, linked when Y is in this store."""
    if not lin:
        return ""
    root = store_dir.resolve()
    out = []
    for word, target in (("shrunk from", lin.shrunk_from), ("shrunk to", lin.shrunk_to)):
        if target is None:
            continue
        name = f"{target.parent.name}/{target.name}"
        if target.is_relative_to(root):
            page = "report.html" if (target / "report.html").exists() else "results.json"
            href = "/".join(quote(part) for part in target.relative_to(root).parts) + "/" + page
            out.append(f"{word} <a href=\"{esc(href)}\">{esc(name)}</a>")
        else:
            out.append(f"{word} {esc(name)}")
    return "".join(f"<br><span class='mute shrink'>{x}</span>" for x in out)


def _verdict(valid) -> tuple[str, str]:
    """(word, css class) of a verdict."""
    word = verdict_word(valid)
    return word, word.lower()


def _cell(v) -> str:
    if v is None:
        return "—"
    if isinstance(v, list):
        return esc("+".join(map(str, v)) or "none")
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return esc(v)


def render_index(store_dir: Path) -> str:
    """The index page of store_dir as a string (`chaos serve` serves it fresh)."""
    store_dir = Path(store_dir)
    rows = []
    all_runs = runs(store_dir)
    for r in all_runs:
        s = r["summary"]
        href = esc(f"{quote(r['test'])}/{quote(r['run'])}/" + ("report.html" if r["report"] else "results.json"))
        if s is None:
            rows.append(f"<tr><td>{esc(r['when'])}</td><td>{esc(r['test'])}</td><td colspan='8' class='mute'>"
                        f"results.json unreadable</td><td><a href=\"{href}\">open</a></td></tr>")
            continue
        word, cls = _verdict(s.get("valid"))
        if s.get("interrupted") is True:  # a prefix of a run: never a plain VALID or INVALID
            word += " · INTERRUPTED"
        viol = s.get("violations")
        rows.append(
            f"<tr class='{cls}'><td>{esc(r['when'])}</td><td>{esc(r['test'])}{_shrink_note(r['lineage'], store_dir)}</td>"
            f"<td>{_cell(s.get('backend'))}</td>"
            f"<td>{_cell(s.get('nemesis'))}</td><td>{_cell(s.get('seed'))}</td>"
            f"<td><span class='badge {cls}'>{word}</span></td>"
            f"<td class='{'bad' if viol else ''}'>{_cell(viol)}</td><td>{_cell(s.get('stale_writes_accepted'))}</td>"
            f"<td>{_cell(s.get('ops'))}</td><td>{_cell(s.get('duration_s'))}</td>"
            f"<td><a href=\"{href}\">{'report' if r['report'] else 'results'}</a></td></tr>")
    counts = {k: sum(1 for r in all_runs if r["summary"] and _verdict(r["summary"].get("valid"))[1] == k)
              for k in ("valid", "invalid", "unknown")}
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>chaoslock runs</title><style>{CSS}</style></head><body>
<h1>chaoslock runs <span class="mute">{len(all_runs)} in {esc(store_dir.name)}/ ·
{counts['valid']} valid · {counts['invalid']} invalid · {counts['unknown']} unknown</span></h1>
{_audit_rows(store_dir)}<table><thead><tr><th>time</th><th>test</th><th>backend</th><th>nemesis</th><th>seed</th><th>verdict</th>
<th>violations</th><th>stale writes accepted</th><th>ops</th><th>duration (s)</th><th></th></tr></thead>
<tbody>{''.join(rows) or "<tr><td colspan='11' class='mute'>No runs yet: try chaos run.</td></tr>"}</tbody></table>
<p class="mute">Newest first. Regenerated after every run; <code>chaos serve</code> serves this directory.</p>
</body></html>"""


def write_index(store_dir: Path) -> Path:
    """Replace store_dir/index.html with the list of every run (never writing through a
    link: harness/core/safefile.py); return its path."""
    return write_atomic(Path(store_dir) / "index.html", render_index(store_dir))


CSS = """
body{margin:24px;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;color:#24292f;background:#f4f6f8}
h1{font-size:20px}h2{font-size:16px}.mute{color:#6a737d;font-weight:400;font-size:14px}
table{border-collapse:collapse;width:100%;background:#fff;border:1px solid #e3e6ea}
th,td{text-align:left;padding:6px 10px;border-bottom:1px solid #e3e6ea}th{color:#6a737d;font-size:12px}
tr.invalid td:first-child{border-left:5px solid #d62728}tr.valid td:first-child{border-left:5px solid #1e8e3e}
tr.unknown td:first-child{border-left:5px solid #c77c02}
.badge{color:#fff;font-weight:700;font-size:11px;padding:2px 7px;border-radius:4px;background:#c77c02}
.badge.valid{background:#1e8e3e}.badge.invalid{background:#d62728}.bad{color:#d62728;font-weight:600}
a{color:#0b62c4}
"""
