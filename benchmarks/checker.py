"""How fast is the linearizability checker, and how does its cost grow with the history?

    python benchmarks/checker.py [--quick] [--json] [--repeat N] [--time-limit S]

Three measurements, none of them asserted (this is a measuring stick for changes to
harness/checker/, not a test):

1. Large histories: `mutex` and `register` histories of 1k, 10k and 100k ops from 5, 10,
   20 and 50 processes, plus 1M ops from 10 processes (skipped by --quick). Each case runs
   in a fresh interpreter, so its memory figure is its own: "peak MB" is how far the
   resident set grew above its level before the check (the kernel's high-water mark,
   VmHWM, reset through /proc/self/clear_refs just before the check; where that is not
   available, the growth of resource.getrusage ru_maxrss). Seconds are the median of
   --repeat runs on the same history (1M cases run once).
2. Jepsen-sized: 1000 random register histories of about 100 ops from 1 to 20 processes,
   values drawn from 0..4, a tenth of them with one read corrupted; mean and p99 ms each.
3. The scaling exponent: the log-log slope of seconds against ops from 10k to 1M (to
   100k with --quick), per model at 10 processes. 1.0 is linear.

The histories are generated, not recorded: every process runs ops back to back with a
short think time, each op takes effect at a random instant inside its own interval
(so the verdict must be True), a few end `fail` (not applied) and a few `info` (applied
or not; the process is then retired and replaced, as the harness does).
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import os
import random
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.checker.linearizable import check_linearizable  # noqa: E402
from harness.core.history import Op  # noqa: E402

US = 1_000
SIZES = (1_000, 10_000, 100_000)
PROCS = (5, 10, 20, 50)
BIG = 1_000_000
BIG_PROCS = 10
MEMORY_NOTE = ("peak MB = resident-set growth during the check (VmHWM after it, reset via "
               "/proc/self/clear_refs, minus RSS before it)")


# ---------------------------------------------------------------- history generators

def register_history(n_ops: int, procs: int, seed: int = 1, values: int | None = None,
                     info_rate: float = 0.005, fail_rate: float = 0.005) -> list[Op]:
    """n_ops reads and writes (half each) on one key from `procs` processes running
    concurrently, ops of 50-500 us with 1-50 us think time. Writes carry unique values,
    or values drawn from range(values) when given."""
    rng = random.Random(seed)
    ready = [(rng.randrange(US, 50 * US), slot) for slot in range(procs)]
    heapq.heapify(ready)
    names = list(range(procs))
    next_name = procs
    planned = []  # (start, end, effect or None, process, f, value, type)
    counter = 0
    for _ in range(n_ops):
        t, slot = heapq.heappop(ready)
        start = t + rng.randrange(US, 50 * US)
        end = start + rng.randrange(50 * US, 500 * US)
        effect = rng.randrange(start, end + 1)
        roll = rng.random()
        kind = "fail" if roll < fail_rate else "info" if roll < fail_rate + info_rate else "ok"
        if kind == "fail" or (kind == "info" and rng.random() < 0.5):
            effect = None
        if rng.random() < 0.5:
            counter += 1
            value = counter if values is None else rng.randrange(values)
            planned.append((start, end, effect, names[slot], "write", value, kind))
        else:
            planned.append((start, end, effect, names[slot], "read", None, kind))
        if kind == "info":
            names[slot], next_name = next_name, next_name + 1
        heapq.heappush(ready, (end, slot))
    current = 0
    reads = {}
    for i in sorted((i for i, p in enumerate(planned) if p[2] is not None), key=lambda i: planned[i][2]):
        if planned[i][4] == "write":
            current = planned[i][5]
        else:
            reads[i] = current
    events = []
    for i, (start, end, _, proc, f, v, kind) in enumerate(planned):
        events.append((start, proc, "invoke", f, v))
        if f == "read":
            v = reads.get(i) if kind == "ok" else None
        events.append((end, proc, kind, f, v))
    return _ops(events, key="counter")


def mutex_history(n_ops: int, procs: int, seed: int = 2, info_rate: float = 0.005) -> list[Op]:
    """n_ops acquires and releases of one lock from `procs` processes. The lock is granted
    in request order; an acquire that waits over 2 ms gives up (fail, or now and then info
    and the process is retired); now and then a release that took effect ends info."""
    rng = random.Random(seed)
    ready = [(rng.randrange(US, 100 * US), slot) for slot in range(procs)]
    heapq.heapify(ready)
    names = list(range(procs))
    next_name = procs
    events = []
    free_at = 0
    count = 0
    while count < n_ops:
        t, slot = heapq.heappop(ready)
        p = names[slot]
        grant = max(t, free_at) + rng.randrange(5 * US, 50 * US)
        if grant - t > 2_000 * US:  # gave up waiting: the lock was certainly not taken
            end = t + 2_000 * US
            kind = "info" if rng.random() < 0.1 else "fail"
            events += [(t, p, "invoke", "acquire", None), (end, p, kind, "acquire", None)]
            if kind == "info":
                names[slot], next_name = next_name, next_name + 1
            heapq.heappush(ready, (end + rng.randrange(US, 200 * US), slot))
            count += 1
            continue
        acquired = grant + rng.randrange(5 * US, 50 * US)
        rel_start = acquired + rng.randrange(50 * US, 300 * US)
        rel_effect = rel_start + rng.randrange(5 * US, 50 * US)
        rel_end = rel_effect + rng.randrange(5 * US, 50 * US)
        free_at = rel_effect
        kind = "info" if rng.random() < info_rate else "ok"
        events += [(t, p, "invoke", "acquire", None), (acquired, p, "ok", "acquire", None),
                   (rel_start, p, "invoke", "release", None), (rel_end, p, kind, "release", None)]
        if kind == "info":
            names[slot], next_name = next_name, next_name + 1
        heapq.heappush(ready, (rel_end + rng.randrange(US, 200 * US), slot))
        count += 2
    return _ops(events, key="lock")


def _ops(events: list[tuple], key: str) -> list[Op]:
    events.sort(key=lambda e: e[0])  # stable: a process's completion stays before its next invoke
    return [Op(index=i, time_ns=t, process=p, type=ty, f=f, key=key, value=v)
            for i, (t, p, ty, f, v) in enumerate(events)]


def corrupt(history: list[Op], rng: random.Random) -> list[Op]:
    """The history with one ok read's value changed (which may or may not make it invalid)."""
    reads = [i for i, o in enumerate(history) if o.f == "read" and o.type == "ok"]
    if not reads:
        return history
    i = rng.choice(reads)
    o = history[i]
    out = list(history)
    out[i] = Op(index=o.index, time_ns=o.time_ns, process=o.process, type=o.type, f=o.f,
                key=o.key, value=((o.value or 0) + 1 + rng.randrange(4)) % 5)
    return out


# ---------------------------------------------------------------- measuring

def _rss_kb(field: str) -> int:
    m = re.search(rf"{field}:\s+(\d+)", Path("/proc/self/status").read_text())
    return int(m.group(1)) if m else 0


def run_case(model: str, n_ops: int, procs: int, repeat: int, time_limit: float) -> dict:
    """Generate one history and check it `repeat` times; runs inside its own interpreter."""
    gen = register_history if model == "register" else mutex_history
    history = gen(n_ops, procs)
    times = []
    peak_kb = None
    result = None
    for _ in range(repeat):
        try:
            Path("/proc/self/clear_refs").write_text("5")
            before, how = _rss_kb("VmRSS"), "hwm"
        except OSError:
            before, how = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "maxrss"
        start = time.perf_counter()
        result = check_linearizable(history, model, time_limit=time_limit)
        times.append(time.perf_counter() - start)
        if peak_kb is None:
            after = _rss_kb("VmHWM") if how == "hwm" else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            peak_kb = max(0, after - before)
        result = result.valid  # drop the rest before the next run
    return {"model": model, "ops": n_ops, "processes": procs, "events": len(history),
            "seconds": statistics.median(times), "runs": repeat,
            "peak_mb": round(peak_kb / 1024, 1), "valid": result}


def case_in_child(model: str, n_ops: int, procs: int, repeat: int, time_limit: float) -> dict:
    """run_case in a fresh interpreter; a crash (say, out of memory) becomes a row too."""
    cmd = [sys.executable, __file__, "--case", model, str(n_ops), str(procs),
           "--repeat", str(repeat), "--time-limit", str(time_limit)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode == 0:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return {"model": model, "ops": n_ops, "processes": procs, "seconds": math.nan, "runs": 0,
            "peak_mb": math.nan, "valid": f"crashed ({proc.returncode}): {last}"}


def jepsen_sized(count: int = 1000, seed: int = 7, time_limit: float = 10.0) -> dict:
    """`count` random ~100-op register histories, a tenth corrupted; ms per check."""
    rng = random.Random(seed)
    ms = []
    verdicts = {"true": 0, "false": 0, "unknown": 0}
    for k in range(count):
        h = register_history(rng.randrange(80, 121), rng.randint(1, 20), seed=seed * 100_003 + k,
                             values=5, info_rate=0.03, fail_rate=0.03)
        if rng.random() < 0.1:
            h = corrupt(h, rng)
        start = time.perf_counter()
        valid = check_linearizable(h, "register", time_limit=time_limit).valid
        ms.append((time.perf_counter() - start) * 1000)
        verdicts[str(valid).lower()] += 1
    ms.sort()
    return {"histories": count, "mean_ms": statistics.fmean(ms),
            "p99_ms": ms[min(len(ms) - 1, math.ceil(0.99 * len(ms)) - 1)], "max_ms": ms[-1],
            "verdicts": verdicts}


def slope(points: list[tuple[int, float | None]]) -> float | None:
    """Least-squares slope of log(seconds) against log(ops)."""
    pts = [(math.log(n), math.log(s)) for n, s in points if s and s > 0 and not math.isnan(s)]
    if len(pts) < 2:
        return None
    mx = statistics.fmean(x for x, _ in pts)
    my = statistics.fmean(y for _, y in pts)
    den = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / den if den else None


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="skip the 1M-op cases")
    ap.add_argument("--json", action="store_true", help="print one JSON document instead of tables")
    ap.add_argument("--repeat", type=int, default=3, help="checks per history, median reported (1M: once)")
    ap.add_argument("--time-limit", type=float, default=120.0, help="checker budget per history, seconds")
    ap.add_argument("--case", nargs=3, metavar=("MODEL", "OPS", "PROCS"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.case:
        print(json.dumps(run_case(a.case[0], int(a.case[1]), int(a.case[2]), a.repeat, a.time_limit)))
        return

    plan = [(m, n, p) for m in ("register", "mutex") for n in SIZES for p in PROCS]
    if not a.quick:
        plan += [(m, BIG, BIG_PROCS) for m in ("register", "mutex")]
    show = not a.json
    if show:
        print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus; {MEMORY_NOTE}")
        print(f"{'model':<9} {'ops':>9} {'procs':>5} {'seconds':>9} {'ops/s':>10} {'peak MB':>8}  valid")
    cases = []
    for model, n, p in plan:
        c = case_in_child(model, n, p, 1 if n >= BIG else a.repeat, a.time_limit)
        cases.append(c)
        if show:
            print(f"{model:<9} {n:>9,} {p:>5} {c['seconds']:>9.3f} {n / c['seconds']:>10,.0f} "
                  f"{c['peak_mb']:>8.1f}  {c['valid']}", flush=True)
    if a.json:  # JSON has no NaN: a crashed case's figures are null
        cases = [{k: None if isinstance(v, float) and math.isnan(v) else v for k, v in c.items()}
                 for c in cases]

    jep = jepsen_sized()
    if show:
        v = jep["verdicts"]
        print(f"\njepsen-sized: {jep['histories']} register histories of ~100 ops, 1-20 procs: "
              f"mean {jep['mean_ms']:.2f} ms, p99 {jep['p99_ms']:.2f} ms, max {jep['max_ms']:.2f} ms "
              f"(valid {v['true']}, invalid {v['false']}, unknown {v['unknown']})")

    scaling = {}
    for model in ("register", "mutex"):
        pts = [(c["ops"], c["seconds"]) for c in cases
               if c["model"] == model and c["processes"] == BIG_PROCS and c["ops"] >= 10_000]
        scaling[model] = slope(pts)
        if show and scaling[model] is not None:
            print(f"scaling exponent, {model} at {BIG_PROCS} procs, {min(pts)[0]:,} to "
                  f"{max(pts)[0]:,} ops: {scaling[model]:.2f}")
    if a.json:
        print(json.dumps({"python": sys.version.split()[0], "cpus": os.cpu_count(),
                          "memory": MEMORY_NOTE, "cases": cases, "jepsen_sized": jep,
                          "scaling_exponent": scaling}, indent=2))


if __name__ == "__main__":
    from benchmarks.stops import main_of

    main_of(main, "checker")
