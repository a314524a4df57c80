"""ops.csv: one row per completed client or nemesis op, for pandas, spreadsheets and CI.

Written with the standard csv module: pandas reads it (`pd.read_csv`), but importing pandas
cost every run 0.4 s of a 2-core machine for a table it does not need to build."""

from __future__ import annotations

import bisect
import csv
from pathlib import Path
from typing import Sequence

from harness.core.history import Op, pair_ops
from harness.core.safefile import atomic_open
from harness.core.faults import fault_intervals, table

COLUMNS = ["index", "process", "f", "type", "key", "value", "token", "node", "error",
           "invoke_s", "complete_s", "latency_ms", "nemesis_active", "cause"]


def ops_rows(history: Sequence[Op], causes: Sequence[Sequence] = (), facts: dict | None = None) -> list[dict]:
    """Completed ops with their latency and the faults active when they were invoked; an
    acquire that made a second holder has the violation's cause (harness/checker/causes.py)."""
    by_grant: dict[int, list[str]] = {}
    for _first, second, cause in causes:
        if cause not in by_grant.setdefault(second, []):
            by_grant[second].append(cause)
    t0 = min((o.time_ns for o in history), default=0)
    end_all = max((o.time_ns for o in history), default=0)
    pairs = list(pair_ops(sorted(history, key=lambda o: (o.time_ns, o.index))))
    invoked = [inv.time_ns for inv, _ in pairs]  # in time order, so a fault's ops are a slice
    active = [""] * len(pairs)
    # Few faults, many ops: each fault interval marks the slice of ops invoked inside it.
    for iv in sorted(fault_intervals(history, table(facts)), key=lambda iv: iv["f"]):
        lo = bisect.bisect_left(invoked, iv["start_ns"])
        hi = bisect.bisect_left(invoked, iv["end_ns"] or end_all + 1)
        f = iv["f"]
        for i in range(lo, hi):
            a = active[i]
            active[i] = f if not a else (a if f in a.split("+") else f"{a}+{f}")
    rows = []
    for (inv, done), nemesis_active in zip(pairs, active):
        end = done.time_ns if done is not None else None
        rows.append({
            "index": inv.index, "process": inv.process, "f": inv.f,
            "type": done.type if done is not None else "info", "key": inv.key,
            "value": (done.value if done is not None and done.value is not None else inv.value),
            "token": (done.token if done is not None and done.token is not None else inv.token),
            "node": inv.node, "error": done.error if done is not None else "no completion",
            "invoke_s": round((inv.time_ns - t0) / 1e9, 6),
            "complete_s": None if end is None else round((end - t0) / 1e9, 6),
            "latency_ms": None if end is None else round((end - inv.time_ns) / 1e6, 3),
            "nemesis_active": nemesis_active,
            "cause": "+".join(by_grant[done.index]) if done is not None and done.index in by_grant else "",
        })
    return rows


def write_ops_csv(history: Sequence[Op], path: Path, causes: Sequence[Sequence] = (), facts: dict | None = None) -> None:
    """Replace `path` with the ops' rows (atomically, never through a link: harness/core/safefile.py);
    `facts` (the run's) name the fault kinds its nemeses declared. An empty cell is None."""
    with atomic_open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(ops_rows(history, causes, facts))
