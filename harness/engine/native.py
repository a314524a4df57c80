"""Native load mode: the worker's cycle driven by a native program, for fault-free performance runs.

Python clients, one process each or many threads per process (harness/engine/load.py), stay
far below what a lock service serves on 2 cores (issue 30: valkey takes ~34,000 lock cycles
a second from redis-benchmark, our Python load mode drives ~2,000). With `-o
load_driver=native` the runner starts a native driver instead of Python workers:
clients/load-driver (Go: the redis, redlock and etcd designs) or clients/zk-load-driver (Java,
ZooKeeper's own client: the zookeeper design). It runs the spec's N clients as goroutines or
threads, each running the same cycle (acquire, held, read, write, release) with the design's
own calls (for Redis, the very Lua scripts of workloads/redis_single.py, redis_common.py and
resource.py, passed to it as files), recording every op with the host's CLOCK_MONOTONIC.
When it ends, its history is recorded through the runner's queue like a worker's batches, and
the checkers judge it as any other: mutual exclusion, fencing, lost updates.

The driver runs in client c1's network namespace, in the run's cgroup (what a Ctrl-C or
`chaos cluster down` kills), and dies with the runner. SIGTERM ends its run early (each client
ends its cycle) with its ops kept; its memory is bounded by -o max_history_mb.

Must not: serve a run with a nemesis (its clients share one process), a design it does not
implement, or a cycle it does not do (renewals, reentry, lock kinds, a watchdog, a wall-clock
validity): each is refused in one sentence before anything starts.
"""

from __future__ import annotations

import json
import os
import queue as queue_mod
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from harness.core.errors import ChaosError, ClusterError, MissingDependency
from harness.core.options import cluster_option
from harness.engine.worker import FAILED, SAFETY_MARGIN

ROOT = Path(__file__).resolve().parents[2]
GO_DRIVER = ROOT / "clients" / "load-driver" / "bin" / "load-driver"
ZK_DRIVER = ROOT / "clients" / "zk-load-driver" / "bin" / "zk-load-driver"
# the built-in backends a driver implements (its -design), and that driver
DRIVERS = {"redis": GO_DRIVER, "redlock": GO_DRIVER, "etcd": GO_DRIVER, "zookeeper": ZK_DRIVER}
DESIGNS = tuple(DRIVERS)
OP_BYTES = 120  # about one history line of the driver's
BATCH = 20_000  # ops per queue item: the runner records each item with one write
WRITE_GRACE_S = 60.0  # after its run: the driver sorts and writes the history


def wanted(spec: Any) -> bool:
    """True when the run asks for the native driver."""
    return cluster_option(spec.options, "load_driver") == "native"


def refusal(spec: Any) -> str | None:
    """Why the native driver cannot serve this run (None: it can)."""
    what = "-o load_driver=native"
    if spec.backend not in DESIGNS:
        return (f"{what} runs the {', '.join(DESIGNS)} designs, not {spec.backend}; "
                f"use -o load_clients=K (Python clients, many per process) for it")
    if spec.nemesis:
        return (f"{what} serves fault-free performance runs; a fault ({', '.join(spec.nemesis)}) needs one "
                f"process per client: drop the option or the nemesis")
    v = _design_options(spec)
    for on, flag in ((spec.renew, "--renew"), (spec.reenter, "--reenter"),
                     (getattr(spec, "hold_until_expiry", False), "--hold-until-expiry"),
                     (spec.lock != "mutex", f"--lock {spec.lock}"),
                     (v.get("watchdog", False), "-o watchdog"),
                     (v.get("validity_clock", "monotonic") != "monotonic", "-o validity_clock")):
        if on:
            return f"{what} runs the plain mutex cycle; drop {flag} or the option"
    if cluster_option(spec.options, "load_clients"):
        return f"{what} and -o load_clients are two load modes: pick one"
    return None


def _design_options(spec: Any) -> dict[str, Any]:
    """The design's own options, typed (workloads/*.py OPTIONS)."""
    from harness.core import plugins
    from harness.core.options import values

    return values(spec.options, plugins.backend_class(spec.backend).OPTIONS)


class NativeLoad:
    """The runner's side of the driver, in the shape of pool.Workers that the runner uses:
    start, alive, stop, queue, strays. The runner has refused what it cannot run (refusal)."""

    def __init__(self, spec: Any, cluster: Any, log_dir: Path | None = None):
        self.driver = DRIVERS[spec.backend]
        if not self.driver.exists():
            raise MissingDependency(f"the native load driver is not built ({self.driver}); run `make install`")
        self.spec = spec
        self.concurrency = spec.concurrency
        self.queue: queue_mod.SimpleQueue = queue_mod.SimpleQueue()
        self.strays: list[str] = []
        self.went: float | None = None
        self.contained = getattr(cluster, "contained", None)
        self.log_dir = log_dir
        state = Path(getattr(cluster, "dir", None) or log_dir or ".")
        self.dir = state / "native"
        place = cluster.client(0)
        self.netns = place.netns
        self.lock = [n for n in place.nodes if n.role == "lock"]
        self.store = next(n for n in cluster.nodes if n.role == "store")
        self.out = self.dir / "history.jsonl"
        self.proc: subprocess.Popen | None = None
        # the history cap (-o max_history_mb) in ops, at about 120 bytes a line
        self.max_ops = (cluster_option(spec.options, "max_history_mb") << 20) // OP_BYTES
        self.notes: list[str] = []  # what the runner adds to the run's errors
        self.handed_in = 0  # ops the runner took into the history (counted by the runner, as for pool.Workers)

    def _argv(self) -> list[str]:
        spec = self.spec
        v = _design_options(spec)
        drift = v.get("drift_factor", 0.01)
        node_timeout = v.get("node_timeout_ms") or v.get("op_timeout_ms") or 1000.0
        return [str(self.driver), "-design", spec.backend, "-lock", ",".join(f"{n.host}:{n.port}" for n in self.lock),
                "-store", f"{self.store.host}:{self.store.port}", "-keys", ",".join(spec.lock_keys),
                "-clients", str(spec.concurrency), "-seconds", str(spec.time_limit), "-seed", str(spec.seed),
                "-ttl-ms", str(spec.ttl_ms), "-drift", str(drift), "-retry-delay-ms", str(v.get("retry_delay_ms", 50.0)),
                "-node-timeout-ms", str(node_timeout), "-acquire-timeout-s", str(spec.acquire_timeout),
                "-hold-max-ms", str(spec.hold_max * 1000), "-safety-margin", str(SAFETY_MARGIN),
                "-scripts", str(self.dir), "-out", str(self.out), "-max-ops", str(self.max_ops)] \
            + (["-fencing"] if spec.fencing else []) + (["-own-key"] if cluster_option(spec.options, "own_key") else []) \
            + (["-no-resource"] if cluster_option(spec.options, "resource") == "none" else []) \
            + (["-session-timeout-ms", str(v["session_timeout_ms"])] if "session_timeout_ms" in v else [])

    def _write_scripts(self) -> None:
        from workloads.redis_common import RELEASE
        from workloads.redis_single import ACQUIRE
        from workloads.resource import READ, WRITE

        self.dir.mkdir(parents=True, exist_ok=True)
        for name, text in (("acquire", ACQUIRE), ("release", RELEASE), ("read", READ), ("write", WRITE)):
            (self.dir / f"{name}.lua").write_text(text)

    def start(self, timeout: float = 60.0) -> None:
        """Start the driver and wait until every client it runs is connected."""
        from harness.core.interrupts import deferred, die_with_parent

        self._write_scripts()
        procs = self.contained.procs("clients") if self.contained is not None else None
        netns = self.netns

        def child() -> None:
            die_with_parent()
            os.setpgid(0, 0)
            if procs:
                from harness.cluster.containment import RunCgroup

                RunCgroup.join_file(procs)
            if netns:
                from harness.cluster.netns import enter_netns

                enter_netns(netns)
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # the runner stops it

        self.err_path = (self.log_dir or self.dir) / "load-driver.log"
        self.err_path.parent.mkdir(parents=True, exist_ok=True)
        with deferred(), open(self.err_path, "ab") as err:
            self.proc = subprocess.Popen(self._argv(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err,
                                         preexec_fn=child, text=True)
        line = self._line(timeout)
        if line != "ready":
            self._kill()
            raise ClusterError(f"the native load driver did not start ({self._why()}); see {self.err_path}")
        self.went = time.monotonic()

    def _line(self, timeout: float) -> str | None:
        import select

        assert self.proc is not None and self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        return self.proc.stdout.readline().strip() if ready else None

    def _why(self) -> str:
        try:
            tail = self.err_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            tail = []
        rc = self.proc.poll() if self.proc is not None else None
        return (tail[-1][:300] if tail else "no message") + (f", exit status {rc}" if rc is not None else "")

    def alive(self) -> int:
        """1 while the driver runs, and after it ended its run well (the runner's clock may
        still be a moment short of the end); 0 once it failed."""
        if self.proc is None:
            return 0
        rc = self.proc.poll()
        return 1 if rc is None or rc == 0 else 0

    def stop(self, grace: float, drain=None) -> list[int]:
        """Wait for the driver to end its run and write its history, then put that history in
        the queue for the runner; kill it if it does not end in time (returns [0] then, and
        the ops it ran are lost: the run says so)."""
        killed: list[int] = []
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.terminate()  # ends its run now if it has not yet (a Ctrl-C); it still writes the history
            try:
                self.proc.wait(grace + WRITE_GRACE_S)
            except subprocess.TimeoutExpired:
                self._kill()
                killed = [0]
            if self.proc.returncode == 0:
                done = self.proc.stdout.readline().strip() if self.proc.stdout else ""
                self._load(done)
            elif not killed:
                self.queue.put({FAILED: 0, "error": f"the native load driver stopped: {self._why()}"})
            if self.proc.stdout:
                self.proc.stdout.close()
        if self.contained is not None:
            self.strays = self.contained.kill("clients")
        return killed

    def lost_ops(self) -> int:
        """Always 0: the driver hands in its whole history or none of it (`_load` raises when
        its count differs), and a run that recorded nothing is judged unknown (policy.py)."""
        return 0

    def _load(self, done: str) -> None:
        """The driver's history, in batches; its `done N` says how many ops to expect."""
        words = done.split()
        expected = int(words[1]) if len(words) > 1 and words[0] == "done" else None
        if "capped" in words:
            self.notes.append(f"the native load driver stopped at {expected:,} ops, about -o max_history_mb="
                              f"{cluster_option(self.spec.options, 'max_history_mb')} of history; the verdict "
                              f"covers that part")
        n = 0
        batch: list[dict] = []
        with open(self.out) as f:
            for line in f:
                batch.append(json.loads(line))
                if len(batch) >= BATCH:
                    self.queue.put(batch)
                    n += len(batch)
                    batch = []
        if batch:
            self.queue.put(batch)
            n += len(batch)
        self.out.unlink()
        if expected is not None and n != expected:
            raise ChaosError(f"the native load driver said it recorded {expected:,} ops but wrote {n:,}")

    def _kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(5)
