"""Did a replay replay anything? (`chaos run --replay`, `chaos shrink`)

A replay runs the faults a run dir recorded (spec.facts["replay"]); a fault that cannot be
applied in the replay's cluster (a node that is down, a worker that holds nothing when a
reactive fault looks for a holder) ends `fail` or `info`. A replay in which none of them took
effect ran the workload without its faults: whatever it shows, it is not the recorded
schedule, so it proves nothing about it and its verdict is "unknown", with the reason.
"""

from __future__ import annotations

from typing import Any, Sequence

from harness.core.contracts.checker import UNKNOWN, CheckResult
from harness.core.history import NEMESIS, Op


def planned(spec: Any) -> list[dict]:
    """The faults the replay was asked to run (empty for a run that is not a replay)."""
    replay = (getattr(spec, "facts", None) or {}).get("replay") or {}
    faults = replay.get("faults") if isinstance(replay, dict) else None
    return [f for f in faults or () if isinstance(f, dict)]


def check_replayed(spec: Any, history: Sequence[Op]) -> CheckResult:
    faults = planned(spec)
    kinds = {str(f.get("f")) for f in faults}
    done = [o for o in history if o.process == NEMESIS and o.type != "invoke" and o.f in kinds]
    applied = [o for o in done if o.type == "ok"]
    missed = [o for o in done if o.type != "ok"]
    summary = {"replay_faults": len(faults), "replay_faults_applied": len(applied)}
    if not faults or applied:
        return CheckResult(name="replayed", valid=True, summary=summary,
                           details={"missed": [{"f": o.f, "error": o.error} for o in missed[:20]]})
    why = f"; the first: {missed[0].f} {missed[0].type}: {missed[0].error}" if missed else \
        "; none was even tried (the workload ended first)"
    return CheckResult(name="replayed", valid=UNKNOWN, summary=summary,
                       error=f"the replay applied none of its {len(faults)} recorded fault(s){why}",
                       details={"missed": [{"f": o.f, "error": o.error} for o in missed[:20]]})
