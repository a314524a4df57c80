"""run(spec): bring the cluster up, run workers and nemesis, always tear down, then check.

Order of teardown matters and is the same on success, error and Ctrl-C: stop the
nemesis schedule, heal every fault, stop the workers (resuming any paused one first),
record the final read of the counter, close the history, stop the cluster. Checkers run
last, on the history file alone, so a crash anywhere before leaves a checkable prefix.
"""

from __future__ import annotations

import queue as queue_mod
import re
import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path

from harness.core import faults, interrupts, plugins
from harness.cluster.assemble import make_cluster, preflight
from harness.cluster.kinds import recorded_facts, server_kind
from harness.core.contracts.cluster import Cluster
from harness.core.facts import VALIDITY, service_facts
from harness.engine.generator import Context, FaultSchedule, Pending
from harness.core.history import NEMESIS, Holders, HistoryWriter, Op, now_ns
from harness.core.progress import Progress
from harness.core.options import cluster_option, values
from harness.core.spec import TestSpec
from harness.core.errors import BadArgument
from harness.engine import native
from harness.engine.pool import Workers
from harness.engine.worker import DONE, FAILED, MAX_OPS_PER_S, READY, THROTTLED
from harness.core.contracts.nemesis import NemesisContext, Planned
from nemesis.base import Combined
from results import store

DRAIN_BUDGET_S = 0.05  # longest the runner records at a stretch before it looks at the schedule again


@dataclass
class RunOutcome:
    run_dir: Path
    summary: dict
    results: dict
    interrupted: bool = False
    signal: int | None = None  # what interrupted it (SIGINT, SIGTERM), when it was and that is known


class LiveState:
    """What the progress line shows, updated as ops stream in."""

    def __init__(self) -> None:
        self.ops = 0
        self.holders = Holders()
        self.violations = 0
        self.faults: list[str] = []

    def see_batch(self, batch: list[dict]) -> None:
        """A worker's recorded batch (dicts, as HistoryWriter.record took them)."""
        see = self.holders.see_fields
        for d in batch:
            f, type_ = d["f"], d["type"]
            if type_ != "invoke":
                self.ops += 1
            if f == "acquire" or f == "release":  # only these begin or end a hold
                self.violations += len(see(d["process"], f, type_, d.get("key")))


def run(spec: TestSpec, *, progress: bool = True, replay=None) -> RunOutcome:
    """Run one test; see the module docstring. Ctrl-C: the first press ends the run, later
    ones cannot cut its teardown short (harness/core/interrupts.py). `replay` (a
    harness/engine/replay.py Schedule) runs its recorded faults instead of planning them;
    spec.json's facts then name it (`replay`: the run it came from and its faults)."""
    spec = spec.validate()
    with interrupts.first_press_ends():
        return _run(spec, progress, replay)


def run_facts(spec: TestSpec, nemeses: list) -> dict:
    """What the checkers need to know about this run's servers and faults (harness/core/facts.py),
    so that checking a stored run loads no cluster, nemesis or client code."""
    kind, count = plugins.servers_of(spec.backend, spec.options)
    declared = values(spec.options, getattr(plugins.backend_class(spec.backend), "OPTIONS", ()))  # with defaults
    options = {**spec.options, **declared}
    owner = getattr(plugins.backend_class(spec.backend), "release_checks_owner", None)
    return {**service_facts(kind, count, options, spec.ttl_ms, recorded_facts(server_kind(kind, options))),
            "faults": faults.record(k for n in nemeses for k in getattr(n, "FAULTS", ())),
            # a bool on the client class, or (an external client) what its options say
            "release_checks_owner": owner(options) if callable(owner) else owner,
            "validity": VALIDITY,
            # the longest a polling design sleeps between tries (liveness's handover bound), if it polls
            "retry_delay_ms": declared.get("retry_delay_ms")}


def refuse_early(spec: TestSpec, replay=None) -> list:
    """The run's nemeses, or the BadArgument of a run that cannot be served, decided before
    its run dir exists and any server starts: what the spec says (TestSpec.validate did most;
    here what depends on planning its own faults, and on the load driver), two nemeses that
    handle one op, then the server binaries this host lacks."""
    from harness.core.refusals import fit

    if native.wanted(spec) and (why := native.refusal(spec)):
        raise BadArgument(why)
    if replay is None and spec.nemesis and (why := fit(spec)):  # a replay's faults bring their own timing
        raise BadArgument(why)
    nemeses = [plugins.nemesis_class(n)() for n in spec.nemesis]
    Combined(nemeses)  # refuses two nemeses that handle the same op
    preflight(spec)
    return nemeses


def _run(spec: TestSpec, progress: bool, replay=None) -> RunOutcome:
    pressed = interrupts.presses()  # any press counted from here on ends the run (a shield swallows none)
    nemeses = refuse_early(spec, replay)
    facts = run_facts(spec, nemeses)
    if replay is not None:
        facts["replay"] = replay.to_dict()
    spec = replace(spec, facts=facts)  # written with the spec, read by the checkers
    run_id = store.new_run_id()
    made_test_dir = not (Path(spec.store) / spec.name).exists()  # removed again if the run never starts
    run_dir = store.new_run_dir(spec.store, spec.name)
    store.write_spec(run_dir, spec)
    history = HistoryWriter(run_dir / "history.jsonl")
    try:
        cluster = make_cluster(spec, run_id, run_dir / "nodes", nemeses)
    except BaseException as e:
        history.close()
        _discard_unstarted(run_dir, made_test_dir, None, e)
        raise
    nemesis = Combined(nemeses)
    workers: Workers | None = None
    live = LiveState()
    show = Progress(enabled=progress, spec=spec)
    interrupted = False
    aborted: BaseException | None = None
    timings: dict[str, float] = {}
    errors: list[str] = []
    done: set[int] = set()  # workers that said their last op was sent
    started = False  # the cluster came up
    going = False  # the workers have opened their clients and work: a refusal now comes too late to discard the run

    def drain(block_s: float = 0.0, *, until_empty: bool = False) -> None:
        """Record what the workers sent. Waits up to block_s for the first message; returns
        when the queue is empty or, unless until_empty, once a reactive nemesis has planned an
        op (so a pause lands while its holder still holds) or after DRAIN_BUDGET_S of work, so
        workers that produce faster than the runner records never keep the run going."""
        if workers is None:
            return
        budget = time.monotonic() + block_s + DRAIN_BUDGET_S
        wait = block_s  # only the first message is waited for; the rest is what is there
        while True:
            try:
                d = workers.queue.get(timeout=wait) if wait else workers.queue.get(timeout=0.0001)
            except queue_mod.Empty:
                return
            wait = 0.0
            if type(d) is dict:
                if READY in d:  # a worker that opened its client after a Ctrl-C cut start() short
                    continue
                if DONE in d:
                    done.add(d[DONE])
                    continue
                if THROTTLED in d:
                    errors.append(f"worker c{d[THROTTLED] + 1} recorded more than {MAX_OPS_PER_S:,} ops in a second "
                                  f"and was slowed to that rate (its client answers in no time)")
                    continue
                if FAILED in d:  # a worker that stopped on an error (its log has the traceback)
                    errors.append(f"worker c{d[FAILED] + 1} stopped: {d.get('error')}")
                    continue
                d = [d]
            first = history.record(d, "an op from a worker")  # a worker's batch (harness.engine.worker.Recorder)
            workers.handed_in += len(d)
            live.see_batch(d)
            if schedule is not None and schedule.listens:
                for n, one in enumerate(d):
                    schedule.update(Context(time=(one["time_ns"] - t0) / 1e9), history.op_at(one, first + n))
                if schedule.reactive and not until_empty:
                    return  # a nemesis answered an op (a holder to pause): act on it now
            if not until_empty and time.monotonic() > budget:
                return

    def nemesis_op(p: Planned) -> None:
        inv = history.append(Op(time_ns=now_ns(), process=NEMESIS, type="invoke", f=p.f, value=p.value))
        try:
            done = nemesis.invoke(inv)
        except Exception as e:
            done = replace(inv, time_ns=now_ns(), type="info", error=f"{type(e).__name__}: {e}"[:300])
        history.append(done)
        if schedule is not None:  # a reactive nemesis may answer its own op's outcome
            schedule.update(Context(time=(done.time_ns - t0) / 1e9), done)
        live.faults = [f for f in live.faults if f != p.f]
        if p.phase == "fault" and done.type != "fail":
            live.faults.append(p.f)
        elif p.phase in ("heal", "final"):
            live.faults = []

    t0 = now_ns()
    max_history = cluster_option(spec.options, "max_history_mb") << 20
    requests_before: int | None = None
    schedule: FaultSchedule | None = None
    try:
        t = time.monotonic()
        show.status("starting cluster")
        cluster.up()
        started = True
        timings["cluster_up_s"] = round(time.monotonic() - t, 3)
        workers = (native.NativeLoad if native.wanted(spec) else Workers)(spec, cluster, run_dir / "nodes")
        nemesis.setup(NemesisContext(spec=spec, cluster=cluster, workers=workers))
        fault_phase = spec.time_limit - spec.recovery
        schedule = FaultSchedule(nemesis, spec.seed, fault_phase, spec.nemesis_interval,
                                 replay=None if replay is None else replay.faults)
        workers.start()
        going = True
        store.link_latest(Path(spec.store), run_dir)
        # Count time from when the workers are ready to work, not from process spawn.
        t0 = now_ns()
        requests_before = _requests(cluster)
        end = t0 + int(spec.time_limit * 1e9)
        while now_ns() < end:
            if interrupts.presses() > pressed:  # a press a start-up step held back and did not hand on
                raise KeyboardInterrupt
            elapsed = (now_ns() - t0) / 1e9
            nxt = schedule.op(Context(time=elapsed))
            if isinstance(nxt, Planned):
                nemesis_op(nxt)
                continue
            wait = 0.1 if not isinstance(nxt, Pending) else max(0.0, min(0.1, nxt.until - elapsed))
            drain(wait)
            show.update(elapsed, live)
            if workers.alive() == 0:
                errors.append("every worker exited early; see the worker errors in the history")
                break
            if history.size > max_history:
                errors.append(f"the history reached {history.size >> 20:,} MB (-o max_history_mb="
                              f"{max_history >> 20}) after {(now_ns() - t0) / 1e9:.0f} s, so the workload stopped "
                              f"there; the verdict covers that part")
                break
        while schedule is not None and (nxt := schedule.op(Context(time=float("inf")))) is not None:  # the final heal, if still due
            if isinstance(nxt, Planned):
                nemesis_op(nxt)
    except KeyboardInterrupt:
        interrupted = True
        show.status("interrupted: healing and stopping")
    except BaseException as e:  # recorded, so no later check can call this run valid; then raised
        aborted = e
    finally:  # each step on its own: whatever fails, the cluster still comes down
        interrupts.ending()  # a press from here on is counted (the run is interrupted), never raised
        presses_before = interrupts.presses()
        holes: dict = {}
        with interrupts.shielded("cleaning up: healing the faults, stopping the workers and servers"):
            holes = _teardown(spec, nemesis, workers, drain, done, cluster, history, started, errors, timings,
                                 requests_before)
            show.close()
        interrupted = interrupted or interrupts.presses() > presses_before
    # Failed to start, or refused during start-up (a nemesis that needs a capability this
    # cluster lacks, a client whose init refuses the lock kind): leave no run dir.
    refused = isinstance(aborted, BadArgument) and not going
    if (not started or refused) and not interrupted and aborted is not None:
        _discard_unstarted(run_dir, made_test_dir, cluster, aborted)
        raise aborted
    if started and not going:  # interrupted, or an error, during start-up: the run dir stays, latest points at it
        store.link_latest(Path(spec.store), run_dir)
    outcome = {"run_id": run_id, "interrupted": interrupted, "started": started,
               "aborted": None if aborted is None else _reason(aborted)}
    if interrupted:
        outcome["signal"] = interrupts.signal_name()  # SIGINT (Ctrl-C), SIGTERM or SIGHUP
    outcome.update({k: v for k, v in holes.items() if v})  # the history has holes: no verdict (checker/policy.py)
    from harness.engine.analysis import OUTCOME, analyse, unchecked

    store.write_json(run_dir / OUTCOME, outcome)
    if "clock-skew" in spec.nemesis and not Combined(nemeses).moves_server_clocks(spec):
        # What an in-process client clock skew can reach in this backend (often nothing).
        from harness.core.contracts.client import ReadsWallClock

        client = plugins.backend_class(spec.backend)(spec.options, None)
        timings["client_clock_reads"] = list(client.clock_reads if isinstance(client, ReadsWallClock) else ()) or \
            ["none: this backend times its leases with the monotonic clock"]
    try:
        with interrupts.shielded("checking the history and writing the results",
                                 skip=f"skip the checks (run `chaos report {run_dir}` later)"):
            results = analyse(spec, run_dir, timings=timings, errors=errors, interrupted=interrupted,
                              fallback=cluster.fallback_reason, store_dir=spec.store)
    except KeyboardInterrupt:
        interrupted = True
        outcome["signal"] = interrupts.signal_name()
        results = unchecked(spec, run_dir, outcome, f"the checks were skipped ({interrupts.how()}); "
                                                    f"run `chaos report {run_dir}`")
    else:
        if not interrupted and interrupts.presses() > presses_before:
            # one press while the checks ran: they finished, but the command was asked to stop
            interrupted = True
            outcome["signal"] = interrupts.signal_name()
            store.write_json(run_dir / OUTCOME, outcome)
            results["summary"].update(interrupted=True, interrupted_by=outcome["signal"])
            store.write_json(run_dir / "results.json", results)
    if aborted is not None:
        raise aborted
    return RunOutcome(run_dir=run_dir, summary=results["summary"], results=results, interrupted=interrupted,
                      signal=interrupts.ended_by() if interrupted else None)


_UNSTARTED_FILES = ("spec.json", "history.jsonl", "outcome.json", "results.json")  # what a run writes before it starts


def _discard_unstarted(run_dir: Path, made_test_dir: bool, cluster: Cluster | None, error: BaseException) -> None:
    """A run whose cluster never came up, or that was refused while starting (a BadArgument
    before its workers went), leaves no run dir (`latest` was never moved to it): remove what
    this run wrote there (spec.json, history.jsonl, nodes/), and the test's dir
    if this run made it. First the error takes over what the dir held for the user: a message
    that points into the run dir gets the last lines of the server logs it points at."""
    message = str(error)
    if str(run_dir) in message:
        tails = "" if " ends: " in message else _log_tails(run_dir / "nodes", cluster, message)
        error.args = (f"{message} (the run never started, so {run_dir} was removed"
                      + (f"; {tails})" if tails else ")"),)
    for name in _UNSTARTED_FILES:
        try:
            (run_dir / name).unlink()
        except FileNotFoundError:
            pass
    shutil.rmtree(run_dir / "nodes", ignore_errors=True)
    for d in [run_dir] + ([run_dir.parent] if made_test_dir else []):
        try:
            d.rmdir()  # only if empty: anything this run did not write stays, and so does its dir
        except OSError:
            break


def _log_tails(log_dir: Path, cluster: Cluster | None, message: str, lines: int = 3, most: int = 6) -> str:
    """The last lines of the server logs in log_dir, those of the kinds the message names
    first ("etcd did not become ready ..."), as one line."""
    try:
        kinds = {n.name: n.kind for n in cluster.nodes} if cluster is not None else {}
    except Exception:  # a provider that failed half way may not know its nodes
        kinds = {}
    head = message.split(" did not become ready")[0]
    logs = sorted(log_dir.glob("*.log"))
    named = [p for p in logs if kinds.get(p.stem) and re.search(rf"\b{re.escape(kinds[p.stem])}\b", head)]
    said = []
    for p in (named or logs)[:most]:
        try:
            text = p.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        last = [line.strip()[:200] for line in text.splitlines() if line.strip()][-lines:]
        said.append(f"{p.name} ends: {' | '.join(last)}" if last else f"{p.name} is empty")
    return "; ".join(said)


def _reason(e: BaseException) -> str:
    from harness.core.errors import ChaosError

    return str(e) if isinstance(e, ChaosError) else f"the run crashed: {type(e).__name__}: {e}"[:500]


def _teardown(spec, nemesis, workers, drain, done, cluster, history, started, errors, timings,
              requests_before) -> dict:
    """Heal, stop the workers, read the counter, close the history, stop the cluster: each
    step on its own, so whatever fails, the cluster still comes down. Returns the holes in
    the history: `ops_lost`, how many ops the workers recorded that never reached it (a
    worker killed before it handed them in: a SIGKILL from outside, or one that did not stop
    in time), and `workers_died`, the workers a signal from outside ended (what they held
    and had in flight is in doubt)."""
    lost_ops = 0
    died: list[str] = []
    try:
        nemesis.teardown()
    except Exception as e:
        errors.append(f"nemesis teardown: {e}")
    try:
        if workers is not None:
            # A worker ends its cycle and leaves: a grace of a lease and an acquire, plus
            # the time 2 cores take to see hundreds of workers out.
            killed = workers.stop(grace=spec.ttl_ms / 1000 + spec.acquire_timeout + 2 + spec.concurrency * 0.02,
                                  drain=drain)
            # A worker that exited had its last batch in the queue's pipe first (worker_main),
            # so what is left is there now: no need to wait for more.
            drain(0.02, until_empty=True)
            after = _requests(cluster) if requests_before is not None else None
            if after is not None and after >= requests_before:  # a restarted server counts from 0 again
                timings["server_requests"] = after - requests_before
            if workers.strays:  # the run's cgroup found them (harness/cluster/containment.py)
                errors.append(f"{len(workers.strays)} process(es) outlived the workers that started them and were "
                              f"killed: {'; '.join(workers.strays[:3])}")
            errors.extend(getattr(workers, "notes", ()))  # the native driver's (harness/engine/native.py)
            lost = sorted(set(killed) - done)
            if lost:
                errors.append(f"worker(s) {', '.join(f'c{i + 1}' for i in lost)} did not stop in time and were killed; "
                              f"their last ops may be missing from the history")
            for i, signum in getattr(workers, "died", ()):
                errors.append(f"worker c{i + 1} was ended by signal {signum} during the run (not by a nemesis)")
                died.append(f"c{i + 1} (signal {signum})")
            lost_ops = workers.lost_ops()
            if lost_ops:
                errors.append(f"{lost_ops} op(s) the workers recorded never reached the history (a worker was killed "
                              f"before it handed them in), so the history has holes and cannot prove a violation")
        if started:
            _final_read(spec, cluster, history)
    except Exception as e:
        errors.append(f"stopping the workers: {type(e).__name__}: {e}")
    finally:
        history.close()
        t = time.monotonic()
        cluster.down()
        timings["cluster_down_s"] = round(time.monotonic() - t, 3)
        strays = getattr(cluster, "strays", None)
        if strays:
            errors.append(f"{len(strays)} process(es) were still in the run's cgroup after the servers stopped and "
                          f"were killed: {'; '.join(strays[:3])}")
    return {"ops_lost": lost_ops, "workers_died": died}


def _requests(cluster: Cluster) -> int | None:
    """What the lock servers have served so far (None: the provider or a kind cannot say)."""
    count = getattr(cluster, "requests_served", None)
    return count() if count is not None else None


def _final_read(spec: TestSpec, cluster: Cluster, history: HistoryWriter) -> None:
    """Read every key's counter once all workers are gone: the ground truth for lost updates."""
    from workloads.resource import FencedCounter

    node = next((n for n in cluster.nodes if n.role == "store"), None)
    if node is None:
        return
    conn = None
    for lock_key in spec.lock_keys:
        key = f"{lock_key}:counter"
        history.append(Op(time_ns=now_ns(), process="final", type="invoke", f="read", key=key))
        try:
            c = FencedCounter(node, lock_key, fencing=False, conn=conn)
            conn = c.conn
            v = c.read(None)
            history.append(Op(time_ns=now_ns(), process="final", type="ok", f="read", key=key, value=v))
        except Exception as e:
            history.append(Op(time_ns=now_ns(), process="final", type="info", f="read", key=key, error=str(e)[:300]))
    if conn is not None:
        conn.close()
