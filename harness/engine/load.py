"""Load mode: many clients per worker process, for fault-free performance runs.

One OS process per client (harness/engine/worker.py) is what the faults need: a pause must
stop the holder and nobody else. It is also what caps a throughput run on a small machine:
256 Python processes on 2 cores measure the scheduler, not the lock service (issue 30). In
load mode (`-o load_clients=K`) each worker process hosts K clients, each a thread with its
own client object of the same design code (its own connection, lease and session), its own
slot, process id and Recorder, running the same `worker.cycle`. Every op is recorded as in
a normal run, so the checkers judge mutual exclusion and fencing the same way; only the
processes are fewer.

Must not: serve a run with a nemesis (a pause or kill of one process would hit K clients;
pool.Workers refuses it), or share a client object between threads.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time

from harness.core.interrupts import die_with_parent, ignore_stops
from harness.core.options import cluster_option
from harness.engine.worker import BATCH, DONE, FAILED, READY, Recorder, WorkerArgs, _err, cycle, pick_key


def groups(concurrency: int, per_process: int) -> list[list[int]]:
    """The client slots of each load process: consecutive, at most per_process each, the
    processes as even as they can be."""
    procs = -(-concurrency // per_process)
    size, extra = divmod(concurrency, procs)
    out, start = [], 0
    for p in range(procs):
        n = size + (p < extra)
        out.append(list(range(start, start + n)))
        start += n
    return out


def load_main(position: int, group: list[WorkerArgs], queue, stop, go) -> None:
    """Entry point of a load process: opens one client per slot, says READY (as worker
    `position`) once all are open, runs them as threads when `go` is set, says DONE when
    `stop` has ended them all. An error that ends a client ends the process (FAILED), as a
    worker's does: the run then says so instead of measuring fewer clients."""
    first = group[0]
    if first.cgroup_procs:
        from harness.cluster.containment import RunCgroup

        RunCgroup.join_file(first.cgroup_procs)
    ignore_stops()  # the runner owns Ctrl-C, SIGTERM and SIGHUP, and stops us: no recorded op is lost
    os.setpgid(0, 0)
    die_with_parent()
    try:
        _load(position, group, queue, stop, go)
    except BaseException as e:
        import traceback

        if first.log_path:
            try:
                with open(first.log_path, "a") as log:
                    log.write(f"load process {position + 1} stopped by an error:\n{traceback.format_exc()}")
            except OSError:
                pass
        queue.put({FAILED: position, "error": _err(e), "bad_argument": False})
        raise SystemExit(1) from None
    queue.close()
    queue.join_thread()
    logging.shutdown()
    os._exit(0)


def _load(position: int, group: list[WorkerArgs], queue, stop, go) -> None:
    first = group[0]
    if first.log_path:
        from harness.core.outputcap import CappedHandler

        logging.basicConfig(handlers=[CappedHandler(first.log_path)], level=logging.INFO,
                            format="%(asctime)s %(threadName)s %(name)s %(levelname)s %(message)s")
    if first.netns:  # before any thread and socket: threads inherit it
        from harness.cluster.netns import enter_netns

        enter_netns(first.netns)
    from harness.core import plugins
    from harness.core.contracts.client import Clock

    spec = first.spec
    clients = []
    for a in group:
        c = plugins.backend_class(spec.backend)(spec.options, Clock(a.clocks, a.index, a.clock_seen))
        c.open(a.nodes)
        clients.append(c)
    queue.put({READY: position})
    go.wait()
    end = time.monotonic() + spec.time_limit
    errors: list[BaseException] = []
    threads = [threading.Thread(target=_client_loop, args=(a, c, queue, stop, end, errors),
                                name=f"c{a.index + 1}", daemon=True) for a, c in zip(group, clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    queue.put({DONE: position})


def _client_loop(a: WorkerArgs, client, queue, stop, end: float, errors: list) -> None:
    """One client's loop, as worker._work runs it in a process of its own."""
    from workloads.resource import FencedCounter

    spec = a.spec
    rng = random.Random(spec.seed * 7919 + a.index)
    keys = spec.lock_keys
    own_key = cluster_option(spec.options, "own_key")  # a key per client: no contention
    rec = Recorder(queue, a.index, a.holding, a.index, batch=BATCH, waiting=a.waiting, recorded=a.recorded,
                   processes=a.processes, parking=a.parking)
    counters: dict[str, FencedCounter] = {}
    conn = None
    try:
        while not stop.is_set():
            key = pick_key(keys, a.index, own_key, rng)
            counter = counters.get(key)
            if counter is None:
                counter = counters[key] = FencedCounter(a.store, key, fencing=spec.fencing, conn=conn)
                conn = counter.conn
            if not cycle(spec, client, counter, rec, rng, end=end, key=key):
                rec.process += spec.concurrency
            rec.settle()
    except BaseException as e:
        errors.append(e)
    finally:
        rec.flush()
        try:
            client.close()
            if conn is not None:
                conn.close()
        except Exception:
            pass
