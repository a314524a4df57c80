"""One client worker: an OS process with its own LockClient, looping through the workload.

Processes, not threads, so a nemesis can SIGSTOP a lock holder (the articles' GC pause)
or skew its clock without touching the others. The worker records each op twice, at
invoke and at completion, by sending it to the runner, which writes the history. Times
are CLOCK_MONOTONIC, shared by every process on the host.

The workload (one cycle): acquire -> ask the client whether it still holds the lease
(watchdog, session) -> read the counter -> hold for a random time that stays inside the
lease's validity -> write counter+1 -> release. The check comes once, before the work, as
in most code: a pause during the work goes unseen, which is what fencing is for. With fencing the read
and the write present the lease's token. A worker that gets an `info` (it cannot tell
whether its op happened) continues as a new process id, as in Jepsen: the old id may
still hold a lock nobody will ever release, and the checkers must see that.
"""

from __future__ import annotations

import logging
import math
import multiprocessing as mp
import os
import queue as queue_mod
import random
import shutil
import signal
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from harness.core.contracts.cluster import Cluster
from harness.core.errors import ClusterError, NotAcquired
from harness.core.history import begins_hold, ends_hold, now_ns
from harness.core.interrupts import die_with_parent
from workloads.resource import STALE, StaleToken

READY = "ready"  # the message a worker sends once its client is open
DONE = "done"  # the message a worker sends after its last op: {DONE: index}
FAILED = "failed"  # the message a worker sends instead when it cannot go on: {FAILED: index, "error", "bad_argument"}
THROTTLED = "throttled"  # the message a worker sends the first time its recording is slowed: {THROTTLED: index}
MAX_OPS_PER_S = 50_000  # most ops one worker records per second (a client answering in no time floods the history)
SAFETY_MARGIN = 0.2  # fraction of the TTL kept free between the end of a hold and expiry


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerArgs:
    index: int  # 0-based worker slot
    spec: Any  # TestSpec
    nodes: tuple  # Node values of the lock service
    store: Any  # Node of the resource server
    netns: str | None = None
    clocks: Any = None  # shared array of wall-clock offsets, one per worker (in-process skew)
    clock_seen: Any = None  # the offsets external client processes report of their own clocks
    holding: Any = None  # shared flags, one per worker: 1 from an ok acquire to its release (pause-holder aims by it)
    log_path: str | None = None  # where the client libraries' own logging goes
    cgroup_procs: str | None = None  # the run's clients cgroup (harness/cluster/containment.py), joined first
    waiting: Any = None  # shared flags, one per worker: 1 from an acquire's invoke to its completion (pause-waiter)
    recorded: Any = None  # shared counts, one per worker: ops recorded so far (kill-holder: all of them received?)
    processes: Any = None  # shared, one per worker: the process id it records under now
    first_process: int | None = None  # a respawned worker's first process id (default: its index)
    deadline: float | None = None  # a respawned worker's end of the workload (monotonic), else go + time_limit


class Recorder:
    """Sends ops to the runner. It also keeps this worker's flag in the shared `holding`
    array: set on an ok acquire, cleared before a release is invoked, so a process stopped
    while its flag is set is certainly stopped inside its critical section.

    With `batch` it keeps ops and sends them as one list: on `flush()` (the worker calls
    it before it sleeps, so a reactive nemesis sees a holder's read before its hold), on
    `settle()` once the oldest kept op is FLUSH_S old (the end of each cycle), or when
    `batch` are kept. A worker that cycles a thousand times a second then costs the runner
    a few dozen messages, not eight thousand. Each op is still stamped when it happens;
    only its delivery waits."""

    def __init__(self, queue, process: int, holding=None, index: int = 0, batch: int | None = None,
                 max_rate: int = MAX_OPS_PER_S, waiting=None, recorded=None, processes=None):
        self.queue = queue
        self.holding, self.index = holding, index
        self.waiting, self.recorded, self.processes = waiting, recorded, processes
        self.process = process
        self.batch = batch
        self.kept: list[dict] = []
        self.since = 0.0  # monotonic time of the oldest kept op
        self.window, self.in_window = time.monotonic(), 0  # the current second and the ops sent in it
        self.max_rate = max_rate
        self.throttled = 0  # seconds in which this worker was slowed to max_rate

    @property
    def process(self) -> int:
        return self._process

    @process.setter
    def process(self, p: int) -> None:
        self._process = p
        if self.processes is not None:
            self.processes[self.index] = p

    def __call__(self, type_: str, f: str, **kw) -> None:
        if self.holding is not None:
            if ends_hold(f, type_):
                self.holding[self.index] = 0
            elif begins_hold(f, type_):
                self.holding[self.index] = 1
        if self.waiting is not None and f == "acquire":
            self.waiting[self.index] = int(type_ == "invoke")
        if self.recorded is not None:
            self.recorded[self.index] += 1
        d = {"time_ns": now_ns(), "process": self._process, "type": type_, "f": f}
        for k, v in kw.items():
            if v is not None:
                d[k] = v
        if self.batch is None:
            self.queue.put(d)
            return
        if not self.kept:
            self.since = time.monotonic()
        self.kept.append(d)
        if len(self.kept) >= self.batch:
            self.flush()

    def flush(self) -> None:
        """Send what is kept. A worker that has sent MAX_OPS_PER_S ops in the current second
        waits for the next one (told to the runner once): no op is dropped, since a history
        with holes proves nothing, but no client can flood the runner and the disk."""
        if self.kept:
            self.queue.put(self.kept)
            self.in_window += len(self.kept)
            self.kept = []
            now = time.monotonic()
            if now - self.window >= 1.0:
                self.window, self.in_window = now, 0
            elif self.in_window > self.max_rate:
                if not self.throttled:
                    self.queue.put({THROTTLED: self.index})
                self.throttled += 1
                time.sleep(1.0 - (now - self.window))
                self.window, self.in_window = time.monotonic(), 0

    def settle(self) -> None:
        """Send what is kept if the oldest of it has waited FLUSH_S."""
        if self.kept and time.monotonic() - self.since >= FLUSH_S:
            self.flush()


BATCH = 256  # ops a worker keeps at most before it sends them
FLUSH_S = 0.02  # longest an op waits in its worker (the live view and the reactive nemeses lag this much)


def worker_main(args: WorkerArgs, queue, stop, go) -> None:
    """Entry point of a worker process. Says READY once its client is open, starts when
    `go` is set (so every worker starts together), returns when `stop` is set.

    Must not print a traceback on the user's terminal: an error that ends the worker goes,
    with its traceback, to the worker's log, and as one FAILED message to the runner."""
    if args.cgroup_procs:  # the fork server is in it already; this holds where it could not join
        from harness.cluster.containment import RunCgroup

        RunCgroup.join_file(args.cgroup_procs)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the runner owns Ctrl-C and stops us
    os.setpgid(0, 0)  # a group of our own: a pause stops us and an external client's process together
    die_with_parent()  # a SIGKILLed runner must not leave its workers looping (they carry no run id)
    try:
        _work(args, queue, stop, go)
    except BaseException as e:
        import traceback

        from harness.core.errors import BadArgument

        if args.log_path:
            try:
                with open(args.log_path, "a") as log:
                    log.write(f"worker c{args.index + 1} stopped by an error:\n{traceback.format_exc()}")
            except OSError:
                pass
        queue.put({FAILED: args.index, "error": str(e) if isinstance(e, BadArgument) else _err(e),
                   "bad_argument": isinstance(e, BadArgument)})
        raise SystemExit(1) from None
    # Everything is sent: wait until the queue's pipe has it, then leave without the
    # interpreter's teardown, which for 256 workers on 2 cores takes longer than the
    # runner's grace (and a worker killed then would take its last ops with it).
    queue.close()
    queue.join_thread()
    logging.shutdown()
    os._exit(0)


def _work(args: WorkerArgs, queue, stop, go) -> None:
    if args.log_path:
        # Client libraries (kazoo, pottery, grpc) log to stderr; keep that in the run dir, up
        # to a cap (a library that logs every retry of a dead server would fill the store).
        from harness.core.outputcap import CappedHandler

        logging.basicConfig(handlers=[CappedHandler(args.log_path)], level=logging.INFO,
                            format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if args.log_path:
        from workloads.external import LOG_ENV

        os.environ[LOG_ENV] = args.log_path  # an external client's stderr is kept beside this log
    if args.netns:
        from harness.cluster.netns import enter_netns

        enter_netns(args.netns)
    from harness.core import plugins
    from harness.core.contracts.client import Clock
    from workloads.resource import FencedCounter

    spec = args.spec
    first = args.index if args.first_process is None else args.first_process
    rng = random.Random(spec.seed * 7919 + first)
    client = plugins.backend_class(spec.backend)(spec.options, Clock(args.clocks, args.index, args.clock_seen))
    client.open(args.nodes)
    keys = spec.lock_keys
    store = FencedCounter(args.store, keys[0], fencing=spec.fencing)
    counters = {keys[0]: store}
    rec = Recorder(queue, first, args.holding, args.index, batch=BATCH, waiting=args.waiting,
                   recorded=args.recorded, processes=args.processes)
    queue.put({READY: args.index})
    go.wait()
    # the runner stops the workers then (its clock starts at go); a respawned worker is told when
    end = args.deadline if args.deadline is not None else time.monotonic() + spec.time_limit
    try:
        while not stop.is_set():
            key = keys[rng.randrange(len(keys))] if len(keys) > 1 else keys[0]
            counter = counters.get(key)
            if counter is None:
                counter = counters[key] = FencedCounter(args.store, key, fencing=spec.fencing, conn=store.conn)
            if not cycle(spec, client, counter, rec, rng, end=end, key=key):
                rec.process += spec.concurrency
            rec.settle()
    finally:
        rec.flush()
        try:
            client.close()
            store.close()
        except Exception:
            pass
    queue.put({DONE: args.index})


def _err(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"[:300]


# An acquire invoked near the end of the run waits at most until the end (but this long):
# the runner then stops the workers and waits for the cycles in flight, so an acquire that
# could wait its full timeout past the end would only make every run's teardown longer.
TAIL_TIMEOUT_S = 0.25


def cycle(spec, client, counter, rec: Recorder, rng: random.Random, end: float | None = None,
          key: str | None = None) -> bool:
    """One acquire/critical-section/release cycle on `key` (default: the spec's), with
    `counter` that key's. False when the process id must change. `end` (monotonic) is
    when the run stops: acquires invoked close to it wait less."""
    key = key or spec.key
    rec("invoke", "acquire", key=key)
    started = time.monotonic()
    timeout = spec.acquire_timeout if end is None else min(spec.acquire_timeout, max(TAIL_TIMEOUT_S, end - started))
    try:
        lease = client.acquire(key, spec.ttl_ms, timeout)
    except NotAcquired as e:
        rec("fail", "acquire", key=key, error=str(e)[:300])
        _backoff(started, rng, rec)
        return True
    except Exception as e:
        rec("info", "acquire", key=key, error=_err(e))
        _backoff(started, rng, rec)
        return False
    rec("ok", "acquire", key=key, value=lease.value, token=lease.token, valid_until_ns=lease.valid_until_ns)
    token = lease.token
    resource = f"{key}:counter"
    if not still_held(client, lease):
        # The watchdog or the session already says the lock is gone: do no work under it.
        return release(client, lease, rec)
    if spec.reenter and not reenter(spec, client, lease, rec):
        release(client, lease, rec)
        return False

    rec("invoke", "read", key=resource, token=token)
    value = None
    try:
        value = counter.read(token)
        rec("ok", "read", key=resource, value=value, token=token)
    except StaleToken:
        rec("fail", "read", key=resource, token=token, error=STALE)
    except Exception as e:
        rec("info", "read", key=resource, token=token, error=_err(e))
        release(client, lease, rec)
        return False

    if value is not None:
        if spec.renew:
            lease, keep = work_renewing(spec, client, lease, rec, rng)
            if keep is not None:  # the lease was lost or in doubt: no write under it
                return release(client, lease, rec) and keep
        else:
            hold = rng.uniform(0, max(0.0, min(spec.hold_max, _remaining(lease, spec))))
            if hold > 0:
                rec.flush()
                time.sleep(hold)
        rec("invoke", "write", key=resource, value=value + 1, token=token)
        try:
            counter.write(value + 1, token)
            rec("ok", "write", key=resource, value=value + 1, token=token)
        except StaleToken:
            rec("fail", "write", key=resource, value=value + 1, token=token, error=STALE)
        except Exception as e:
            rec("info", "write", key=resource, value=value + 1, token=token, error=_err(e))
            release(client, lease, rec)
            return False
    return release(client, lease, rec)


def reenter(spec, client, lease, rec: Recorder) -> bool:
    """`--reenter`: ask for the held lock again (reacquire, briefly) and give back what that
    got (rerelease). False when an outcome is in doubt (the process id must change)."""
    from harness.checker.properties import REENTER_TIMEOUT_S

    key = lease.key
    rec("invoke", "reacquire", key=key)
    try:
        # never longer than the lease has left: a holder blocked on itself would outlive it
        wait = min(REENTER_TIMEOUT_S, spec.acquire_timeout, max(0.01, _remaining(lease, spec)))
        inner = client.acquire(key, spec.ttl_ms, wait)
    except NotAcquired as e:
        rec("fail", "reacquire", key=key, error=str(e)[:300])
        return True
    except Exception as e:
        rec("info", "reacquire", key=key, error=_err(e))
        return False
    rec("ok", "reacquire", key=key, value=inner.value, token=inner.token)
    rec("invoke", "rerelease", key=key, value=inner.value)
    try:
        freed = client.release(inner)
    except Exception as e:
        rec("info", "rerelease", key=key, value=inner.value, error=_err(e))
        return False
    rec("ok" if freed else "fail", "rerelease", key=key, value=inner.value, error=None if freed else "not held")
    return True


def _remaining(lease, spec) -> float:
    """Seconds the holder may still work under `lease`, keeping a safety margin."""
    return (lease.valid_until_ns - time.monotonic_ns()) / 1e9 - SAFETY_MARGIN * spec.ttl_ms / 1000


def work_renewing(spec, client, lease, rec: Recorder, rng: random.Random):
    """`--renew`: work 1-2 TTLs in slices of at most TTL/3, renewing after each slice, in
    the foreground (the articles' watchdog, on the worker's own thread). Every renew is an
    op. Returns (lease, None) when the work is done, (lease, True) when a renew failed
    (the lock is certainly lost: do not write), (lease, False) when one is in doubt (info:
    do not write, and continue as a new process)."""
    from harness.core.errors import LockLost

    ttl_s = spec.ttl_ms / 1000
    left = rng.uniform(1.0, 2.0) * ttl_s
    while left > 0:
        step = min(ttl_s / 3, left, max(0.0, _remaining(lease, spec)))
        rec.flush()
        time.sleep(step)
        left -= step
        if left <= 0:
            break
        rec("invoke", "renew", key=lease.key, value=lease.value)
        try:
            lease = client.renew(lease)
        except LockLost as e:
            rec("fail", "renew", key=lease.key, value=lease.value, error=str(e)[:300])
            return lease, True
        except Exception as e:
            rec("info", "renew", key=lease.key, value=lease.value, error=_err(e))
            return lease, False
        rec("ok", "renew", key=lease.key, value=lease.value, token=lease.token, valid_until_ns=lease.valid_until_ns)
    return lease, None


def _backoff(started: float, rng: random.Random, rec: Recorder) -> None:
    """After an acquire that failed at once (a refused connection, a library that does not
    wait), pause a little, so a dead server costs a few ops, not a hot loop of them."""
    if time.monotonic() - started < 0.01:
        rec.flush()
        time.sleep(rng.uniform(0.02, 0.1))


def still_held(client, lease) -> bool:
    """The client's own belief (watchdog, session state); True when it has no opinion."""
    has = _HAS_OPINION.get(type(client))
    if has is None:  # a Protocol check costs as much as a redis call: once per class
        from harness.core.contracts.client import StillHeld

        has = _HAS_OPINION[type(client)] = isinstance(client, StillHeld)
    return bool(client.still_held(lease)) if has else True


_HAS_OPINION: dict[type, bool] = {}


def release(client, lease, rec: Recorder) -> bool:
    rec("invoke", "release", key=lease.key, value=lease.value)
    try:
        if client.release(lease):
            rec("ok", "release", key=lease.key, value=lease.value)
        else:
            rec("fail", "release", key=lease.key, value=lease.value, error="not held")
        return True
    except Exception as e:
        rec("info", "release", key=lease.key, value=lease.value, error=_err(e))
        return False


def _context():
    """Workers are forked from a server process that imported their code once (a spawned
    worker imports it again: 256 of them took 45 s of 2 cores to start). Each run starts
    its own (at its first worker) and stops it once its workers are gone (_stop_forkserver),
    so a worker always has its runner's environment and directory, and nothing outlives the
    run, also in a process that runs many (pytest, chaos compare)."""
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["harness.engine.forkserver_guard", "harness.engine.worker", "workloads.redis_single", "workloads.redlock", "workloads.etcd",
                                "workloads.zookeeper", "workloads.resource"])
    return ctx


def _forkserver_pid() -> int | None:
    from multiprocessing import forkserver

    return getattr(forkserver._forkserver, "_forkserver_pid", None)


def _stop_forkserver(wait_s: float = 3.0) -> None:
    """Stop this process's fork server, after its workers are gone (its death kills them:
    PR_SET_PDEATHSIG). multiprocessing has no public call for it; its own tests use
    ForkServer._stop, which waits until every process holding the server's "alive" pipe has
    exited: a child nobody stopped would make that wait last for ever, so the server gets
    wait_s to leave and is killed after that."""
    from multiprocessing import forkserver

    server = forkserver._forkserver
    pid = getattr(server, "_forkserver_pid", None)
    if pid is None:
        return
    deadline = time.monotonic() + wait_s
    try:
        os.close(server._forkserver_alive_fd)
    except OSError:
        pass
    while True:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            break
        if done:
            break
        if time.monotonic() > deadline:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(pid, 0)
            break
        time.sleep(0.01)
    address = server._forkserver_address
    server._forkserver_alive_fd = server._forkserver_pid = server._forkserver_address = None
    from multiprocessing import util

    if address and not util.is_abstract_socket_namespace(address):
        try:
            os.unlink(address)
        except OSError:
            pass


def group_members(pgid: int) -> set[int]:
    """The live processes (zombies excluded) of a process group, from /proc."""
    found = set()
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] != "Z":
            found.add(int(d))
    return found


class Workers:
    """The runner's side: the client processes, started together, paused and resumed for
    the nemeses, stopped at the end (resuming paused ones first)."""

    def __init__(self, spec: Any, cluster: Cluster, log_dir: Path | None = None):
        self.ctx = _context()
        self.queue = self.ctx.Queue()
        self.stop_event = self.ctx.Event()
        self.go = self.ctx.Event()
        self.clocks = self.ctx.Array("d", spec.concurrency, lock=False)  # wall-clock offsets
        self.clock_seen = self.ctx.Array("d", [math.nan] * spec.concurrency, lock=False)  # read back by a client process
        self.external = spec.backend == "external"
        self.holding = self.ctx.Array("b", spec.concurrency, lock=False)  # 1 while a worker holds the lock
        self.waiting = self.ctx.Array("b", spec.concurrency, lock=False)  # 1 while its acquire is in flight
        self.recorded = self.ctx.Array("q", spec.concurrency, lock=False)  # ops each worker has recorded
        self.processes = self.ctx.Array("q", list(range(spec.concurrency)), lock=False)  # its process id now
        self.procs: list[Any] = []
        self.args: list[WorkerArgs] = []
        self.paused: set[int] = set()
        self.down: set[int] = set()  # killed, not yet respawned (they count as alive: they will be back)
        self.gone: list[Any] = []  # the Process objects of killed workers, joined at stop
        self.time_limit = spec.time_limit
        self.concurrency = spec.concurrency
        self.went = None  # monotonic time of go
        self.log_dir = log_dir
        state = getattr(cluster, "dir", None)  # the run's state dir (harness/cluster/local.py)
        self.contained = getattr(cluster, "contained", None)  # the run's cgroup (harness/cluster/containment.py)
        self.run_id = getattr(cluster, "run_id", None)
        self.strays: list[str] = []  # processes left in the clients' cgroup after the workers stopped
        procs = self.contained.procs("clients") if self.contained is not None else None
        self.mp_dir = Path(state) / "mp" if state is not None else None
        self.options = dict(spec.options)
        store_node = next(n for n in cluster.nodes if n.role == "store")
        for i in range(spec.concurrency):
            place = cluster.client(i)  # compose workers reach the servers through their own proxies
            args = WorkerArgs(index=i, spec=spec, nodes=place.nodes, store=store_node, netns=place.netns,
                              clocks=self.clocks, clock_seen=self.clock_seen, holding=self.holding,
                              log_path=str(log_dir / f"worker-c{i + 1}.log") if log_dir else None,
                              cgroup_procs=procs, waiting=self.waiting, recorded=self.recorded,
                              processes=self.processes)
            self.args.append(args)
            self.procs.append(self._process(args))

    def _process(self, args: WorkerArgs):
        return self.ctx.Process(target=worker_main, args=(args, self.queue, self.stop_event, self.go),
                                name=f"chaos-worker-{args.index}", daemon=True)

    def start(self, timeout: float = 60.0) -> None:
        """Spawn every worker, wait until each has opened its client, then let them go."""
        # Ctrl-C waits until every worker is spawned: a start cut half way leaves a child the
        # fork server made but no Process object knows, which nothing would stop.
        from harness.cluster.containment import PROCS_ENV
        from harness.cluster.provider import RUN_ENV
        from harness.core.interrupts import deferred

        if self.mp_dir is not None:
            # The fork server's socket lives here, in the run's state dir, which teardown and
            # `chaos cluster down --all` remove: not in a /tmp/pymp-* that a SIGKILL leaves.
            self.mp_dir.mkdir(parents=True, exist_ok=True)
            mp.current_process()._config["tempdir"] = str(self.mp_dir)
        # The fork server starts with the first worker and takes this environment: it joins
        # the run's cgroup (forkserver_guard) and its workers carry the run id.
        env = {PROCS_ENV: self.contained.procs("clients") if self.contained is not None else None, RUN_ENV: self.run_id}
        before = {k: os.environ.get(k) for k in env}
        with deferred():
            try:
                for k, v in env.items():
                    if v is not None:
                        os.environ[k] = v
                for p in self.procs:
                    p.start()
            finally:
                for k, v in before.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
        ready: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(ready) < len(self.procs):
            try:
                msg = self.queue.get(timeout=0.2)
            except queue_mod.Empty:
                dead = [i for i, p in enumerate(self.procs) if not p.is_alive() and i not in ready]
                if dead or time.monotonic() > deadline:
                    which = ", ".join(f"c{i + 1}" for i in (dead or sorted(set(range(len(self.procs))) - ready)))
                    raise ClusterError(f"worker(s) {which} {'exited' if dead else 'did not open their lock client in time'}"
                                       f"; see the worker logs in {self.log_dir}")
                continue
            if FAILED in msg:
                self.failed(msg)
            ready.add(msg[READY])
        self.go.set()
        self.went = time.monotonic()

    def failed(self, msg: dict) -> None:
        """Raise the error a worker reported while opening its client, as one sentence."""
        from harness.core.errors import BadArgument

        i = msg[FAILED]
        if msg.get("bad_argument"):
            raise BadArgument(msg["error"])
        given = ", ".join(f"-o {k}={v}" for k, v in self.options.items())
        where = f"; the traceback is in {self.log_dir / f'worker-c{i + 1}.log'}" if self.log_dir else ""
        raise ClusterError(f"worker c{i + 1} could not open its lock client ({msg['error']})"
                           + (f"; this run set {given}" if given else "") + where)

    def pid(self, index: int) -> int:
        return self.procs[index].pid

    def pause(self, index: int, wait_s: float = 1.0) -> bool:
        """SIGSTOP a worker and wait until the kernel says it is stopped; False if it did
        not stop within wait_s (it is still counted as paused and resumed later)."""
        from harness.cluster.reaper import proc_state

        pid = self.pid(index)
        os.killpg(pid, signal.SIGSTOP)  # the worker and any client process it runs (its own group)
        self.paused.add(index)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            state = proc_state(pid)
            if state is None or state in "Tt":
                return state is not None
            time.sleep(0.001)
        return False

    def holding_lock(self, index: int) -> bool:
        """The worker's own flag: between an ok acquire and the invocation of its release."""
        return bool(self.holding[index])

    def resume(self, index: int) -> None:
        if index not in self.down:
            os.killpg(self.pid(index), signal.SIGCONT)
        self.paused.discard(index)

    def waiting_on_acquire(self, index: int) -> bool:
        """The worker's own flag: between the invoke of an acquire and its completion."""
        return bool(self.waiting[index])

    def process_of(self, index: int) -> int:
        """The process id the worker records under now (it changes after an info, and on respawn)."""
        return int(self.processes[index])

    def ops_recorded(self, index: int) -> int:
        """How many ops the worker (all its processes) has recorded: equal to the number the
        runner received from it when nothing is kept in the worker or still in the pipe."""
        return int(self.recorded[index])

    def queue_busy(self) -> bool:
        """Whether some process is writing into the workers' queue now. A worker killed while
        it writes would leave half a message and the queue's lock held for ever (every other
        worker then blocks). multiprocessing has no public call for it: the lock's value."""
        try:
            return self.queue._wlock._semlock._get_value() == 0
        except AttributeError:  # no write lock (not Linux): nothing to wait for
            return False

    def kill(self, index: int, wait_s: float = 5.0) -> dict:
        """SIGKILL the worker's process group (its client process too) and wait until no
        process of the group is left (a zombie is gone). Returns {"pid", "group", "gone_ms"}
        with "gone": False if some did not go within wait_s. Its flags are cleared (it holds
        and waits for nothing now) and it stays down until `respawn`."""
        pid = self.pid(index)
        group = group_members(pid)
        t = time.monotonic()
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.down.add(index)
        self.paused.discard(index)
        self.holding[index] = self.waiting[index] = 0
        left = group
        while left and time.monotonic() - t < wait_s:
            time.sleep(0.002)
            left = group_members(pid)
        self.procs[index].join(max(0.0, wait_s - (time.monotonic() - t)))
        return {"pid": pid, "group": sorted(group), "gone": not left and not self.procs[index].is_alive(),
                "gone_ms": round(1000 * (time.monotonic() - t), 1)}

    def record_for(self, index: int, ops: list[dict]) -> None:
        """Record ops on behalf of a dead worker's process (counted as its own)."""
        self.recorded[index] += len(ops)
        self.queue.put(ops)

    def respawn(self, index: int) -> dict:
        """Start a new process in a killed worker's place, under a new process id (the next
        of its slot): {"pid", "process"}. It opens its client and runs until the workload's end."""
        from harness.core.interrupts import deferred

        first = self.process_of(index) + self.concurrency
        self.processes[index] = first
        args = replace(self.args[index], first_process=first,
                       deadline=(self.went or time.monotonic()) + self.time_limit)
        self.gone.append(self.procs[index])
        with deferred():  # a Ctrl-C half way would leave a child no Process object knows
            self.procs[index] = self._process(args)
            self.procs[index].start()
        self.down.discard(index)
        return {"pid": self.procs[index].pid, "process": first}

    def set_clock(self, index: int, offset_s: float) -> None:
        if self.external and self.clocks[index] != offset_s:
            self.clock_seen[index] = math.nan  # until the client process reads its clock again
        self.clocks[index] = offset_s

    def clock_offset(self, index: int) -> float:
        """The worker's wall-clock offset: for an in-process client, the one it uses; for an
        external client process, the one it last reported of its own clock (NaN: not yet;
        infinity: it cannot tell)."""
        return float(self.clock_seen[index] if self.external else self.clocks[index])

    def alive(self) -> int:
        return sum(p.is_alive() for i, p in enumerate(self.procs) if i not in self.down) + len(self.down)

    def stop(self, grace: float, drain=None) -> list[int]:
        """Stop every worker, resuming paused ones first; kill those still running after
        `grace`, and return their indexes. `drain(block_s)` records what they send
        meanwhile: a worker cannot exit until its last batch is in the queue's pipe, and a
        full pipe waits for a reader."""
        self.stop_event.set()
        for i in list(self.paused):
            self.resume(i)
        for p in self.gone:
            p.join(0)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(p.pid is not None and p.is_alive() for p in self.procs):
            if drain is not None:
                drain(0.02)
            else:
                time.sleep(0.02)
        killed = []
        for i, p in enumerate(self.procs):
            if p.is_alive():
                p.kill()
                p.join(2)
                killed.append(i)
        if self.contained is not None:
            # What the workers left: a client's grandchild that hid with setsid, a worker forked
            # but never known (a start cut short). The fork server is in there too.
            server = _forkserver_pid()
            self.strays = [s for s in self.contained.kill("clients") if not s.startswith(f"{server} ")]
        _stop_forkserver()
        if self.mp_dir is not None:
            mp.current_process()._config.pop("tempdir", None)
            shutil.rmtree(self.mp_dir, ignore_errors=True)
        return killed
