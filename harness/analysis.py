"""From a recorded history to results.json, ops.csv and the one-line summary.

Used by `chaos run` after every run and by `chaos check`/`chaos report` on a stored run,
so a verdict can always be recomputed from the history alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from harness.checker.base import CheckResult, merge_valid, safe_check
from harness.checker.lock import check_mutex, check_stats, check_writes, lease_history
from harness.history import Op, read_history
from results import store


def checkers(spec: Any) -> list[tuple[str, Any]]:
    """(name, fn) of every checker a run applies to its own history."""
    out = [("mutex", check_mutex), ("writes", check_writes), ("stats", check_stats)]
    try:
        from harness.checker.linearizable import LinearizableChecker

        mutex = LinearizableChecker("mutex", time_limit=10.0)
        out.append(("linearizable-mutex", lambda spec, h: mutex.check(spec, lease_history(h))))
        model = "fenced-register" if getattr(spec, "fencing", False) else "register"
        out.append((f"linearizable-{model}", LinearizableChecker(model, time_limit=10.0)))
    except ImportError:
        pass
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


def summarize(spec: Any, results: dict[str, CheckResult], run_dir: Path | None) -> dict:
    judge = judged(spec)
    valid = merge_valid([r.valid for n, r in results.items() if n in judge])
    s: dict[str, Any] = {"valid": valid}
    mutex = results.get("mutex")
    s["violations"] = mutex.summary.get("violations") if mutex else None
    for r in results.values():
        for k, v in r.summary.items():
            s.setdefault(k, v)
    s.update(backend=getattr(spec, "backend", None), nemesis=list(getattr(spec, "nemesis", ()) or ["none"]),
             seed=getattr(spec, "seed", None), fencing=getattr(spec, "fencing", None),
             run_dir=str(run_dir) if run_dir else None,
             checkers={n: r.valid for n, r in results.items()})
    return s


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
    try:
        from results.report import write_report

        write_report(run_dir, spec, history, doc)
    except ImportError:
        pass
    return doc
