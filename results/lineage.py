"""Which run a shrink started from and which run it ended at, for the report and the index.

`chaos shrink ORIGINAL` writes ORIGINAL/shrink.json (its search: "best_run", the smallest
schedule's last replay, "best", "best_outcomes", "start") and, when something smaller
reproduced, BEST/shrunk-from.json ({"of": ORIGINAL, "shrink": ORIGINAL/shrink.json}). Both
files are read here, never written; a file that is missing, unreadable, not ours or that
resolves outside its run dir gives no link (a broken link would point the reader nowhere).

A run named in them is found by its path, or else, for a path that was relative to the
shrink's working directory, as the same <test>/<timestamp> in this run's store.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from harness.core.errors import BadArgument
from harness.core.safefile import read_inside
from results.svg import esc

SHRINK = "shrink.json"
SHRUNK_FROM = "shrunk-from.json"


@dataclass(frozen=True, slots=True, kw_only=True)
class Lineage:
    """A run's links: the run its shrink ended at (`shrunk_to`) and the run it was shrunk
    from (`shrunk_from`), each an existing run dir or None, with a few words on the search."""

    shrunk_to: Path | None = None
    shrunk_from: Path | None = None
    words: str = ""

    def __bool__(self) -> bool:
        return self.shrunk_to is not None or self.shrunk_from is not None


def _doc(run_dir: Path, name: str) -> dict | None:
    try:
        doc = json.loads(read_inside(run_dir, run_dir / name).decode("utf-8", errors="replace"))
    except (OSError, ValueError, BadArgument):
        return None
    return doc if isinstance(doc, dict) else None


def _find(run_dir: Path, named) -> Path | None:
    """The run dir `named` (a path as a shrink recorded it), or None when it is not a run dir."""
    if not isinstance(named, str) or not named:
        return None
    p = Path(named)
    candidates = [p] if p.is_absolute() else [Path(run_dir).resolve().parent.parent / p.parent.name / p.name, p]
    for c in candidates:
        if (c / "history.jsonl").is_file():
            return c.resolve()
    return None


def _faults(d: dict) -> int | None:
    fs = d.get("faults") if isinstance(d, dict) else None
    return len(fs) if isinstance(fs, list) else None


def lineage(run_dir: Path) -> Lineage:
    """The shrink links of run_dir (see the module docstring); empty when it has none."""
    run_dir = Path(run_dir)
    to = frm = None
    said = []
    if (shrink := _doc(run_dir, SHRINK)) is not None:
        to = _find(run_dir, shrink.get("best_run"))
        if to is not None and to == run_dir.resolve():
            to = None  # nothing smaller reproduced: the best is the original itself
        said.append(_search_words(shrink, found=to is not None))
    if (back := _doc(run_dir, SHRUNK_FROM)) is not None:
        frm = _find(run_dir, back.get("of"))
        if frm is not None and frm == run_dir.resolve():
            frm = None  # not its own origin (a file copied or written through a moved link)
        if frm is not None and (orig := _doc(frm, SHRINK)) is not None:
            said.append(_search_words(orig, found=True))
    return Lineage(shrunk_to=to, shrunk_from=frm, words="; ".join(filter(None, said)))


def _search_words(doc: dict, *, found: bool) -> str:
    """E.g. "3 faults -> 1, reproduced in 3 of 3 (chaos shrink, 3 trials at 0.67)"."""
    start, best = _faults(doc.get("start", {})), _faults(doc.get("best", {}))
    outcomes = doc.get("best_outcomes") if isinstance(doc.get("best_outcomes"), list) else []
    parts = []
    if found and start is not None and best is not None:
        parts.append(f"{start} fault{'s' if start != 1 else ''} -> {best}")
    elif found and best is not None:
        parts.append(f"{best} fault{'s' if best != 1 else ''}")
    elif not found:
        parts.append("nothing smaller reproduced")
    if outcomes:
        parts.append(f"reproduced in {sum(1 for o in outcomes if o is True)} of {len(outcomes)}")
    if doc.get("interrupted") is True:
        parts.append("interrupted: the best so far")
    return ", ".join(parts)


def shrink_section(run_dir: Path) -> str:
    """The report's section on its shrink (relative links between the run dirs' reports), or ""."""
    run_dir = Path(run_dir)
    lin = lineage(run_dir)
    if not lin and not (run_dir / SHRINK).exists():
        return ""
    here = run_dir.resolve()

    def link(target: Path, text: str) -> str:
        page = target / "report.html"
        href = os.path.relpath(page if page.exists() else target / "results.json", here)
        return f"<a href=\"{esc(href)}\">{esc(text)}</a>"

    lines = []
    if lin.shrunk_from is not None:
        lines.append(f"Shrunk from {link(lin.shrunk_from, _name(lin.shrunk_from))}: this run replays the smallest "
                     f"schedule <code>chaos shrink</code> found for it.")
    if lin.shrunk_to is not None:
        lines.append(f"Shrunk to {link(lin.shrunk_to, _name(lin.shrunk_to))} by <code>chaos shrink</code> "
                     f"(<a href=\"{SHRINK}\">{SHRINK}</a>).")
    elif (run_dir / SHRINK).exists():
        lines.append(f"<code>chaos shrink</code> found nothing smaller (<a href=\"{SHRINK}\">{SHRINK}</a>).")
    if lin.words:
        lines.append(f"<span class='note'>{esc(lin.words)}</span>")
    return "<p>" + "<br>".join(lines) + "</p>"


def _name(run: Path) -> str:
    return f"{run.parent.name}/{run.name}"

