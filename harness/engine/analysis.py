"""From a recorded history to results.json, ops.csv and report.html: this module only
reads the run dir and writes files; which checkers run and how their verdicts combine is
harness/checker/policy.py.

Used by `chaos run` after every run and by `chaos check`/`chaos report` on a stored run,
so a verdict can always be recomputed from the history alone.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.core.contracts.checker import UNKNOWN
from harness.checker.policy import summarize, verdicts
from harness.core.history import read_history
from results import store

OUTCOME = "outcome.json"  # written by the runner: {"run_id", "interrupted", "started", "aborted"[, "signal"]}


def read_outcome(run_dir: Path | None) -> dict:
    """How a stored run ended, from its outcome.json (written by the runner before it
    checks); {} for a history without one. A file that is not an object counts as absent;
    one that resolves outside the run dir, or is not a regular file, is a BadArgument (it is
    not read, and treating it as absent could pass a crashed run's history as VALID)."""
    from harness.core.safefile import read_inside

    if run_dir is None:
        return {}
    try:
        doc = json.loads(read_inside(run_dir, Path(run_dir) / OUTCOME).decode("utf-8"))
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def unchecked(spec: Any, run_dir: Path, outcome: dict, reason: str) -> dict:
    """The results.json of a run whose checks were skipped: unknown, saying how to check it."""
    summary: dict[str, Any] = dict.fromkeys(("ops", "acquires_ok", "acquires_fail", "acquires_info", "critical_sections",
                                             "p50_acquire_ms", "p99_acquire_ms", "stale_writes_accepted",
                                             "stale_writes_rejected", "lost_updates", "stuck", "starved",
                                             "outlived_holder_s", "expired_grants", "availability"))
    summary |= {"valid": UNKNOWN, "unknown_reason": reason, "violations": None, "interrupted": True,
               "backend": getattr(spec, "backend", None), "nemesis": list(getattr(spec, "nemesis", ()) or ["none"]),
               "seed": getattr(spec, "seed", None), "fencing": getattr(spec, "fencing", None),
               "run_dir": str(run_dir), "outcome": outcome}
    if outcome.get("signal"):
        summary["interrupted_by"] = outcome["signal"]  # SIGINT (Ctrl-C) or SIGTERM
    doc = {"summary": summary, "checkers": {}}
    store.write_json(run_dir / "results.json", doc)
    return doc


def analyse(spec: Any, run_dir: Path, *, timings: dict | None = None, errors: list[str] | None = None,
            interrupted: bool = False, fallback: str | None = None, store_dir: str | None = None) -> dict:
    """Check the run dir's history and write results.json and ops.csv there, and its report
    (`store_dir`: the store the run was run in, whose index the report refreshes; never the
    store a spec read from the run dir names)."""
    from results.csv import write_ops_csv

    history = read_history(run_dir)  # a run dir: its history.jsonl must resolve inside it
    results = verdicts(spec, history)
    summary = summarize(spec, results, run_dir, read_outcome(run_dir))
    summary.update(timings or {})
    if interrupted:
        summary["interrupted"] = True
    if errors:
        summary["errors"] = errors
    if fallback:
        summary["netns_fallback"] = fallback
    doc = {"summary": summary, "checkers": {n: r.to_dict() for n, r in results.items()}}
    store.write_json(run_dir / "results.json", doc)
    mutex = results.get("mutex")
    write_ops_csv(history, run_dir / "ops.csv", (mutex.details or {}).get("causes", ()) if mutex else (),
                  dict(getattr(spec, "facts", None) or {}))
    from results.report import write_report

    write_report(run_dir, spec, history, doc, store=store_dir)
    return doc
