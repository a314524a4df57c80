"""How fast is the linearizability checker on histories the size of real runs?

Run as `python benchmarks/bench_checker.py`. It builds synthetic, linearizable histories
(each op takes effect at a random instant inside its own interval, so the verdict must be
True) and prints ops, seconds and ops/s per case. It asserts nothing: it is a measuring
stick for changes to harness/checker/linearizable.py, not a test.
"""

from __future__ import annotations

import heapq
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.checker.linearizable import check_linearizable  # noqa: E402
from harness.history import Op  # noqa: E402

US = 1_000


def register_history(n_ops: int, procs: int = 5, seed: int = 1, info_rate: float = 0.002) -> list[Op]:
    """n_ops reads and writes (half each) from `procs` processes with overlapping
    intervals of 50-500 us; writes are unique; a few writes end `info` (applied or not)
    and retire their process, as the harness does."""
    rng = random.Random(seed)
    clock = [rng.randrange(0, 100 * US) for _ in range(procs)]
    names = list(range(procs))
    next_name = procs
    planned = []  # (invoke t, complete t, effect t or None, process, f, value, type)
    value = 0
    for _ in range(n_ops):
        slot = rng.randrange(procs)
        start = clock[slot] + rng.randrange(0, 50 * US)
        end = start + rng.randrange(50 * US, 500 * US)
        clock[slot] = end
        effect = rng.randrange(start, end + 1)
        if rng.random() < 0.5:
            value += 1
            kind = "info" if rng.random() < info_rate else "ok"
            if kind == "info" and rng.random() < 0.5:
                effect = None  # timed out and never applied
            planned.append((start, end, effect, names[slot], "write", value, kind))
            if kind == "info":
                names[slot], next_name = next_name, next_name + 1
        else:
            planned.append((start, end, effect, names[slot], "read", None, "ok"))
    # The register's true history: apply effects in effect-time order to learn reads.
    current = 0
    read_values = {}
    for i in sorted((i for i, p in enumerate(planned) if p[2] is not None), key=lambda i: planned[i][2]):
        _, _, _, _, f, v, _ = planned[i]
        if f == "write":
            current = v
        else:
            read_values[i] = current
    events = []
    for i, (start, end, _, proc, f, v, kind) in enumerate(planned):
        events.append((start, 0, proc, "invoke", f, v))
        events.append((end, 1, proc, kind, f, read_values.get(i) if f == "read" else v))
    return _ops(events, key="counter")


def mutex_history(n_ops: int, procs: int = 5, seed: int = 2) -> list[Op]:
    """n_ops acquires and releases from `procs` processes contending for one lock; the
    lock is granted in request order, and acquires that wait over 2 ms fail."""
    rng = random.Random(seed)
    events = []
    ready = [(rng.randrange(0, 100 * US), p) for p in range(procs)]
    heapq.heapify(ready)
    free_at = 0
    count = 0
    while count < n_ops:
        t, p = heapq.heappop(ready)
        grant = max(t, free_at) + rng.randrange(5 * US, 50 * US)
        if grant - t > 2_000 * US:  # gave up waiting: certainly not acquired
            fail_at = t + 2_000 * US
            events += [(t, 0, p, "invoke", "acquire", None), (fail_at, 1, p, "fail", "acquire", None)]
            heapq.heappush(ready, (fail_at + rng.randrange(0, 200 * US), p))
            count += 1
            continue
        acquired = grant + rng.randrange(5 * US, 50 * US)
        rel_start = acquired + rng.randrange(50 * US, 300 * US)
        rel_effect = rel_start + rng.randrange(5 * US, 50 * US)
        rel_end = rel_effect + rng.randrange(5 * US, 50 * US)
        free_at = rel_effect
        events += [(t, 0, p, "invoke", "acquire", None), (acquired, 1, p, "ok", "acquire", None),
                   (rel_start, 0, p, "invoke", "release", None), (rel_end, 1, p, "ok", "release", None)]
        heapq.heappush(ready, (rel_end + rng.randrange(0, 200 * US), p))
        count += 2
    return _ops(events, key="lock")


def _ops(events: list[tuple], key: str) -> list[Op]:
    events.sort(key=lambda e: (e[0], e[1]))
    return [Op(index=i, time_ns=t, process=p, type=ty, f=f, key=key, value=v)
            for i, (t, _, p, ty, f, v) in enumerate(events)]


def bench(label: str, history: list[Op], model: str) -> None:
    ops = sum(1 for o in history if o.type == "invoke")
    start = time.perf_counter()
    result = check_linearizable(history, model, time_limit=600)
    secs = time.perf_counter() - start
    print(f"{label:<28} {ops:>8} ops {len(history):>8} events {secs:>8.3f} s "
          f"{ops / secs:>10,.0f} ops/s  valid={result.valid}")


def main() -> None:
    print(f"python {sys.version.split()[0]}")
    bench("register 10k, 5 procs", register_history(10_000), "register")
    bench("register 100k, 5 procs", register_history(100_000), "register")
    bench("mutex 10k, 5 procs", mutex_history(10_000), "mutex")


if __name__ == "__main__":
    main()
