"""What `chaos compare` runs for each backend and what it reads from each run.

A *probe* is one real run (harness.engine.runner.run) with a purpose; its history and summary
give *metrics* (a latency quantile, a rate, a count). A *cell* is one row of the
articles' table for one backend: the metric over the repetitions (median, and the
spread), the articles' claim, and whether the measurement confirms it (claims.py).

Probes, per backend (quick / full sizes in `Plan`):
  yardstick    the service's own load tool on the design's commands, on a cluster of the
               same servers of its own (yardstick.py): the ceiling the throughput row is
               held against (claims.py); designs without one get no throughput verdict
  latency      1 client, no hold, no fault: acquire p50/p99, acquire+release p50/p99
  tps-N        N clients, each on a key of its own, no hold, no counter work (the lock cycle
               alone, as the yardstick measures it): cycles per second, for each N (the knee),
               driven by clients/load-driver for the designs it implements (harness/engine/
               native.py), else in load mode (LOAD_PER_PROCESS Python clients per worker
               process, harness/engine/load.py)
  contended    N clients on one key, no hold: P99 under contention, fairness, the
               servers' requests per grant (the herd); for Redis designs also with a
               tight poll (retry_delay_ms=2), the herd without jittered backoff; on the
               native driver for the designs it implements
  fault-F      the matrix's faults, unfenced: violations per 10k acquires
  fenced-F     the same fault with fencing: stale writes rejected and accepted
  gc-x         pause-holder at x TTLs (chaos explore's bisection in the full run)
  clock-*      clock-skew on the servers and on the clients
  split        partition-client: who can acquire while the holder is cut off
  reenter      --reenter on the design here and on the shipped library for the same service
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from harness.core.contracts.checker import UNKNOWN, parse_valid
from harness.core.history import NEMESIS, Op, pair_ops, read_history
from harness.core.spec import TestSpec

BACKENDS = ("redis", "redlock", "etcd", "zookeeper")
# The shipped library for the same service, measured beside the design here (reentrancy).
LIBRARY = {"redis": "python-redis-lock", "redlock": "pottery", "etcd": "etcd-recipe", "zookeeper": "zookeeper-recipe"}
POLLING = ("redis", "redlock")  # designs that poll SET NX: the herd is also measured with a tight poll
FAULTS = ("pause-holder", "partition", "kill")  # with clock-skew (the clock row's run): the matrix's four
LOAD_PER_PROCESS = 16  # clients per worker process in the throughput probes (load mode)


@dataclass(frozen=True)
class Plan:
    """How big the battery is. Quick: one repetition, short runs; full: repetitions and a
    bisection for the GC row."""

    name: str
    reps: int  # repetitions of the latency, throughput and contention probes
    fault_reps: int
    clients: tuple[int, ...]  # the throughput curve
    contended: int  # clients on one key
    run_s: float  # seconds of a performance probe
    fault_s: float  # seconds of a fault probe
    ttl_ms: int
    gc_steps: int  # bisection steps of the GC row (0: one probe at 2 x TTL, the pause-holder run)
    fenced_faults: tuple[str, ...]


QUICK = Plan(name="quick", reps=1, fault_reps=1, clients=(1, 8, 32), contended=8, run_s=3.0, fault_s=7.0,
             ttl_ms=1000, gc_steps=0, fenced_faults=("pause-holder",))
FULL = Plan(name="full", reps=3, fault_reps=2, clients=(1, 4, 16, 64, 256), contended=16, run_s=4.0, fault_s=10.0,
            ttl_ms=1000, gc_steps=3, fenced_faults=("pause-holder", "clock-skew"))  # the faults that make stale writes


@dataclass
class Measured:
    """One backend's metrics: name -> one value per repetition, and the run dirs."""

    backend: str
    values: dict[str, list[Any]] = field(default_factory=dict)
    runs: dict[str, list[str]] = field(default_factory=dict)
    curve: dict[int, list[float]] = field(default_factory=dict)  # clients -> cycles/s per repetition
    yardstick: str | None = None  # what the service's own load tool measured, as a line

    def add(self, metric: str, value: Any, run_dir: str | None = None) -> None:
        self.values.setdefault(metric, []).append(value)
        if run_dir:
            self.runs.setdefault(metric, []).append(run_dir)


# ------------------------------------------------------------------------ from a history

def _quantile(xs: Sequence[float], q: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, max(0, int(round(q * (len(xs) - 1)))))], 3)


def latencies(history: Sequence[Op]) -> tuple[list[float], list[float]]:
    """(acquire latencies of ok acquires, acquire-invoke-to-release-completion of cycles), ms."""
    acquire, cycle = [], []
    started: dict[Any, int] = {}
    for inv, done in pair_ops(history):
        if inv.process == NEMESIS or done is None:
            continue
        if inv.f == "acquire":
            if done.type == "ok":
                acquire.append((done.time_ns - inv.time_ns) / 1e6)
                started[inv.process] = inv.time_ns
        elif inv.f == "release" and inv.process in started:
            cycle.append((done.time_ns - started.pop(inv.process)) / 1e6)
    return acquire, cycle


def cycles_per_s(history: Sequence[Op]) -> float | None:
    """Released cycles per second, between the first worker op and the last release."""
    ops = [o for o in history if isinstance(o.process, int)]
    releases = [o for o in ops if o.f == "release" and o.type != "invoke"]
    if len(releases) < 2:
        return None
    span = (max(o.time_ns for o in releases) - min(o.time_ns for o in ops)) / 1e9
    return round(len(releases) / span, 1) if span > 0 else None


def cut_grants(history: Sequence[Op], workers: int) -> dict[str, int]:
    """During each partition-client cut: ok acquires by the cut client's worker (its
    minority side) and by the others (the majority side)."""
    cuts: list[tuple[int, int, int | None]] = []  # (start, end, worker)
    start = worker = None
    for op in history:
        if op.process != NEMESIS:
            continue
        if op.f == "partition-client" and op.type == "ok" and isinstance(op.value, dict):
            start, worker = op.time_ns, op.value.get("worker")
        elif op.f == "heal-client" and op.type != "invoke" and start is not None:
            cuts.append((start, op.time_ns, worker))
            start = None
    mine = others = 0
    for op in history:
        if op.f == "acquire" and op.type == "ok" and isinstance(op.process, int):
            for s, e, w in cuts:
                if s <= op.time_ns <= e:
                    if w is not None and op.process % workers == w:
                        mine += 1
                    else:
                        others += 1
    return {"cuts": len(cuts), "minority_grants": mine, "majority_grants": others}


# ---------------------------------------------------------------------------- the probes

Runner = Callable[[TestSpec], tuple[dict, list[Op], str]]
Yardstick = Callable[[str, str], Any]  # (backend, where its cluster's files go) -> yardstick.Yardstick


def run_yardstick(backend: str, where: str):
    """The design's yardstick on a cluster of its servers of its own, brought up and down
    here (None: no yardstick for this design)."""
    from harness.cluster.assemble import make_cluster
    from harness.commands.compare.yardstick import YARDSTICKS, measure_yardstick
    from results.store import new_run_id

    if backend not in YARDSTICKS:
        return None
    spec = TestSpec(backend=backend, concurrency=1).validate()
    cluster = make_cluster(spec, new_run_id(), Path(where) / f"yardstick-{backend}", [])
    cluster.up()
    try:
        place = cluster.client(0)
        return measure_yardstick(backend, place.nodes, place.netns)
    finally:
        cluster.down()


def run_probe(spec: TestSpec) -> tuple[dict, list[Op], str]:
    """One real run: its summary, its history and its run dir."""
    from harness.engine.runner import run

    out = run(spec, progress=False)
    if out.interrupted:
        raise KeyboardInterrupt
    return out.summary, read_history(Path(out.run_dir) / "history.jsonl"), str(out.run_dir)


def proven(summary: dict, count: Any) -> Any:
    """A safety count of a run as evidence: a violation found stands, but 0 (or none) from a
    run whose verdict was not decided (parse_valid: "unknown", or anything unrecognised)
    proves nothing, so it is None, not measured, and no claim of "no conflicts" rests on it."""
    if isinstance(count, (int, float)) and not isinstance(count, bool) and count > 0:
        return count
    return None if parse_valid(summary.get("valid")) == UNKNOWN else count


def per_10k(summary: dict) -> float | None:
    ok = summary.get("acquires_ok") or 0
    v = proven(summary, summary.get("violations") or 0)
    return round(10_000 * v / ok, 2) if ok and v is not None else None


def _broke(summary: dict) -> bool | None:
    """Whether the run broke mutual exclusion; None when it did not decide."""
    v = proven(summary, summary.get("violations") or 0)
    return None if v is None else bool(v)


def native_driver(backend: str) -> dict[str, str]:
    """The option that runs a probe on clients/load-driver, for a design it implements."""
    from harness.engine.native import DESIGNS

    return {"load_driver": "native"} if backend in DESIGNS else {}


def throughput_options(backend: str) -> dict[str, str]:
    """The options of a throughput probe: the lock cycle alone, each client on its own key, on
    the fastest driver chaoslock has for the design (else Python clients, many per process)."""
    return {"own_key": "true", "resource": "none",
            **(native_driver(backend) or {"load_clients": str(LOAD_PER_PROCESS)})}


class _Undecided(Exception):
    """A probe of the GC bisection that decided nothing: the boundary cannot be stated."""


def measure(backend: str, plan: Plan, store: str, run: Runner = run_probe,
            say: Callable[[str], None] = print, yardstick: Yardstick | None = None) -> Measured:
    """Every probe of the battery on one backend; the throughput row's yardstick from
    `yardstick` (chaos compare passes run_yardstick; None: no yardstick, no throughput verdict)."""
    from harness.checker.properties import check_fairness
    from harness.commands.explore import bisect_boundary

    m = Measured(backend=backend)
    base = TestSpec(backend=backend, ttl_ms=plan.ttl_ms, hold_max_ms=0, store=store, recovery=1.0,
                    nemesis_interval=2.0, command=f"chaos compare --backends {backend}"
                    + (" --quick" if plan.name == "quick" else ""))

    def go(what: str, spec: TestSpec) -> tuple[dict, list[Op], str]:
        summary, history, run_dir = run(spec.validate())
        say(f"  {backend:10} {what:24} {_brief(summary)}")
        return summary, history, run_dir

    ys = yardstick(backend, store) if yardstick is not None else None
    if ys is not None:
        say(f"  {backend:10} {'yardstick':24} {ys.line()}")
        m.add("yardstick_cycles_per_s", ys.cycles_per_s)
        m.yardstick = ys.line()
    load = throughput_options(backend)
    contend = native_driver(backend)
    for rep in range(plan.reps):
        seed = rep + 1
        s, h, d = go("latency", replace(base, concurrency=1, time_limit=plan.run_s, seed=seed))
        acq, cyc = latencies(h)
        for name, xs in (("acquire", acq), ("cycle", cyc)):
            m.add(f"{name}_p50_ms", _quantile(xs, 0.5), d)
            m.add(f"{name}_p99_ms", _quantile(xs, 0.99), d)
        for n in plan.clients:
            s, h, d = go(f"tps {n} clients", replace(base, concurrency=n, keys=n, time_limit=plan.run_s, seed=seed,
                                                     options=load))
            m.curve.setdefault(n, []).append(cycles_per_s(h))
            m.runs.setdefault("throughput", []).append(d)
        s, h, d = go("contended", replace(base, concurrency=plan.contended, time_limit=plan.run_s, seed=seed,
                                          options=contend))
        acq, _ = latencies(h)
        m.add("contended_p99_ms", _quantile(acq, 0.99), d)
        m.add("conflicts_per_10k_none", per_10k(s), d)
        fair = check_fairness(base, h).summary
        m.add("overtake_share", fair["overtake_share"], d)
        m.add("worst_overtake", fair["worst_overtake"], d)
        if s.get("server_requests") is not None and s.get("acquires_ok"):
            m.add("requests_per_grant", round(s["server_requests"] / s["acquires_ok"], 1), d)
        if backend in POLLING:
            s, h, d = go("contended, tight poll", replace(base, concurrency=plan.contended, time_limit=plan.run_s,
                                                          seed=seed, options={"retry_delay_ms": "2", **contend}))
            if s.get("server_requests") is not None and s.get("acquires_ok"):
                m.add("requests_per_grant_tight", round(s["server_requests"] / s["acquires_ok"], 1), d)

    faults = replace(base, hold_max_ms=None, time_limit=plan.fault_s, concurrency=5)
    for rep in range(plan.fault_reps):
        seed = rep + 1
        for fault in FAULTS:
            s, h, d = go(f"fault {fault}", replace(faults, nemesis=(fault,), seed=seed))
            m.add(f"conflicts_per_10k_{fault}", per_10k(s), d)
            if fault == "pause-holder":
                m.add("gc_breaks_at_2ttl", _broke(s), d)
        s, h, d = go("clock jumps on servers", replace(faults, nemesis=("clock-skew",), seed=seed))
        m.add("conflicts_per_10k_clock-skew", per_10k(s), d)
        m.add("server_clock_violations", proven(s, s.get("violations")), d)
        s, h, d = go("clock skew on clients", replace(faults, nemesis=("clock-skew",), seed=seed,
                                                      options={"clock_target": "clients"}))
        m.add("client_clock_violations", proven(s, s.get("violations")), d)
        s, h, d = go("partition the holder", replace(faults, nemesis=("partition-client",), seed=seed))
        for k, v in cut_grants(h, faults.concurrency).items():
            m.add(f"split_{k}", v, d)
        m.add("split_violations", proven(s, s.get("violations")), d)
        for fault in plan.fenced_faults:
            s, h, d = go(f"fenced {fault}", replace(faults, nemesis=(fault,), seed=seed, fencing=True))
            m.add("stale_rejected", proven(s, s.get("stale_writes_rejected") or 0), d)
            m.add("stale_accepted", proven(s, s.get("stale_writes_accepted") or 0), d)

    if plan.gc_steps:
        def breaks(x: float) -> bool:
            s, _, d = go(f"gc pause {x:.2f} x TTL", replace(faults, nemesis=("pause-holder",), seed=1,
                                                            time_limit=max(plan.fault_s, x * plan.ttl_ms / 1000 + 6),
                                                            options={"pause_multiple": str(x)}))
            m.runs.setdefault("gc_boundary", []).append(d)
            if (broke := _broke(s)) is None:
                raise _Undecided(x)
            return broke

        try:
            kind, lo, hi = bisect_boundary(breaks, 0.5, 4.0, plan.gc_steps)
            m.add("gc_boundary", {"never": f">{hi:g}", "below": f"<{lo:g}", "between": round(hi, 3)}[kind])
        except _Undecided as e:
            say(f"  {backend:10} gc boundary: not stated, the probe at {e.args[0]:.2f} x TTL decided nothing")
            m.add("gc_boundary", None)

    for name, b in (("design", backend), ("library", LIBRARY[backend])):
        # A TTL well past the reacquire's wait (python-redis-lock rounds it up to whole seconds):
        # a holder blocked on itself must not see its own lease expire meanwhile.
        s, _, d = go(f"reenter ({b})", replace(base, backend=b, concurrency=2, reenter=True, hold_max_ms=None,
                                              ttl_ms=3000, time_limit=max(plan.run_s, 5.0), seed=1))
        m.add(f"reentrancy_{name}", s.get("reentrant_behaviour"), d)
    return m


def _brief(summary: dict) -> str:
    from harness.core.contracts.checker import verdict_word

    return (f"{verdict_word(summary.get('valid'))}, {summary.get('acquires_ok')} acquires, "
            f"{summary.get('violations') or 0} violations")


def best_and_knee(curve: dict[int, list[float]]) -> tuple[float | None, int | None, tuple | None]:
    """(the best median throughput over the client counts, the fewest clients reaching 90 %
    of it, the spread of the best one's repetitions)."""
    meds = {n: median(v) for n, v in sorted(curve.items()) if median(v) is not None}
    if not meds:
        return None, None, None
    best_n = max(meds, key=meds.get)
    knee = next(n for n, v in meds.items() if v >= 0.9 * meds[best_n])
    return meds[best_n], knee, spread(curve[best_n])


def median(values: Sequence[Any]) -> Any:
    """The middle of the repetitions (numbers), or the value most of them had (words)."""
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
        return round(statistics.median(vals), 3)
    return max(set(map(str, vals)), key=lambda v: [str(x) for x in vals].count(v))


def spread(values: Sequence[Any]) -> tuple[Any, Any] | None:
    vals = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return (min(vals), max(vals)) if len(vals) > 1 else None
