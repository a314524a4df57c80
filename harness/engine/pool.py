"""The runner's side of the client workers (harness/engine/worker.py is one worker's side):
start them together from one fork server, stop and continue them, kill one and start a new
process in its place, read the flags they share, stop them all at the end.

A worker's slot (index 0..concurrency-1) outlives its processes: a killed worker's slot gets
a new process under the next process id of the slot (index + k x concurrency), the same rule
an info op follows inside a worker, so the history never reuses a process id.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import queue as queue_mod
import shutil
import signal
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from harness.core.contracts.cluster import Cluster
from harness.core.errors import ClusterError
from harness.core.options import cluster_option
from harness.engine.worker import FAILED, READY, WorkerArgs, worker_main


def _context():
    """Workers are forked from a server process that imported their code once (a spawned
    worker imports it again: 256 of them took 45 s of 2 cores to start). Each run starts
    its own (at its first worker) and stops it once its workers are gone (_stop_forkserver),
    so a worker always has its runner's environment and directory, and nothing outlives the
    run, also in a process that runs many (pytest, chaos compare)."""
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["harness.engine.forkserver_guard", "harness.engine.worker", "harness.engine.load", "workloads.redis_single", "workloads.redlock", "workloads.etcd",
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


SEMAPHORES = "semaphores"  # in a run's mp dir: the names of the POSIX semaphores its Workers made


def _semlocks(obj: Any, depth: int = 2) -> list[Any]:
    """The multiprocessing SemLocks in obj (a Queue: its locks and semaphore; an Event: its
    condition's four and its flag), found through its attributes."""
    from multiprocessing.synchronize import SemLock

    if isinstance(obj, SemLock):
        return [obj]
    if depth == 0 or not hasattr(obj, "__dict__"):
        return []
    return [s for v in vars(obj).values() for s in _semlocks(v, depth - 1)]


def record_semaphores(mp_dir: Path, *objs: Any) -> None:
    """Write the names of the named semaphores behind objs (/dev/shm/sem.mp-*) to mp_dir: the
    process that made them unlinks them at its exit, or multiprocessing's resource tracker
    when that process dies; a SIGKILL of the run's whole group takes both, and only this
    record says which are the run's (harness/cluster/reaper.py unlink_semaphores)."""
    names = sorted({s._semlock.name for o in objs for s in _semlocks(o) if getattr(s._semlock, "name", None)})
    mp_dir.mkdir(parents=True, exist_ok=True)
    (mp_dir / SEMAPHORES).write_text("".join(f"{n}\n" for n in names))


def _start_resource_tracker() -> None:
    """multiprocessing's resource tracker (it unlinks the queue's semaphores) is our child, in
    the chaos process group. It ignores SIGINT and SIGTERM by itself, not SIGHUP: a hang-up
    of the group killed it, and its relaunch printed a warning and a traceback per semaphore.
    Start it with SIGHUP ignored, which it keeps through its exec."""
    import threading
    from multiprocessing import resource_tracker

    if threading.current_thread() is not threading.main_thread():
        resource_tracker.ensure_running()
        return
    before = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        resource_tracker.ensure_running()
    finally:
        signal.signal(signal.SIGHUP, before)


def _start_forkserver() -> None:
    """Start this run's fork server with the stop signals blocked. It ignores them once its
    preload runs (forkserver_guard); a press in the moment before killed it with a
    KeyboardInterrupt traceback on the user's terminal, and the run with it. Blocked signals
    stay pending through its exec; ignoring them discards them, and the guard then unblocks."""
    from multiprocessing import forkserver

    from harness.core.interrupts import STOPS

    before = signal.pthread_sigmask(signal.SIG_BLOCK, STOPS)
    try:
        forkserver.ensure_running()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


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
        self.load = cluster_option(spec.options, "load_clients")  # clients per process (harness/engine/load.py)
        if self.load and spec.nemesis:
            from harness.core.errors import BadArgument

            raise BadArgument(f"-o load_clients serves fault-free performance runs; a fault ({', '.join(spec.nemesis)}) "
                              f"needs one process per client: drop -o load_clients or the nemesis")
        self.ctx = _context()
        _start_resource_tracker()
        self.queue = self.ctx.Queue()
        self.stop_event = self.ctx.Event()
        self.go = self.ctx.Event()
        self.clocks = self.ctx.Array("d", spec.concurrency, lock=False)  # wall-clock offsets
        self.clock_seen = self.ctx.Array("d", [math.nan] * spec.concurrency, lock=False)  # read back by a client process
        self.external = spec.backend == "external"
        self.holding = self.ctx.Array("b", spec.concurrency, lock=False)  # 1 while a worker holds the lock
        self.waiting = self.ctx.Array("b", spec.concurrency, lock=False)  # 1 while its acquire is in flight
        self.recorded = self.ctx.Array("q", spec.concurrency, lock=False)  # ops each worker has recorded
        self.handed_in = 0  # ops the runner has taken from the queue into the history (lost_ops)
        self.processes = self.ctx.Array("q", list(range(spec.concurrency)), lock=False)  # its process id now
        self.parking = self.ctx.Array("b", spec.concurrency, lock=False)  # an op to stop before (worker.PARK_CODES)
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
        from harness.core.contracts.cluster import ControlsClients

        # client processes in containers elsewhere (swarm -o clients_on): paused and killed there too
        self.elsewhere = cluster if isinstance(cluster, ControlsClients) and cluster.clients_elsewhere() else None
        self.strays: list[str] = []  # processes left in the clients' cgroup after the workers stopped
        self.died: list[tuple[int, int]] = []  # (index, signal) of workers a signal ended before the stop
        procs = self.contained.procs("clients") if self.contained is not None else None
        self.mp_dir = Path(state) / "mp" if state is not None else None
        if self.mp_dir is not None:  # a SIGKILL of the whole group leaves them: `chaos cluster down` unlinks these
            record_semaphores(self.mp_dir, self.queue, self.stop_event, self.go)
        self.options = dict(spec.options)
        store_node = next(n for n in cluster.nodes if n.role == "store")
        for i in range(spec.concurrency):
            place = cluster.client(i)  # compose workers reach the servers through their own proxies
            args = WorkerArgs(index=i, spec=spec, nodes=place.nodes, store=store_node, netns=place.netns, wrap=place.wrap,
                              clocks=self.clocks, clock_seen=self.clock_seen, holding=self.holding,
                              log_path=str(log_dir / f"worker-c{i + 1}.log") if log_dir else None,
                              cgroup_procs=procs, waiting=self.waiting, recorded=self.recorded,
                              processes=self.processes, parking=self.parking)
            self.args.append(args)
        if self.load:  # harness/engine/load.py: procs[i] hosts the clients of groups[i]
            from harness.engine.load import groups, load_main

            for position, slots in enumerate(groups(spec.concurrency, self.load)):
                self.procs.append(self.ctx.Process(target=load_main, name=f"chaos-load-{position}", daemon=True,
                                                   args=(position, [self.args[i] for i in slots], self.queue,
                                                         self.stop_event, self.go)))
        else:
            self.procs = [self._process(args) for args in self.args]

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
                _start_forkserver()
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
        if self.elsewhere is not None:  # its client process, frozen where it runs
            self.elsewhere.pause_client(index)
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
            if self.elsewhere is not None:
                self.elsewhere.resume_client(index)
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

    def lost_ops(self) -> int:
        """Ops the workers recorded that the runner never took into the history (`handed_in`):
        a worker killed with a batch it had not sent, or its half-sent message. Read it after
        `stop` and the last drain; 0 when the history holds every op."""
        return max(0, sum(self.recorded) - self.handed_in)

    def arm(self, index: int, f: str | None) -> None:
        """Make the worker stop before it sends its next `f` (acquire, release, renew), right
        after recording the invoke, until `let_go` (at most worker.PARK_MAX_S); None disarms."""
        from harness.engine.worker import PARK_CODES, PARKED

        if self.parking[index] != PARKED:
            self.parking[index] = PARK_CODES[f] if f is not None else 0

    def parked(self, index: int) -> bool:
        """Whether the worker waits before sending the op it was armed for."""
        from harness.engine.worker import PARKED

        return self.parking[index] == PARKED

    def let_go(self, index: int) -> None:
        self.parking[index] = 0

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
        elsewhere = self.elsewhere.kill_client(index) if self.elsewhere is not None else {"gone": True}
        self.down.add(index)
        self.paused.discard(index)
        self.holding[index] = self.waiting[index] = self.parking[index] = 0
        left = group
        while left and time.monotonic() - t < wait_s:
            time.sleep(0.002)
            left = group_members(pid)
        self.procs[index].join(max(0.0, wait_s - (time.monotonic() - t)))
        return {"pid": pid, "group": sorted(group),
                "gone": not left and not self.procs[index].is_alive() and elsewhere["gone"],
                "gone_ms": round(1000 * (time.monotonic() - t), 1),
                **({"containers": elsewhere["containers"]} if "containers" in elsewhere else {})}

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
        # A worker that a signal ended before the stop (not a nemesis: those are in `down`), such
        # as a SIGKILL from outside: the run says so (its ops in flight are in doubt).
        self.died = [(i, -p.exitcode) for i, p in enumerate(self.procs)
                     if i not in self.down and p.exitcode is not None and p.exitcode < 0]
        self.stop_event.set()
        for i in range(self.concurrency):
            self.parking[i] = 0  # armed or parked: go on (a parked one would wait PARK_MAX_S)
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
