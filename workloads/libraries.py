"""The Redis lock libraries people actually install, tested as they ship.

Only the redis clients they are handed are ours: built like harness's `connect()`, with
short socket timeouts and no redis-py retry (`Retry(NoBackoff(), 0)`), so a dead or
paused node costs one timeout, not redis-py's default 3 s of backoff; they also note when
they last sent SET, which is where python-redis-lock's belief in its lock starts (the
libraries do not say, and the start of a blocking acquire would be far too early). For
pottery the Redlock object notes when each acquire round starts, where pottery's own validity
timer starts (a master's last SET may be a previous round's: pottery returns once a quorum
answered and lets the rest finish later). Everything else is the library's own
behaviour, including what it does wrong. Neither has a fencing token (token None): both
store only a random value, and nothing in Redis orders one holder after another.

`pottery`: pottery.Redlock over the 5 valkey masters, one Redlock object per acquire,
auto_release_time = ttl, acquire(blocking=True, timeout=acquire timeout). As shipped: it
asks all masters in parallel (a thread pool per call), keys are "redlock:<key>", a failed
round sleeps uniform(0, 0.2 s) before the next, validity = ttl - elapsed - (ttl x 0.01 +
2 ms) measured with perf_counter (monotonic). raise_on_redis_errors=False as shipped (an
option): errors from masters count as "no", and a round that fails is released on every
master and ends in False, which we record as `fail` (a half-taken lock is released by
pottery itself; a node that kept a late SET holds a minority, which gives nobody the
lock). Its own exceptions (QuorumIsImpossible, with raise_on_redis_errors) are `info`.
Release: ReleaseUnlockedLock with no redis errors is "not held" (False); with errors it is
ambiguous and raised (`info`). Pottery logs each redis error with a traceback; we attach
a NullHandler to its logger so those do not flood the run's stderr (its behaviour is
unchanged). Options: node_timeout_ms (50, as redlock), raise_on_redis_errors (false).

`python-redis-lock`: redis_lock.Lock on node n1: SET NX EX, waiters block on BLPOP of a
signal list the releaser pushes to (no polling, but a lock that expires instead of
being released pushes nothing, so waiters sleep until their BLPOP times out). It takes
whole seconds only, and we configure: expire = ceil(ttl_ms / 1000) (rounded up: never
shorter than the TTL the harness asked for; the client still believes only ttl_ms);
timeout = the acquire timeout rounded to whole seconds, at least 1 (the library turns
0 into "wait forever") and at most expire (it refuses a timeout above expire without
auto renewal). Its BLPOP blocks the connection for up to that timeout, so this one
connection gets socket timeout = timeout + node_timeout; a shorter one would abort every
wait. auto_renewal False by default (option auto_renewal): when on, the library renews
every expire x 2/3 in its own thread, and a failed renewal just ends that thread with
an exception nobody sees: the business code is never told. That is the failure mode the
articles warn about, so there is deliberately no still_held() here. Release: its
NotAcquired (the lock expired or is someone else's) is False. Options: node_timeout_ms
(100), auto_renewal (false).

Must not: wrap these libraries in retries or fixes of our own; what is measured is them.
"""

from __future__ import annotations

import functools
import logging
import math
import time
from typing import Any, Mapping, Sequence

import redis

from harness.core.contracts.cluster import Node
from harness.core.errors import LockLost, NotAcquired
from harness.core.options import Option, values
from harness.core.contracts.client import Clock, Lease, node_timeout


class _SetTimed(redis.Redis):
    """A redis client that notes when it last sent SET. Measurement only: the library's
    lock lives from its successful SET, which it does not report, and counting validity
    from the start of a blocking acquire instead would shorten every hold."""

    last_set_ns = 0

    def set(self, *args, **kwargs):
        self.last_set_ns = time.monotonic_ns()
        return super().set(*args, **kwargs)


def connect(node: Node, timeout: float) -> _SetTimed:
    """harness.cluster.valkey.connect's settings (short timeouts, no retry), SET-timed."""
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    return _SetTimed(host=node.host, port=node.port, socket_timeout=timeout, socket_connect_timeout=timeout,
                     retry=Retry(NoBackoff(), 0), decode_responses=True)


@functools.cache
def _timed_redlock() -> type:
    """pottery.Redlock noting when each acquire round starts (measurement only; the round
    itself is pottery's)."""
    from pottery import Redlock

    class TimedRedlock(Redlock):
        round_start_ns = 0

        def _Redlock__acquire_masters(self, **kwargs: Any) -> bool:  # what Redlock.acquire calls per round
            self.round_start_ns = time.monotonic_ns()
            return Redlock._acquire_masters(self, **kwargs)

    return TimedRedlock


class PotteryClient:
    name = "pottery"
    release_checks_owner = True  # a late release cannot delete another holder's lock
    has_fencing = False
    servers = ("valkey", 5)
    OPTIONS = (node_timeout(50.0),
               Option(name="raise_on_redis_errors", type=bool, default=False,
                      help="pottery's own flag: raise when a master errs instead of counting it as a no"),
               Option(name="num_extensions", type=int, default=3, min=0, max=1000,
                      help="pottery's own limit on extend() per acquire (its default, 3); "
                           "the next renew raises TooManyExtensions and is recorded as info"))

    def __init__(self, options: Mapping[str, Any] | None = None, clock: Clock | None = None):
        v = values(options, self.OPTIONS)
        self.node_timeout = v["node_timeout_ms"] / 1000
        self.raise_on_redis_errors = v["raise_on_redis_errors"]
        self.num_extensions = v["num_extensions"]
        self.clock = clock or Clock()
        self.masters: list[_SetTimed] = []
        self.held: dict[str, Any] = {}
        logging.getLogger("pottery").addHandler(logging.NullHandler())

    def open(self, nodes: Sequence[Node]) -> None:
        self.masters = [connect(n, self.node_timeout) for n in nodes if n.role == "lock"]

    def acquire(self, key: str, ttl_ms: int, timeout_s: float) -> Lease:
        lock = _timed_redlock()(key=key, masters=self.masters, auto_release_time=ttl_ms / 1000,
                       raise_on_redis_errors=self.raise_on_redis_errors, num_extensions=self.num_extensions)
        if not lock.acquire(blocking=True, timeout=timeout_s):
            raise NotAcquired(f"pottery Redlock.acquire(timeout={timeout_s:g}) returned False")
        value = lock._uuid  # pottery keeps the holder's random value here (not public API)
        self.held[value] = lock
        # Pottery's own validity test, ttl - drift - elapsed, counted from the start of the
        # winning round.
        valid_ms = ttl_ms - (ttl_ms * lock._CLOCK_DRIFT_FACTOR + 2)
        return Lease(key=key, value=value, acquired_ns=time.monotonic_ns(),
                     valid_until_ns=lock.round_start_ns + int(valid_ms * 1e6), meta={"ttl_ms": ttl_ms, "redis_key": lock.key})

    def release(self, lease: Lease) -> bool:
        from pottery import ReleaseUnlockedLock

        lock = self.held.pop(lease.value, None)
        if lock is None:
            return False
        try:
            lock.release()
            return True
        except ReleaseUnlockedLock as e:
            if e.redis_errors:
                raise
            return False

    def renew(self, lease: Lease) -> Lease:
        from pottery import ExtendUnlockedLock

        lock = self.held.get(lease.value)
        if lock is None:
            raise LockLost(f"{lease.key} is not held by this client")
        start = time.monotonic_ns()
        try:
            lock.extend()
        except ExtendUnlockedLock as e:
            raise LockLost(str(e)) from None
        ttl_ms = lease.meta["ttl_ms"]
        return Lease(key=lease.key, value=lease.value, acquired_ns=lease.acquired_ns,
                     valid_until_ns=start + int((ttl_ms * 0.99 - 2) * 1e6), meta=lease.meta)

    def close(self) -> None:
        for m in self.masters:
            m.close()


BLOCK_MARGIN_S = 1.0  # beyond a blocking command's own wait, before its socket times out


class PythonRedisLockClient:
    name = "python-redis-lock"
    release_checks_owner = True  # a late release cannot delete another holder's lock
    has_fencing = False
    servers = ("valkey", 1)
    OPTIONS = (node_timeout(100.0),
               Option(name="auto_renewal", type=bool, default=False, help="the library's own renewal thread"))

    def __init__(self, options: Mapping[str, Any] | None = None, clock: Clock | None = None):
        v = values(options, self.OPTIONS)
        self.node_timeout = v["node_timeout_ms"] / 1000
        self.auto_renewal = v["auto_renewal"]
        self.clock = clock or Clock()
        self.node: Node | None = None
        self.conns: dict[int, _SetTimed] = {}  # by BLPOP wait in seconds
        self.held: dict[str, Any] = {}

    def open(self, nodes: Sequence[Node]) -> None:
        lock_nodes = [n for n in nodes if n.role == "lock"]
        if not lock_nodes:
            raise ValueError("python-redis-lock needs one lock node; got none")
        self.node = lock_nodes[0]
        self._conn(1)

    def _conn(self, wait_s: int) -> _SetTimed:
        """The connection whose BLPOP waits wait_s: its socket timeout is that wait plus
        node_timeout plus BLOCK_MARGIN_S, since the server ends a blocked wait on its own timer,
        late by up to its event loop's tick on a loaded host (100 ms alone failed a suite run)."""
        c = self.conns.get(wait_s)
        if c is None:
            c = self.conns[wait_s] = connect(self.node, wait_s + self.node_timeout + BLOCK_MARGIN_S)
        return c

    def acquire(self, key: str, ttl_ms: int, timeout_s: float) -> Lease:
        import redis_lock

        expire = max(1, math.ceil(ttl_ms / 1000))
        wait = max(1, round(timeout_s))
        if not self.auto_renewal:
            wait = min(wait, expire)
        conn = self._conn(wait)
        lock = redis_lock.Lock(conn, key, expire=expire, auto_renewal=self.auto_renewal)
        if not lock.acquire(blocking=True, timeout=wait):
            raise NotAcquired(f"redis_lock.Lock.acquire(timeout={wait}) returned False")
        self.held[lock.id] = lock
        # Valid from the winning SET (its last), not from the start of the blocking wait.
        return Lease(key=key, value=lock.id, acquired_ns=time.monotonic_ns(),
                     valid_until_ns=conn.last_set_ns + int(ttl_ms * 0.99 * 1e6),
                     meta={"ttl_ms": ttl_ms, "expire_s": expire, "wait_s": wait, "auto_renewal": self.auto_renewal})

    def release(self, lease: Lease) -> bool:
        import redis_lock

        lock = self.held.pop(lease.value, None)
        if lock is None:
            return False
        try:
            lock.release()
            return True
        except redis_lock.NotAcquired:
            return False

    def renew(self, lease: Lease) -> Lease:
        import redis_lock

        lock = self.held.get(lease.value)
        if lock is None:
            raise LockLost(f"{lease.key} is not held by this client")
        start = time.monotonic_ns()
        try:
            lock.extend()
        except redis_lock.NotAcquired as e:
            raise LockLost(str(e)) from None
        return Lease(key=lease.key, value=lease.value, acquired_ns=lease.acquired_ns,
                     valid_until_ns=start + int(lease.meta["expire_s"] * 1e9 * 0.99), meta=lease.meta)

    def close(self) -> None:
        for lock in list(self.held.values()):
            if getattr(lock, "_lock_renewal_thread", None) is not None:
                try:
                    lock._stop_lock_renewer()
                except Exception:
                    pass
        self.held.clear()
        for c in self.conns.values():
            c.close()
