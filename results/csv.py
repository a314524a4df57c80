"""ops.csv: one row per completed client or nemesis op, for pandas, spreadsheets and CI."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pandas as pd

from harness.core.history import Op, pair_ops
from harness.core.safefile import atomic_open
from harness.core.faults import fault_intervals, table

COLUMNS = ["index", "process", "f", "type", "key", "value", "token", "node", "error",
           "invoke_s", "complete_s", "latency_ms", "nemesis_active", "cause"]


def ops_frame(history: Sequence[Op], causes: Sequence[Sequence] = (), facts: dict | None = None) -> pd.DataFrame:
    """Completed ops with their latency and the faults active when they were invoked; an
    acquire that made a second holder has the violation's cause (harness/checker/causes.py)."""
    by_grant: dict[int, list[str]] = {}
    for _first, second, cause in causes:
        if cause not in by_grant.setdefault(second, []):
            by_grant[second].append(cause)
    t0 = min((o.time_ns for o in history), default=0)
    end_all = max((o.time_ns for o in history), default=0)
    rows, invoked = [], []
    pairs = list(pair_ops(sorted(history, key=lambda o: (o.time_ns, o.index))))
    for inv, done in pairs:
        end = done.time_ns if done is not None else None
        invoked.append(inv.time_ns)
        rows.append({
            "index": inv.index, "process": inv.process, "f": inv.f,
            "type": done.type if done is not None else "info", "key": inv.key,
            "value": (done.value if done is not None and done.value is not None else inv.value),
            "token": (done.token if done is not None and done.token is not None else inv.token),
            "node": inv.node, "error": done.error if done is not None else "no completion",
            "invoke_s": round((inv.time_ns - t0) / 1e9, 6),
            "complete_s": None if end is None else round((end - t0) / 1e9, 6),
            "latency_ms": None if end is None else round((end - inv.time_ns) / 1e6, 3),
        })
    df = pd.DataFrame(rows, columns=[c for c in COLUMNS if c not in ("nemesis_active", "cause")])
    # Few faults, many ops: one vectorised mask per fault interval.
    t = pd.Series(invoked, dtype="int64")
    active = pd.Series([""] * len(df), dtype=object)
    for iv in sorted(fault_intervals(history, table(facts)), key=lambda iv: iv["f"]):
        mask = (t >= iv["start_ns"]) & (t < (iv["end_ns"] or end_all + 1))
        active[mask] = active[mask].map(lambda a, f=iv["f"]: f if not a else (a if f in a.split("+") else f"{a}+{f}"))
    df["nemesis_active"] = active.values
    df["cause"] = [("+".join(by_grant[d.index]) if d is not None and d.index in by_grant else "") for _, d in pairs]
    return df


def write_ops_csv(history: Sequence[Op], path: Path, causes: Sequence[Sequence] = (), facts: dict | None = None) -> None:
    """Replace `path` with the ops' rows (atomically, never through a link: harness/core/safefile.py);
    `facts` (the run's) name the fault kinds its nemeses declared."""
    frame = ops_frame(history, causes, facts)
    with atomic_open(path, "w", newline="") as f:
        frame.to_csv(f, index=False)
