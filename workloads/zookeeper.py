"""ZooKeeper locks: our own queue on kazoo primitives, and kazoo's Lock recipe as it ships.

`zookeeper` (ours). Each contender creates an EPHEMERAL|SEQUENTIAL child
/chaoslock/<key>/lock-<value>-<seq>. The lowest sequence holds the lock; every other
contender sets a watch on its immediate predecessor only, so a release wakes one waiter,
not the herd. On the acquire timeout a waiter deletes its own node and fails. The node is
ephemeral, so when the session expires (holder partitioned away, paused, dead) ZooKeeper
deletes it and the next contender holds the lock, while the old holder may still believe
it holds it: scenario 3 of the articles.

Ambiguity. A create, delete or get that times out or loses its connection may still be
applied. The unique `<value>` in the node name lets us find such a node later: it is
remembered as an orphan and deleted before the next acquire (or dies with the session).
The op itself is reported as `info`, never as NotAcquired. A node that vanished while we
queued, or a SessionExpiredError, is a certain `fail`: an ephemeral node does not outlive
its session. Without a live session an acquire waits for one until its timeout (kazoo
reconnects in the background) instead of failing at once in a loop. Every kazoo call is bounded by
`op_timeout_ms` (kazoo's sync calls otherwise wait for a reconnect without limit), not by
what is left of the acquire timeout: an acquire may overrun its timeout by one call
rather than turn an answer that was merely late into an ambiguous `info`.

Lost signal. A connection listener marks every held lease lost on SUSPENDED or LOST
(Curator's advice: after SUSPENDED the session may expire unseen), so `still_held()` is
False and the worker skips its write. A SIGSTOPped holder cannot run the listener: it
wakes, its session is already gone, and it writes anyway. Only fencing catches that. A last
look (`still_held`, the worker's `held`) also asks the server whether our node is still there
under our session, so a holder that looks right before its write (-o held_check=write) does
notice a session that expired while it was stopped; a pause between that look and the write
still gets through (the articles' point), and fencing still decides.

Token: the czxid of our lock node, from the create's stat (CREATE2). zxids are totally
ordered and holders take the lock in sequence order, which is creation order, so tokens
strictly increase across holders, across leader elections too (epoch << 32 | counter).
The sequence suffix would not do: it restarts if the parent node is deleted.

Validity: ZooKeeper has no TTL; `ttl_ms` is ignored. valid_until_ns is one session
timeout after the last request the server answered during acquire: the earliest moment
the server could expire the session if it never hears from us again.

Options: session_timeout_ms (3000; must lie in [2, 60] x tickTime of the ensemble, i.e.
1000..30000 ms with tickTime 500), op_timeout_ms (2000; bound on each kazoo call),
connect_timeout_s (15; first connection in open()), reconnect_delay_ms (100; fixed delay
between kazoo's reconnection attempts, which go on forever: giving up would close the
client, and a chaos test wants to see the session come back). No command retries.

`zookeeper-recipe`: kazoo.recipe.lock.Lock on /chaoslock/<key>, one Lock object per key
per client, acquire(timeout=acquire timeout) as shipped (its own internal retry until
that deadline). LockTimeout or a False return are `fail`: the recipe returns False also
when its retry deadline passed on connection errors, after a best-effort delete of its
node; a node it failed to delete is reused by its next acquire, and nobody acts on it.
Token: the recipe does not return a stat, but exposes its node name (`lock.node`), so we
read that node's czxid with one extra exists() after acquiring; if that read fails we
release and report `info`. The recipe has no lost signal of its own; we attach the same
listener as ours so still_held() means the same for both.

Must not: use kazoo's client-level retry for our lock, sort contenders by anything but the
sequence suffix, watch anything but the predecessor, or report an ambiguous op as fail.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from harness.core.contracts.cluster import Node
from harness.core.errors import NotAcquired
from harness.cluster.zookeeper import TICK_MS
from harness.core.options import Option, values
from harness.core.contracts.client import Clock, Lease, unique_value

ROOT = "/chaoslock"
_SEQ = re.compile(r"^lock-([0-9a-f]{32})-(\d{10})$")


@dataclass(slots=True)
class _Hold:
    path: str
    lost: str | None = None


ZK_OPTIONS = (
    Option(name="session_timeout_ms", type=float, default=3000.0, min=2 * TICK_MS, max=60 * TICK_MS,
           help=f"session timeout asked for, ms (2..60 x the ensemble's tickTime of {TICK_MS} ms)"),
    Option(name="op_timeout_ms", type=float, default=2000.0, above=0, max=600_000, help="timeout of one ZooKeeper call, ms"),
    Option(name="connect_timeout_s", type=float, default=15.0, above=0, max=600, help="how long open() waits for a session, s"),
    Option(name="reconnect_delay_ms", type=float, default=100.0, min=0, max=60_000,
           help="pause before kazoo reconnects, ms"))


class _Session:
    """A kazoo client with explicit timeouts and the lost-lease listener."""

    def __init__(self, opts: Mapping[str, Any]):
        self.holds: dict[str, _Hold] = {}
        self.waiters: set[threading.Event] = set()
        self.connected = threading.Event()
        self.zk: Any = None
        v = values(opts, ZK_OPTIONS)
        self.session_ms = v["session_timeout_ms"]  # its declared range is 2..60 x tickTime
        self.op_timeout = v["op_timeout_ms"] / 1000
        self.connect_timeout = v["connect_timeout_s"]
        self.reconnect_delay = v["reconnect_delay_ms"] / 1000

    def open(self, nodes: Sequence[Node]) -> None:
        from kazoo.client import KazooClient

        hosts = ",".join(n.endpoint for n in nodes if n.role == "lock")
        self.zk = KazooClient(
            hosts=hosts, timeout=self.session_ms / 1000, randomize_hosts=True,
            connection_retry=dict(max_tries=-1, delay=self.reconnect_delay, backoff=1, max_jitter=0.2,
                                  max_delay=self.reconnect_delay),
            command_retry=dict(max_tries=1, delay=0.0, backoff=1, max_jitter=0.0))
        self.zk.add_listener(self._on_state)
        self.zk.start(timeout=self.connect_timeout)
        if self.zk.connected:
            self.connected.set()

    def _on_state(self, state) -> None:
        from kazoo.client import KazooState

        if state == KazooState.CONNECTED:
            self.connected.set()
        if state in (KazooState.SUSPENDED, KazooState.LOST):
            self.connected.clear()
            for h in list(self.holds.values()):
                if h.lost is None:
                    h.lost = f"session {state.lower()}"
            for ev in list(self.waiters):
                ev.set()  # a waiter re-checks rather than sleep through a lost session

    def call(self, async_result, timeout: float | None = None):
        """Wait for one kazoo async op at most `timeout` (default op_timeout) seconds."""
        from kazoo.handlers.threading import KazooTimeoutError

        t = self.op_timeout if timeout is None else max(0.001, min(timeout, self.op_timeout))
        try:
            return async_result.get(timeout=t)
        except KazooTimeoutError:
            raise TimeoutError(f"ZooKeeper did not answer within {t:.3f}s") from None

    def still_held(self, lease: Lease) -> bool:
        h = self.holds.get(lease.value)
        return h is not None and h.lost is None

    def confirmed(self, lease: Lease) -> bool:
        """still_held, and the server still has our node under our session. The local state
        alone is not enough for a last look: a process paused past its session resumes with
        kazoo still saying CONNECTED until it reads the server's close (chaos audit's "notices
        a lost lock" under pause-holder with held_check=both, 2 of 2). No answer, or any
        error: not held (it cannot be confirmed)."""
        if not self.still_held(lease):
            return False
        h = self.holds[lease.value]
        try:
            stat = self.call(self.zk.exists_async(h.path))
        except Exception:  # connection loss, an expired session, no answer in op_timeout
            return False
        return stat is not None and stat.ephemeralOwner == self.zk.client_id[0] and h.lost is None

    def wait_connected(self, deadline: float) -> None:
        """Wait, within the acquire timeout, for a live session; NotAcquired if none comes.

        Calls while the session is expired fail at once without reaching a server, and a
        worker retrying those would spin; waiting for the reconnection is what a client does.
        """
        if not self.connected.wait(max(0.0, deadline - time.monotonic())):
            raise NotAcquired(f"no live ZooKeeper session (kazoo state {self.zk.state})")

    def close(self) -> None:
        if self.zk is not None:
            try:
                self.zk.stop()  # closes the session: our ephemeral nodes go at once
            finally:
                self.zk.close()


def _seq(name: str) -> int:
    return int(name.rsplit("-", 1)[1])


class ZooKeeperClient:
    name = "zookeeper"
    release_checks_owner = True  # a late release cannot delete another holder's lock
    OPTIONS = ZK_OPTIONS
    has_fencing = True
    servers = ("zookeeper", 3)

    def __init__(self, options: Mapping[str, Any] | None = None, clock: Clock | None = None):
        self.s = _Session(options or {})
        self.clock = clock or Clock()
        self.orphans: set[tuple[str, str]] = set()  # (parent, "lock-<value>-") possibly left behind

    def open(self, nodes: Sequence[Node]) -> None:
        self.s.open(nodes)
        self.s.call(self.s.zk.ensure_path_async(ROOT), self.s.connect_timeout)

    def _cleanup(self) -> None:
        """Delete nodes an ambiguous op may have left; keep them listed if we cannot yet."""
        for parent, prefix in list(self.orphans):
            try:
                for child in self.s.call(self.s.zk.get_children_async(parent)):
                    if child.startswith(prefix):
                        self.s.call(self.s.zk.delete_async(f"{parent}/{child}"))
                self.orphans.discard((parent, prefix))
            except Exception:
                pass  # the next acquire tries again; the session's end removes it anyway

    def acquire(self, key: str, ttl_ms: int, timeout_s: float) -> Lease:
        from kazoo.exceptions import SessionExpiredError

        zk = self.s.zk
        deadline = time.monotonic() + timeout_s
        self.s.wait_connected(deadline)
        if self.orphans:
            self._cleanup()
        value = unique_value()
        parent = f"{ROOT}/{key}"
        prefix = f"lock-{value}-"
        try:
            path, stat = self.s.call(zk.create_async(f"{parent}/{prefix}", b"", ephemeral=True, sequence=True,
                                                     makepath=True, include_data=True))
        except SessionExpiredError:
            raise NotAcquired("the session expired: an ephemeral node of it cannot exist") from None
        except Exception:
            self.orphans.add((parent, prefix))
            raise
        me = path.rsplit("/", 1)[1]
        hold = _Hold(path=path)
        self.s.holds[value] = hold  # from here on a lost session marks it lost
        try:
            while True:
                asked = time.monotonic_ns()
                children = self.s.call(zk.get_children_async(parent))
                if me not in children:
                    raise NotAcquired("our lock node vanished while queued (session expired)")
                if hold.lost is not None:
                    raise ConnectionError(f"{hold.lost} while acquiring")
                ahead = [c for c in children if _SEQ.match(c) and _seq(c) < _seq(me)]
                if not ahead:
                    return Lease(key=key, value=value, token=stat.czxid, acquired_ns=time.monotonic_ns(),
                                 valid_until_ns=asked + int(self.s.session_ms * 1e6),
                                 meta={"path": path, "czxid": stat.czxid, "session_timeout_ms": self.s.session_ms})
                pred = f"{parent}/{max(ahead, key=_seq)}"
                woke = threading.Event()
                self.s.waiters.add(woke)
                try:
                    if self.s.call(zk.exists_async(pred, watch=lambda _e: woke.set())) is None:
                        continue  # predecessor already gone: look again
                    remaining = deadline - time.monotonic()
                    if remaining <= 0 or not woke.wait(remaining):
                        self._give_up(path)
                        raise NotAcquired(f"{len(ahead)} contender(s) ahead of us after {timeout_s:g}s")
                finally:
                    self.s.waiters.discard(woke)
        except NotAcquired:
            self.s.holds.pop(value, None)
            raise
        except SessionExpiredError:
            self.s.holds.pop(value, None)
            raise NotAcquired("the session expired while we queued: our node went with it") from None
        except BaseException:
            self.s.holds.pop(value, None)
            self.orphans.add((parent, prefix))
            self._cleanup()
            raise

    def _give_up(self, path: str) -> None:
        """Delete our node after a timeout. If that fails the node may yet hold: not a fail."""
        from kazoo.exceptions import NoNodeError

        try:
            self.s.call(self.s.zk.delete_async(path))
        except NoNodeError:
            pass

    def still_held(self, lease: Lease) -> bool:
        return self.s.confirmed(lease)

    def release(self, lease: Lease) -> bool:
        from kazoo.exceptions import NoNodeError

        self.s.holds.pop(lease.value, None)
        path = lease.meta["path"]
        try:
            self.s.call(self.s.zk.delete_async(path))
            return True
        except NoNodeError:
            return False  # the session expired and took the node with it
        except Exception:
            self.orphans.add((path.rsplit("/", 1)[0], f"lock-{lease.value}-"))
            raise

    def renew(self, lease: Lease) -> Lease:
        """Sessions are kept alive by kazoo's heartbeats; renewing means checking the node."""
        from harness.core.errors import LockLost

        if not self.s.still_held(lease) or self.s.call(self.s.zk.exists_async(lease.meta["path"])) is None:
            raise LockLost(f"{lease.meta['path']} is gone or the session was suspended")
        return lease

    def close(self) -> None:
        self.s.close()


class KazooRecipeClient:
    name = "zookeeper-recipe"
    release_checks_owner = True  # a late release cannot delete another holder's lock
    OPTIONS = ZK_OPTIONS
    has_fencing = True
    servers = ("zookeeper", 3)
    lock_kinds = ("mutex", "rw", "semaphore")  # ReadLock/WriteLock and Semaphore: workloads/kinds_zookeeper.py

    def __init__(self, options: Mapping[str, Any] | None = None, clock: Clock | None = None):
        self.s = _Session(options or {})
        self.clock = clock or Clock()
        self.locks: dict[str, Any] = {}

    def open(self, nodes: Sequence[Node]) -> None:
        self.s.open(nodes)

    def acquire(self, key: str, ttl_ms: int, timeout_s: float, *, mode: str | None = None,
                permits: int | None = None) -> Lease:
        from kazoo.exceptions import LockTimeout

        if mode is not None or permits is not None:
            from workloads import kinds_zookeeper

            return kinds_zookeeper.acquire(self, key, timeout_s, mode=mode, permits=permits, hold=_Hold)
        lock = self.locks.get(key)
        if lock is None:
            lock = self.locks[key] = self.s.zk.Lock(f"{ROOT}/{key}", "chaoslock")
        try:
            got = lock.acquire(blocking=True, timeout=timeout_s)
        except LockTimeout as e:
            raise NotAcquired(str(e)) from None
        if not got:
            raise NotAcquired("kazoo Lock.acquire returned False (its retry deadline passed)")
        value = unique_value()
        path = f"{lock.path}/{lock.node}"
        self.s.holds[value] = hold = _Hold(path=path)
        asked = time.monotonic_ns()  # the server hears from our session no earlier than this
        try:
            stat = self.s.call(self.s.zk.exists_async(path))
            if stat is None:
                raise ConnectionError(f"the recipe's node {path} vanished right after acquiring")
        except BaseException:
            self.s.holds.pop(value, None)
            try:
                lock.release()
            except Exception:
                pass
            raise
        if hold.lost is not None:
            pass  # still a Lease: the worker sees still_held() False and does not write
        return Lease(key=key, value=value, token=stat.czxid, acquired_ns=time.monotonic_ns(),
                     valid_until_ns=asked + int(self.s.session_ms * 1e6),
                     meta={"path": path, "czxid": stat.czxid, "session_timeout_ms": self.s.session_ms})

    def still_held(self, lease: Lease) -> bool:
        return self.s.still_held(lease)

    def release(self, lease: Lease) -> bool:
        if lease.meta.get("mode") is not None or lease.meta.get("permits") is not None:
            from workloads import kinds_zookeeper

            return kinds_zookeeper.release(self, lease)
        self.s.holds.pop(lease.value, None)
        lock = self.locks.get(lease.key)
        if lock is None or not lock.is_acquired:
            return False
        return bool(lock.release())

    def renew(self, lease: Lease) -> Lease:
        from harness.core.errors import LockLost

        if not self.still_held(lease):
            raise LockLost("the session was suspended or lost")
        return lease

    def close(self) -> None:
        self.s.close()
