"""Which checkers a run gets, and how their verdicts make the run's verdict.

The verdict is the worst of the judged checkers (False beats "unknown" beats True). With
fencing the question is whether the data stayed safe, so mutual exclusion is measured
and reported but does not decide. A run that crashed, never started or completed no
critical section proved nothing: it is never VALID (`unknown_reason` says why).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from harness.core.contracts.checker import INAPPLICABLE, PARTIAL, UNKNOWN, CheckResult, merge_valid, safe_check
from harness.checker.keys import per_key
from harness.checker.kinds import check_exclusion, check_linearizable_lock
from harness.checker.leases import check_fresh_leases, check_grants, check_held, check_outlived
from harness.checker.liveness import check_liveness
from harness.checker.linearizable import LinearizableChecker
from harness.checker.alive import check_alive
from harness.checker.timeouts import check_timeouts
from harness.checker.noticed import check_noticed
from harness.checker.properties import check_reentrancy
from harness.checker.replayed import check_replayed, planned
from harness.checker.lock import check_stats, check_writes
from harness.core.history import Op


@dataclass(frozen=True, slots=True, kw_only=True)
class Entry:
    """One checker of the registry: its name in results.json, the check (a function of
    (spec, history) -> CheckResult), and whether its verdict decides the run's: True, False,
    or FINDINGS (a finding fails the run; an "unknown" makes the run unknown unless the
    checker says it judged what it could and left only some items unjudged, or that its
    promise does not apply to this run: see `finding_counts`)."""

    name: str
    check: Callable[[Any, Sequence[Op]], CheckResult]
    decides: bool | str
    # for a checker with a time budget: the check with another budget in seconds
    # (`chaos check --time-limit`); None for a linear one
    budget: Callable[[float], Callable[[Any, Sequence[Op]], CheckResult]] | None = None


FINDINGS = "findings"  # Entry.decides: what the checker found decides; so does its crash


def finding_counts(r: CheckResult, *, finding: bool = True) -> bool:
    """Whether a deciding checker's verdict counts in the run's verdict.

    True and False count. "unknown" counts (the run is unknown) unless the checker said why it
    may be left out: its promise does not apply to this run (`details["inapplicable"]`: a
    client with no opinion of its own, holders that touched no resource), or, for a FINDINGS
    checker, it judged every item it could and the rest legitimately could not be judged
    (`details["partial"]`: a death blurred by another fault). A checker that crashed
    (safe_check's result) or could not run never says either: it counts, so the run is never
    VALID on a promise nobody judged."""
    if r.valid is True or r.valid is False:
        return True
    d = r.details if isinstance(r.details, dict) else {}
    excused = r.valid == UNKNOWN and not (r.error and "traceback" in d) and \
        ((finding and d.get(PARTIAL)) or d.get(INAPPLICABLE))
    return not excused


def why_not_judged(r: CheckResult) -> str | None:
    """A checker's own reason for a verdict that is neither true nor false (None for one that is)."""
    if r.valid is True or r.valid is False:
        return None
    d = r.details if isinstance(r.details, dict) else {}
    why = r.error or d.get("reason") or d.get(PARTIAL) or d.get(INAPPLICABLE)
    if r.valid != UNKNOWN:
        why = f"its verdict {r.valid!r} is not one" + (f"; {why}" if why else "")
    return why or "it gave no reason"


def _linearizable_model(spec: Any) -> Entry:
    model = "fenced-register" if getattr(spec, "fencing", False) else "register"
    return Entry(name=f"linearizable-{model}", check=LinearizableChecker(model, time_limit=TIME_LIMIT_S), decides=True,
                 budget=lambda t: LinearizableChecker(model, time_limit=t))


def _linearizable_mutex(spec: Any) -> Entry:
    # the model is the lock kind the history's acquires carry (harness/checker/kinds.py)
    return Entry(name="linearizable-mutex", check=check_linearizable_lock, decides=not getattr(spec, "fencing", False),
                 budget=lambda t: functools.partial(check_linearizable_lock, time_limit=t))


TIME_LIMIT_S = 10.0  # a run's budget for each linearizability search (chaos check --time-limit sets another)


# The registry: one line per checker, each a function of the spec giving its Entry, or None
# when the checker does not apply to this run. With fencing on, the question is whether the
# data stayed safe: mutual exclusion (which fencing cannot give) is reported, not judged.
REGISTRY: tuple[Callable[[Any], Entry | None], ...] = (
    lambda spec: Entry(name="mutex", check=per_key(check_exclusion), decides=not getattr(spec, "fencing", False)),
    lambda spec: Entry(name="writes", check=per_key(check_writes), decides=True),
    lambda spec: Entry(name="stats", check=check_stats, decides=False),
    _linearizable_mutex,
    _linearizable_model,
    lambda spec: Entry(name="reentrancy", check=check_reentrancy, decides=True) if getattr(spec, "reenter", False) else None,
    # The lock's other promises (harness/checker/liveness.py, leases.py): a stuck or starved
    # lock fails the run; so does a dead holder's lock that outlived its lease, and a lease
    # granted already expired or longer than asked (where these cannot be judged, they say
    # "unknown" without making the run's verdict unknown: a death blurred by another fault).
    lambda spec: Entry(name="liveness", check=check_liveness, decides=True),
    lambda spec: Entry(name="outlived", check=check_outlived, decides=FINDINGS),
    lambda spec: Entry(name="fresh-leases", check=check_fresh_leases, decides=FINDINGS),
    lambda spec: Entry(name="held", check=check_held, decides=FINDINGS),
    lambda spec: Entry(name="noticed", check=check_noticed, decides=FINDINGS),
    lambda spec: Entry(name="timeouts", check=check_timeouts, decides=FINDINGS),
    # an external client process that died of its own error (the in-process clients cannot)
    lambda spec: Entry(name="alive", check=check_alive, decides=True) if getattr(spec, "backend", None) == "external" else None,
    lambda spec: Entry(name="grants", check=check_grants, decides=False),
    # a replay that applied none of its recorded faults proves nothing about them
    lambda spec: Entry(name="replayed", check=check_replayed, decides=True) if planned(spec) else None,
)


def entries(spec: Any) -> list[Entry]:
    """Every checker that applies to a run, in registry order."""
    return [e for make in REGISTRY if (e := make(spec)) is not None]


def checkers(spec: Any, time_limit: float | None = None) -> list[tuple[str, Any]]:
    """(name, fn) of every checker a run applies to its own history; with `time_limit`, each
    budgeted one gets that budget (seconds)."""
    return [(e.name, e.budget(time_limit) if time_limit is not None and e.budget is not None else e.check)
            for e in entries(spec)]


def judged(spec: Any) -> set[str]:
    """Which checkers decide the verdict."""
    return {e.name for e in entries(spec) if e.decides}


def verdicts(spec: Any, history: Sequence[Op], time_limit: float | None = None) -> dict[str, CheckResult]:
    return {name: safe_check(fn, spec, history, name=name) for name, fn in checkers(spec, time_limit)}


def unknown_reason(summary: dict, outcome: dict) -> str | None:
    """Why a run that no checker faulted still cannot be called valid, or None if it can.

    A run that crashed, or in which no critical section completed, proves nothing about
    mutual exclusion: it is "unknown", never VALID. (A violation it did prove stands.) A run
    whose history lost ops (`ops_lost` in outcome.json) proves nothing either way: it is
    "unknown", never VALID nor INVALID."""
    if outcome.get("ops_lost"):
        return lost_ops_reason(outcome["ops_lost"])
    if outcome.get("workers_died"):
        return (f"worker(s) {', '.join(map(str, outcome['workers_died']))} were ended by a signal from outside the "
                f"harness: a lock such a worker held looks held for ever, so the history cannot prove a violation, "
                f"nor that none happened")
    if summary.get("writes_missing"):
        return (f"the counter counts {summary['writes_missing']} more write(s) than the history records: ops are "
                f"missing from the history, so it cannot prove a violation, nor that none happened")
    if outcome.get("aborted"):
        return f"the run did not finish: {outcome['aborted']}"
    if outcome.get("started") is False:
        return "the cluster never came up"
    if not summary.get("critical_sections"):
        counts = [summary.get(k) or 0 for k in ("acquires_ok", "acquires_fail", "acquires_info")]
        how = f" (acquires ok/fail/info {'/'.join(map(str, counts))})" if any(counts) else " (no acquire was made)"
        return f"no critical section completed{how}, so there is nothing to judge"
    return None


def lost_ops_reason(n: Any) -> str:
    return (f"{n} op(s) the clients recorded never reached the history (a worker was killed before it handed "
            f"them in): a lost release looks like a holder that never let go, so the history cannot prove a "
            f"violation, nor that none happened")


def undecided(results: dict[str, CheckResult], judge: set[str], findings: set[str]) -> str:
    """Why the checkers' verdict is unknown: each deciding checker that said neither true nor
    false, with its own reason (its error, or the reason in its details)."""
    said = []
    for name, r in results.items():
        if name not in judge or r.valid is True or r.valid is False or not finding_counts(r, finding=name in findings):
            continue
        said.append(f"checker {name} could not decide ({why_not_judged(r)})")
    return "; ".join(said) or "the checkers could not decide"


def _merged_summaries(results: dict[str, CheckResult], taken: set[str]) -> dict[str, Any]:
    """The checkers' summary keys in one dict. A key two or more checkers share is also named
    by each checker (`linearizable-mutex.invalid_keys`), and stays plain only when they agree,
    so no checker's value reads as another's (or as the run's)."""
    by_key: dict[str, list[tuple[str, Any]]] = {}
    for name, r in results.items():
        for k, v in (r.summary or {}).items():
            by_key.setdefault(k, []).append((name, v))
    out: dict[str, Any] = {}
    for k, said in by_key.items():
        if k in taken:
            continue
        if len(said) > 1:
            out.update({f"{name}.{k}": v for name, v in said})
            if any(v != said[0][1] for _, v in said):
                continue
        out[k] = said[0][1]
    return out


def summarize(spec: Any, results: dict[str, CheckResult], run_dir: Path | None,
              outcome: dict | None = None) -> dict:
    judge = judged(spec)
    findings = {e.name for e in entries(spec) if e.decides == FINDINGS}
    valid = merge_valid([r.valid for n, r in results.items() if n in judge and finding_counts(r, finding=n in findings)])
    s: dict[str, Any] = {"valid": valid}
    mutex = results.get("mutex")
    s["violations"] = mutex.summary.get("violations") if mutex else None
    s.update(_merged_summaries(results, taken=set(s)))
    outcome = outcome or {}  # how the run ended (harness.engine.analysis.read_outcome), {} if unknown
    reason = unknown_reason(s, outcome)
    holes = outcome.get("ops_lost") or outcome.get("workers_died") or s.get("writes_missing")
    if reason and (valid is not False or holes):  # a history with holes proves nothing either way
        s["valid"] = UNKNOWN
        s["unknown_reason"] = reason
    elif s["valid"] == UNKNOWN:  # a checker that decides could not: say which, and why
        s["unknown_reason"] = undecided(results, judge, findings)
    if outcome.get("interrupted"):
        s["interrupted"] = True
        if outcome.get("signal"):
            s["interrupted_by"] = outcome["signal"]  # SIGINT (Ctrl-C) or SIGTERM
    s.update(backend=getattr(spec, "backend", None), nemesis=list(getattr(spec, "nemesis", ()) or ["none"]),
             seed=getattr(spec, "seed", None), fencing=getattr(spec, "fencing", None),
             run_dir=str(run_dir) if run_dir else None,
             checkers={n: r.valid for n, r in results.items()},
             # every row that is neither true nor false, with its own reason
             not_judged={n: why_not_judged(r) for n, r in results.items() if why_not_judged(r)})
    return s


