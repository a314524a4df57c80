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
The runner's side (start, pause, kill and respawn, stop) is harness/engine/pool.py.
"""

from __future__ import annotations

import logging
import os
import random
import time
from dataclasses import dataclass
from typing import Any

from harness.core.contracts.client import recorded_validity
from harness.core.errors import NotAcquired
from harness.core.kinds import READ_SHARE
from harness.core.history import begins_hold, ends_hold, now_ns
from harness.core.interrupts import die_with_parent, ignore_stops
from harness.core.options import cluster_option
from workloads.resource import STALE, StaleToken

READY = "ready"  # the message a worker sends once its client is open
DONE = "done"  # the message a worker sends after its last op: {DONE: index}
FAILED = "failed"  # the message a worker sends instead when it cannot go on: {FAILED: index, "error", "bad_argument"}
THROTTLED = "throttled"  # the message a worker sends the first time its recording is slowed: {THROTTLED: index}
MAX_OPS_PER_S = 50_000  # most ops one worker records per second (a client answering in no time floods the history)
SAFETY_MARGIN = 0.2  # fraction of the TTL kept free between the end of a hold and expiry
# A worker's `parking` slot: 0, or the code of the op it is to stop before sending (a
# nemesis armed it), or PARKED while it waits there for the nemesis to let it go.
PARK_CODES = {"acquire": 1, "release": 2, "renew": 3}
PARKED = -1
PARK_MAX_S = 2.0  # longest a worker waits to be let go; then it goes on (the nemesis missed it)


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerArgs:
    index: int  # 0-based worker slot
    spec: Any  # TestSpec
    nodes: tuple  # Node values of the lock service
    store: Any  # Node of the resource server
    netns: str | None = None
    wrap: tuple = ()  # an external client's command runs after this argv (its container on a swarm engine)
    clocks: Any = None  # shared array of wall-clock offsets, one per worker (in-process skew)
    clock_seen: Any = None  # the offsets external client processes report of their own clocks
    holding: Any = None  # shared flags, one per worker: 1 from an ok acquire to its release (pause-holder aims by it)
    log_path: str | None = None  # where the client libraries' own logging goes
    cgroup_procs: str | None = None  # the run's clients cgroup (harness/cluster/containment.py), joined first
    waiting: Any = None  # shared flags, one per worker: 1 from an acquire's invoke to its completion (pause-waiter)
    recorded: Any = None  # shared counts, one per worker: ops recorded so far (kill-holder: all of them received?)
    processes: Any = None  # shared, one per worker: the process id it records under now
    parking: Any = None  # shared, one per worker: an op to stop before sending (cut-in-flight), see PARK_CODES
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
                 max_rate: int = MAX_OPS_PER_S, waiting=None, recorded=None, processes=None, parking=None):
        self.queue = queue
        self.holding, self.index = holding, index
        self.waiting, self.recorded, self.processes = waiting, recorded, processes
        self.parking = parking
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
        else:
            if not self.kept:
                self.since = time.monotonic()
            self.kept.append(d)
            if len(self.kept) >= self.batch:
                self.flush()
        if type_ == "invoke" and self.parking is not None and self.parking[self.index] == PARK_CODES.get(f):
            self.park()

    def park(self) -> None:
        """Stop here, the op invoked but not yet sent, until the nemesis that armed this
        worker lets it go (it cuts the client's links meanwhile), at most PARK_MAX_S."""
        self.parking[self.index] = PARKED
        self.flush()  # the nemesis reacts to this invoke
        deadline = time.monotonic() + PARK_MAX_S
        while self.parking[self.index] == PARKED and time.monotonic() < deadline:
            time.sleep(0.0005)
        self.parking[self.index] = 0

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
    ignore_stops()  # the runner owns Ctrl-C, SIGTERM and SIGHUP, and stops us: no recorded op is lost
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
    if args.wrap:
        import json

        from workloads.external import WRAP_ENV

        os.environ[WRAP_ENV] = json.dumps(list(args.wrap))
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
    own_key = cluster_option(spec.options, "own_key")  # a key per client: no contention
    store = FencedCounter(args.store, keys[0], fencing=spec.fencing)
    counters = {keys[0]: store}
    rec = Recorder(queue, first, args.holding, args.index, batch=BATCH, waiting=args.waiting,
                   recorded=args.recorded, processes=args.processes, parking=args.parking)
    queue.put({READY: args.index})
    go.wait()
    # the runner stops the workers then (its clock starts at go); a respawned worker is told when
    end = args.deadline if args.deadline is not None else time.monotonic() + spec.time_limit
    try:
        while not stop.is_set():
            key = pick_key(keys, args.index, own_key, rng)
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


def pick_key(keys: tuple[str, ...], index: int, own_key: bool, rng: random.Random) -> str:
    """The lock key of a worker's next cycle: its own (-o own_key), else one by its seeded random."""
    if own_key:
        return keys[index % len(keys)]
    return keys[rng.randrange(len(keys))] if len(keys) > 1 else keys[0]


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
    kind = _kind(getattr(spec, "lock", "mutex"))
    # the lock kind's keywords (harness/core/kinds.py): none for the mutex, so its calls and
    # its random choices are what they always were
    how = {} if kind.name == "mutex" else kind.acquire_args("read" if kind.name == "rw" and rng.random() < READ_SHARE else None)
    started = time.monotonic()
    timeout = spec.acquire_timeout if end is None else min(spec.acquire_timeout, max(TAIL_TIMEOUT_S, end - started))
    # an acquire near the run's end waits less: its invoke says how long (the timeouts checker)
    shortened = {"value": {"timeout_s": round(timeout, 3)}} if timeout < spec.acquire_timeout else {}
    rec("invoke", "acquire", key=key, **shortened, **how)
    try:
        lease = client.acquire(key, spec.ttl_ms, timeout, **how)
    except NotAcquired as e:
        rec("fail", "acquire", key=key, error=str(e)[:300], **how)
        _backoff(started, rng, rec)
        return True
    except Exception as e:
        rec("info", "acquire", key=key, error=_err(e), **how)
        _backoff(started, rng, rec)
        return False
    rec("ok", "acquire", key=key, value=lease.value, token=lease.token, valid_until_ns=recorded_validity(lease), **how)
    token = lease.token
    resource = f"{key}:counter"
    looks = _looks(spec)
    if "grant" in looks and not still_held(client, lease, rec):
        # The watchdog or the session already says the lock is gone: do no work under it.
        return release(client, lease, rec)
    if spec.reenter and not reenter(spec, client, lease, rec):
        release(client, lease, rec)
        return False
    if cluster_option(spec.options, "resource") == "none":  # the lock cycle alone
        return release(client, lease, rec)

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
            if getattr(spec, "hold_until_expiry", False):  # right up to the validity the client reported
                margin_s = cluster_option(spec.options, "margin_ms") / 1000
                hold = max(0.0, (lease.valid_until_ns - time.monotonic_ns()) / 1e9 - margin_s)
            else:
                hold = rng.uniform(0, max(0.0, min(spec.hold_max, _remaining(lease, spec))))
                if end is not None:  # no random hold runs past the workload's end: the runner waits for it
                    hold = min(hold, max(0.0, end - time.monotonic()))
            if hold > 0:
                rec.flush()
                time.sleep(hold)
        if how.get("mode") == "read" or kind.name == "semaphore":
            return release(client, lease, rec)  # a reader or a permit holder only reads: its section ends here
        if "write" in looks and not still_held(client, lease, rec):
            return release(client, lease, rec)  # the last look before the write: the client knows it lost the lock
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


def _looks(spec) -> tuple[str, ...]:
    """When a holder asks `held` (-o held_check): "grant" (right after it), "write" (right
    before the write and each renew, as a careful application looks before it commits)."""
    raw = spec.options.get("held_check")
    looks = _LOOKS.get(raw)
    if looks is None:  # parsed once per value, not on every cycle
        check = cluster_option(spec.options, "held_check")
        looks = _LOOKS[raw] = ("grant", "write") if check == "both" else (check,)
    return looks


_LOOKS: dict = {}


def _kind(lock: str):
    kind = _KINDS.get(lock)
    if kind is None:
        from harness.core.kinds import parse

        kind = _KINDS[lock] = parse(lock)
    return kind


_KINDS: dict = {}


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
        if "write" in _looks(spec) and not still_held(client, lease, rec):
            return lease, True  # the client says the lock is gone: no renew, no write
        rec("invoke", "renew", key=lease.key, value=lease.value)
        try:
            lease = client.renew(lease)
        except LockLost as e:
            rec("fail", "renew", key=lease.key, value=lease.value, error=str(e)[:300])
            return lease, True
        except Exception as e:
            rec("info", "renew", key=lease.key, value=lease.value, error=_err(e))
            return lease, False
        rec("ok", "renew", key=lease.key, value=lease.value, token=lease.token, valid_until_ns=recorded_validity(lease))
    return lease, None


def _backoff(started: float, rng: random.Random, rec: Recorder) -> None:
    """After an acquire that failed at once (a refused connection, a library that does not
    wait), pause a little, so a dead server costs a few ops, not a hot loop of them."""
    if time.monotonic() - started < 0.01:
        rec.flush()
        time.sleep(rng.uniform(0.02, 0.1))


def still_held(client, lease, rec: Recorder) -> bool:
    """The client's own belief (watchdog, session state), recorded as a `held` op whose ok
    carries the answer (harness/checker/leases.py judges it); True when it has no opinion."""
    has = _HAS_OPINION.get(type(client))
    if has is None:  # a Protocol check costs as much as a redis call: once per class
        from harness.core.contracts.client import StillHeld

        has = _HAS_OPINION[type(client)] = isinstance(client, StillHeld)
    if not has:
        return True
    asked = now_ns()
    try:
        answer = client.still_held(lease)
    except Exception as e:
        rec("invoke", "held", key=lease.key, time_ns=asked)
        rec("info", "held", key=lease.key, error=_err(e))
        return False
    if answer is None:  # it turned out to have no opinion (an external client answered unsupported)
        return True
    rec("invoke", "held", key=lease.key, time_ns=asked)  # recorded once answered: None leaves no op
    rec("ok", "held", key=lease.key, value=bool(answer))
    return bool(answer)


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
