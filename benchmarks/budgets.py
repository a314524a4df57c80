"""The performance budgets of issue 30, each printed as a ratio against a baseline measured in
the same run; nothing is asserted (a timed assert on a shared 2-core machine only measures the
neighbours).

    python benchmarks/budgets.py [--skip overhead,checker,ceiling]

  overhead  chaoslock's single-client cycles/s over a bare redis-py loop doing the same
            commands (benchmarks/overhead.py): budget >= 0.9
  checker   the linearizability checker on generated mutex histories of 125k to 1M ops from
            10 processes (benchmarks/checker.py --case): seconds at 1M (budget <= 5 s), and
            its growth from 125k to 1M over n log n's (budget <= 1.0: no worse than n log n)
  ceiling   the cycles/s of compare's throughput driver (the native driver where it exists,
            else Python load mode) over each service's own yardstick (benchmarks/ceiling.py):
            budget >= 0.5

Servers are started by overhead and ceiling: run it under the shared lock
(`flock /tmp/chaoslock-integration.lock python benchmarks/budgets.py`).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import signal
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
SIZES = (125_000, 250_000, 500_000, 1_000_000)


def _run(script: str, *args: str) -> str:
    """Run one benchmark script. A press reaches it too (the terminal's group), or is passed on
    to it (a SIGTERM to this process alone): wait for it to tear its cluster down, then stop.
    (subprocess.run would SIGKILL it a quarter second after the press, mid-teardown.)"""
    from harness.core import interrupts

    p = subprocess.Popen([sys.executable, str(HERE / script), *args], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        out, err = p.communicate()
    except KeyboardInterrupt:
        with interrupts.shielded(f"waiting for {script} to tear down"):
            p.send_signal(interrupts.ended_by() or signal.SIGINT)
            p.communicate()
        raise
    if p.returncode in (130, 143, 129):
        raise KeyboardInterrupt
    if p.returncode != 0:
        last = (err.strip() or out.strip() or "no output").splitlines()[-1]
        raise RuntimeError(f"{script} failed ({p.returncode}): {last}")
    return out


def overhead() -> list[str]:
    text = _run("overhead.py", "--seconds", "4", "--repeat", "3")
    m = re.search(r"^ratio ([0-9.]+)", text, re.M)
    if not m:
        return ["overhead: overhead.py printed no ratio"]
    r = float(m.group(1))
    return [f"overhead  chaoslock / bare loop, 1 client: {r:.2f}x (budget >= 0.90: {'met' if r >= 0.9 else 'NOT met'})"]


def checker() -> list[str]:
    secs = {}
    for n in SIZES:
        case = json.loads(_run("checker.py", "--case", "mutex", str(n), "10", "--repeat", "1").strip().splitlines()[-1])
        secs[n] = case["seconds"]
    lo, hi = SIZES[0], SIZES[-1]
    growth = secs[hi] / secs[lo]
    nlogn = (hi * math.log(hi)) / (lo * math.log(lo))
    return ["checker   mutex history, 10 procs: " + ", ".join(f"{n:,} ops {s:.2f} s" for n, s in secs.items()),
            f"checker   1M ops in {secs[hi]:.2f} s (budget <= 5 s: {'met' if secs[hi] <= 5 else 'NOT met'}); "
            f"growth {lo:,} -> {hi:,}: {growth:.1f}x, n log n's {nlogn:.1f}x, ratio {growth / nlogn:.2f} "
            f"(budget <= 1.0: {'met' if growth / nlogn <= 1.0 else 'NOT met'})"]


def ceiling() -> list[str]:
    out = []
    for row in json.loads(_run("ceiling.py", "--json").strip().splitlines()[-1]):
        y = row["yardstick"]
        ours, driver = (row["native"], "native driver") if row["native"] else (row["load_mode"], "load mode")
        if not (y and ours):
            continue
        r = ours / y
        procs = f"{row['processes'] / y:.2f}x" if row["processes"] else "-"
        out.append(f"ceiling   {row['design']}: compare's throughput driver ({driver}) / yardstick {r:.2f}x, "
                   f"one process per client {procs} (budget >= 0.50: {'met' if r >= 0.5 else 'NOT met'})")
    return out or ["ceiling: ceiling.py measured no design"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skip", default="", help="comma-separated, from overhead, checker, ceiling")
    args = ap.parse_args()
    parts = {"overhead": overhead, "checker": checker, "ceiling": ceiling}
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    if skip - set(parts):
        print(f"budgets.py: --skip takes {', '.join(parts)}; not {', '.join(sorted(skip - set(parts)))}",
              file=sys.stderr)
        return 2
    for name, fn in parts.items():
        if name in skip:
            continue
        try:
            lines = fn()
        except RuntimeError as e:
            lines = [f"{name}: not measured: {e}"]
        for line in lines:
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    from benchmarks.stops import main_of

    main_of(main, "budgets")
