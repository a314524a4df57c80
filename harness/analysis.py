"""From a recorded history to results.json, ops.csv and the one-line summary.

Used by `chaos run` after every run and by `chaos check`/`chaos report` on a stored run,
so a verdict can always be recomputed from the history alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from harness.checker.base import UNKNOWN, CheckResult, merge_valid, safe_check
from harness.checker.lock import check_mutex, check_stats, check_writes, lease_history
from harness.history import Op, read_history
from results import store

OUTCOME = "outcome.json"  # written by the runner: {"interrupted", "started", "aborted"}


def checkers(spec: Any) -> list[tuple[str, Any]]:
    """(name, fn) of every checker a run applies to its own history."""
    # Imported here, not guarded: a checker that cannot load must crash the check, never
    # drop out of it and leave a narrower verdict that reads VALID.
    from harness.checker.linearizable import LinearizableChecker

    out = [("mutex", check_mutex), ("writes", check_writes), ("stats", check_stats)]
    mutex = LinearizableChecker("mutex", time_limit=10.0)
    out.append(("linearizable-mutex", lambda spec, h: mutex.check(spec, lease_history(h))))
    model = "fenced-register" if getattr(spec, "fencing", False) else "register"
    out.append((f"linearizable-{model}", LinearizableChecker(model, time_limit=10.0)))
    return out


def judged(spec: Any) -> set[str]:
    """Which checkers decide the verdict. With fencing on, the question is whether the data
    stayed safe; mutual exclusion (which fencing cannot give) is still reported."""
    base = {"writes", "linearizable-fenced-register", "linearizable-register"}
    if not getattr(spec, "fencing", False):
        base |= {"mutex", "linearizable-mutex"}
    return base


def verdicts(spec: Any, history: Sequence[Op]) -> dict[str, CheckResult]:
    return {name: safe_check(fn, spec, history, name=name) for name, fn in checkers(spec)}


def read_outcome(run_dir: Path | None) -> dict:
    """How a stored run ended, from its outcome.json (written by the runner before it
    checks); {} for a history without one. A file that is not an object counts as absent."""
    import json

    if run_dir is None:
        return {}
    try:
        doc = json.loads((Path(run_dir) / OUTCOME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def unknown_reason(summary: dict, outcome: dict) -> str | None:
    """Why a run that no checker faulted still cannot be called valid, or None if it can.

    A run that crashed, or in which no critical section completed, proves nothing about
    mutual exclusion: it is "unknown", never VALID. (A violation it did prove stands.)"""
    if outcome.get("aborted"):
        return f"the run did not finish: {outcome['aborted']}"
    if outcome.get("started") is False:
        return "the cluster never came up"
    if not summary.get("critical_sections"):
        return "no critical section completed, so there is nothing to judge"
    return None


def summarize(spec: Any, results: dict[str, CheckResult], run_dir: Path | None,
              outcome: dict | None = None) -> dict:
    judge = judged(spec)
    valid = merge_valid([r.valid for n, r in results.items() if n in judge])
    s: dict[str, Any] = {"valid": valid}
    mutex = results.get("mutex")
    s["violations"] = mutex.summary.get("violations") if mutex else None
    for r in results.values():
        for k, v in r.summary.items():
            s.setdefault(k, v)
    outcome = read_outcome(run_dir) if outcome is None else outcome
    reason = unknown_reason(s, outcome)
    if reason and valid is not False:
        s["valid"] = UNKNOWN
        s["unknown_reason"] = reason
    if outcome.get("interrupted"):
        s["interrupted"] = True
    s.update(backend=getattr(spec, "backend", None), nemesis=list(getattr(spec, "nemesis", ()) or ["none"]),
             seed=getattr(spec, "seed", None), fencing=getattr(spec, "fencing", None),
             run_dir=str(run_dir) if run_dir else None,
             checkers={n: r.valid for n, r in results.items()})
    return s


def unchecked(spec: Any, run_dir: Path, outcome: dict, reason: str) -> dict:
    """The results.json of a run whose checks were skipped: unknown, saying how to check it."""
    summary: dict[str, Any] = dict.fromkeys(("ops", "acquires_ok", "acquires_fail", "acquires_info", "critical_sections",
                                             "p50_acquire_ms", "p99_acquire_ms", "stale_writes_accepted",
                                             "stale_writes_rejected", "lost_updates"))
    summary |= {"valid": UNKNOWN, "unknown_reason": reason, "violations": None, "interrupted": True,
               "backend": getattr(spec, "backend", None), "nemesis": list(getattr(spec, "nemesis", ()) or ["none"]),
               "seed": getattr(spec, "seed", None), "fencing": getattr(spec, "fencing", None),
               "run_dir": str(run_dir), "outcome": outcome}
    doc = {"summary": summary, "checkers": {}}
    store.write_json(run_dir / "results.json", doc)
    return doc


def analyse(spec: Any, run_dir: Path, *, timings: dict | None = None, errors: list[str] | None = None,
            interrupted: bool = False, fallback: str | None = None) -> dict:
    """Check the run dir's history and write results.json and ops.csv there."""
    from results.csv import write_ops_csv

    history = read_history(run_dir / "history.jsonl")
    results = verdicts(spec, history)
    summary = summarize(spec, results, run_dir)
    summary.update(timings or {})
    if interrupted:
        summary["interrupted"] = True
    if errors:
        summary["errors"] = errors
    if fallback:
        summary["netns_fallback"] = fallback
    doc = {"summary": summary, "checkers": {n: r.to_dict() for n, r in results.items()}}
    store.write_json(run_dir / "results.json", doc)
    write_ops_csv(history, run_dir / "ops.csv")
    from results.report import write_report

    write_report(run_dir, spec, history, doc)
    return doc
