"""How close chaoslock's throughput comes to the lock service's own ceiling, per design, in one run.

    python benchmarks/ceiling.py [--backends redis] [--clients 32] [--seconds 4] [--per-process 16]

For each design, on clusters the harness brings up itself (harness.cluster.assemble, the
same servers `chaos run` starts) and takes down again, one after the other:
  yardstick   the service's native load tool on the design's own commands
              (harness/commands/compare/yardstick.py): the ceiling
  load mode   chaoslock, N clients on N keys, no hold, no fault, K clients per worker
              process (harness/engine/load.py): every op recorded and checked
  processes   the same run with one Python process per client (what fault runs use)
and the ratios of each to the yardstick. Cycles/s of a chaoslock run are released cycles
between the first op and the last release (compare's battery.cycles_per_s); its cycle also
reads and writes the protected counter on the store server (two more round trips than the
yardstick's acquire + release), so the ratio errs against chaoslock. Noisy on a shared
machine: read the ratios, measured minutes apart at most, not the absolute figures.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.commands.compare.battery import cycles_per_s, run_yardstick  # noqa: E402
from harness.commands.compare.yardstick import YARDSTICKS  # noqa: E402
from harness.core.errors import ChaosError  # noqa: E402
from harness.core.history import read_history  # noqa: E402
from harness.core.spec import TestSpec  # noqa: E402
from harness.engine.runner import run  # noqa: E402


def chaoslock(backend: str, clients: int, seconds: float, per_process: int, tmp: Path) -> tuple[float | None, str]:
    """(cycles/s, verdict) of one fault-free chaoslock run; per_process 0: a process per client."""
    options = {"load_clients": str(per_process)} if per_process else {}
    spec = TestSpec(backend=backend, concurrency=clients, keys=clients, hold_max_ms=0, time_limit=seconds,
                    recovery=0.0, ttl_ms=1000, store=str(tmp / "store"), options=options,
                    command="benchmarks/ceiling.py")
    out = run(spec, progress=False)
    from harness.core.contracts.checker import verdict_word

    return cycles_per_s(read_history(out.run_dir / "history.jsonl")), verdict_word(out.summary.get("valid"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", default=",".join(YARDSTICKS), help=f"comma-separated, from {', '.join(YARDSTICKS)}")
    ap.add_argument("--clients", type=int, default=32, help="clients of the chaoslock runs (on as many keys)")
    ap.add_argument("--seconds", type=float, default=4.0, help="length of each chaoslock run")
    ap.add_argument("--per-process", type=int, default=16, help="clients per worker process in load mode")
    args = ap.parse_args()
    names = [b.strip() for b in args.backends.split(",") if b.strip()]
    bad = [b for b in names if b not in YARDSTICKS]
    if bad or not names or args.clients < 1 or args.per_process < 1 or args.seconds <= 0:
        print(f"ceiling.py: --backends takes {', '.join(YARDSTICKS)} (not {', '.join(bad) or 'nothing'}); "
              f"--clients and --per-process at least 1, --seconds above 0", file=sys.stderr)
        return 2
    rows = []
    with tempfile.TemporaryDirectory(prefix="chaoslock-ceiling-") as tmp:
        for b in names:
            t = time.monotonic()
            try:
                ys = run_yardstick(b, tmp)
                print(f"  {b:10} yardstick  {ys.line()}", flush=True)
                load, v1 = chaoslock(b, args.clients, args.seconds, args.per_process, Path(tmp))
                print(f"  {b:10} load mode  {load or 0:,.0f} cycles/s, {args.clients} clients in "
                      f"{-(-args.clients // args.per_process)} process(es), verdict {v1}", flush=True)
                procs, v2 = chaoslock(b, args.clients, args.seconds, 0, Path(tmp))
                print(f"  {b:10} processes  {procs or 0:,.0f} cycles/s, {args.clients} processes, verdict {v2} "
                      f"({time.monotonic() - t:.0f} s)", flush=True)
            except ChaosError as e:
                print(f"  {b:10} not measured: {e}", flush=True)
                continue
            rows.append((b, ys.cycles_per_s, load, procs))
    print(f"\n{'design':10} {'yardstick/s':>12} {'load mode/s':>12} {'ratio':>6} {'1 proc/client/s':>16} {'ratio':>6}")
    for b, y, load, procs in rows:
        r1 = f"{load / y:.2f}" if load and y else "-"
        r2 = f"{procs / y:.2f}" if procs and y else "-"
        print(f"{b:10} {y:12,.0f} {load or 0:12,.0f} {r1:>6} {procs or 0:16,.0f} {r2:>6}")
    print("budget: load mode >= 0.5 x yardstick (issue 30); the ratios above are the measurement, not a pass/fail")
    return 0


if __name__ == "__main__":
    sys.exit(main())
