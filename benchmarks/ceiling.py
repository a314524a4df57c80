"""How close chaoslock's throughput comes to the lock service's own ceiling, per design, in one run.

    python benchmarks/ceiling.py [--backends redis] [--clients 32] [--seconds 4] [--per-process 16] [--quick]

For each design, on clusters the harness brings up itself (harness.cluster.assemble, the
same servers `chaos run` starts) and takes down again, one after the other:
  yardstick   the service's native load tool on the design's own commands
              (harness/commands/compare/yardstick.py): the ceiling
  native      chaoslock, N clients, no hold, no fault, driven by the native load driver
              (clients/load-driver, Go goroutines, for redis, redlock and etcd; clients/
              zk-load-driver, Java threads on ZooKeeper's client; harness/engine/native.py):
              the worker's cycle, every op recorded and checked: what compare's throughput
              rows use
  load mode   the same run on Python clients, K per worker process (harness/engine/load.py)
  processes   the same run with one Python process per client (what fault runs use)
and the ratios of each to the yardstick (--quick: the native and yardstick rows only). Cycles/s of a chaoslock run are released cycles
between the first op and the last release (compare's battery.cycles_per_s). Every run here
is compare's throughput probe (battery.throughput_options): the lock cycle alone (-o
resource=none: acquire, the client's own `held`, release; no counter on the store server),
each client on a key of its own (-o own_key), as the yardsticks measure. Noisy on a shared
machine: read the ratios, measured minutes apart at most, not the absolute figures.
"""

from __future__ import annotations

import argparse
import json
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
from harness.engine.native import DESIGNS  # noqa: E402
from harness.engine.runner import run  # noqa: E402

from benchmarks.stops import stop_if_interrupted  # noqa: E402


def chaoslock(backend: str, clients: int, seconds: float, per_process: int, tmp: Path,
              native: bool = False) -> tuple[float | None, str]:
    """(cycles/s, verdict) of one fault-free chaoslock run, each client on a key of its own;
    native: clients/load-driver; else per_process clients per Python process (0: one each)."""
    options = {"own_key": "true", "resource": "none"}
    if native:
        options["load_driver"] = "native"
    elif per_process:
        options["load_clients"] = str(per_process)
    spec = TestSpec(backend=backend, concurrency=clients, keys=clients, hold_max_ms=0, time_limit=seconds,
                    recovery=0.0, ttl_ms=1000, store=str(tmp / "store"), options=options,
                    command="benchmarks/ceiling.py")
    out = stop_if_interrupted(run(spec, progress=False))  # a press ends the benchmark, not only this run
    from harness.core.contracts.checker import verdict_word

    return cycles_per_s(read_history(out.run_dir / "history.jsonl")), verdict_word(out.summary.get("valid"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", default=",".join(YARDSTICKS), help=f"comma-separated, from {', '.join(YARDSTICKS)}")
    ap.add_argument("--clients", type=int, default=32, help="clients of the chaoslock runs (on as many keys)")
    ap.add_argument("--seconds", type=float, default=4.0, help="length of each chaoslock run")
    ap.add_argument("--per-process", type=int, default=16, help="clients per worker process in load mode")
    ap.add_argument("--quick", action="store_true", help="the yardstick and the native driver only")
    ap.add_argument("--json", action="store_true", help="also print the table as one JSON line, last")
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
                nat = load = procs = None
                if b in DESIGNS:
                    nat, v0 = chaoslock(b, args.clients, args.seconds, 0, Path(tmp), native=True)
                    print(f"  {b:10} native     {nat or 0:,.0f} cycles/s, {args.clients} clients in one native process, verdict {v0}",
                          flush=True)
                if not args.quick:
                    load, v1 = chaoslock(b, args.clients, args.seconds, args.per_process, Path(tmp))
                    print(f"  {b:10} load mode  {load or 0:,.0f} cycles/s, {args.clients} clients in "
                          f"{-(-args.clients // args.per_process)} process(es), verdict {v1}", flush=True)
                    procs, v2 = chaoslock(b, args.clients, args.seconds, 0, Path(tmp))
                    print(f"  {b:10} processes  {procs or 0:,.0f} cycles/s, {args.clients} processes, verdict {v2} "
                          f"({time.monotonic() - t:.0f} s)", flush=True)
            except ChaosError as e:
                print(f"  {b:10} not measured: {e}", flush=True)
                continue
            rows.append((b, ys.cycles_per_s, nat, load, procs))
    print(f"\n{'design':10} {'yardstick/s':>12} {'native/s':>9} {'ratio':>6} {'load mode/s':>12} {'ratio':>6} "
          f"{'1 proc/client/s':>16} {'ratio':>6}")
    for b, y, *ours in rows:
        cells = []
        for x, width in zip(ours, (9, 12, 16)):
            cells.append(f"{x:{width},.0f} {x / y:6.2f}" if x and y else f"{'-':>{width}} {'-':>6}")
        print(f"{b:10} {y:12,.0f} {' '.join(cells)}")
    if args.json:
        print(json.dumps([dict(zip(("design", "yardstick", "native", "load_mode", "processes"), row)) for row in rows]))
        return 0
    print("budget: compare's throughput driver (native where it exists, else load mode) >= 0.5 x yardstick "
          "(issue 30); the ratios above are the measurement, not a pass/fail")
    return 0


if __name__ == "__main__":
    from benchmarks.stops import main_of

    main_of(main, "ceiling")
