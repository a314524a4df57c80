"""How closely does the linearizability checker keep its time budget?

    python benchmarks/checker_budget.py [--json] [--repeat N] [--budgets S,S,...]

A history the checker cannot decide in time (tests/unit/checker/test_linearizable.py
hard_history: 40 concurrent info writes, then reads no order of them explains, about 2^40
subsets to rule out) is checked with each budget; it must come back "unknown" once the
budget is spent. The baseline, measured in the same run, is its solvable twin (the same
ops without the last, impossible read): what any check of these ops costs (reading them,
partitioning by key, a search that succeeds at once).

The figure is elapsed / (budget + baseline): 1.00 means the checker stopped as soon as
the budget was spent; above 1 is how far it overran, as a ratio, so it compares across
machines. Seconds are the median of --repeat checks. Nothing is asserted (the unit test
tests/unit/checker/test_linearizable.py::test_time_budget_gives_unknown checks the verdict).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.checker.linearizable import check_linearizable  # noqa: E402
from tests.unit.checker.test_linearizable import hard_history  # noqa: E402

WRITES = 40


def median_seconds(history, budget: float, repeat: int) -> tuple[float, object]:
    times, valid = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        valid = check_linearizable(history, "register", time_limit=budget).valid
        times.append(time.perf_counter() - start)
    return statistics.median(times), valid


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print one JSON document instead of a table")
    ap.add_argument("--repeat", type=int, default=5, help="checks per budget, median reported")
    ap.add_argument("--budgets", default="0.01,0.05,0.2,1.0", help="comma-separated budgets in seconds")
    a = ap.parse_args(argv)
    budgets = [float(b) for b in a.budgets.split(",")]

    hard = hard_history(WRITES)
    twin = hard[:-2]  # without the last read's invoke and completion: decided at once
    baseline, twin_valid = median_seconds(twin, max(budgets) * 10, a.repeat)
    rows = []
    for budget in budgets:
        seconds, valid = median_seconds(hard, budget, a.repeat)
        rows.append({"budget_s": budget, "seconds": seconds, "valid": valid,
                     "overrun_ms": (seconds - budget) * 1000, "ratio": seconds / (budget + baseline)})
    if a.json:
        print(json.dumps({"python": sys.version.split()[0], "cpus": os.cpu_count(), "ops": len(hard),
                          "baseline_s": baseline, "baseline_valid": twin_valid, "budgets": rows}, indent=2))
        return
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus; {len(hard)} ops, median of {a.repeat}")
    print(f"baseline (solvable twin): {baseline * 1000:.2f} ms, valid {twin_valid}")
    print(f"{'budget s':>9} {'seconds':>9} {'overrun ms':>11} {'ratio':>6}  valid")
    for r in rows:
        print(f"{r['budget_s']:>9g} {r['seconds']:>9.4f} {r['overrun_ms']:>11.2f} {r['ratio']:>6.2f}  {r['valid']}")


if __name__ == "__main__":
    from benchmarks.stops import main_of

    main_of(main, "checker_budget")
