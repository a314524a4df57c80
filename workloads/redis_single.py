"""The single-instance Redis lock the articles start from, with an optional watchdog.

Acquire: one Lua script on node n1 runs `SET key value NX PX ttl` and, only if that set
the key, `INCR key:fence`, so taking the lock and taking a fencing token are one atomic
step: no holder without a token, no token without a holder. A taken lock is polled
again after a jittered pause (SET NX has no wait queue: this is the herd of scenario 5).
Release: compare-and-delete (RELEASE), so a holder whose lease expired cannot free the
lock of whoever holds it now.

Token: the INCR result, strictly increasing per successful acquisition on this node. It
is only as durable as the node's data: with persistence off (the default), a killed and
restarted node starts its counter from 1 again, and the fenced store then rejects every
later holder's writes as stale. That is a real property of this design, not a harness bug.

Validity: the client believes it holds the lock until start + ttl * (1 - drift_factor),
where start is taken before the request is sent (the server's expiry starts later, so
this errs on the safe side) and drift_factor allows for the server clock running fast.

Watchdog (option `watchdog`, or the lead's `--watchdog` flag): a daemon thread per lease
renews the key every ttl/3 with compare-and-pexpire (RENEW). Each success moves the
client's validity to renewal start + ttl * (1 - drift_factor); `current(lease)` and
`renew(lease)` return a Lease carrying that extended valid_until_ns. A renewal answered 0
(the key is gone or someone else's) marks the lease lost at once; renewal errors are
retried at the next tick and mark it lost once the validity has passed without a success.
`still_held(lease)` is the worker's view of this: False once lost or past validity.
What the extension means: a watchdog turns a TTL lock into a lock held for as long as
the holder's process keeps renewing, so a holder may legitimately hold for many TTLs;
and a paused (SIGSTOPped, GC'd) holder stops renewing without knowing it, so
`still_held` checked before a pause says nothing about after it. Only fencing helps then.
(The worker reads valid_until_ns once, from the Lease acquire returned, and caps its hold
below the TTL, so under the current worker a hold never relies on an extension.)

Must not: retry inside a command (connect() builds clients without retries), turn an
ambiguous error into NotAcquired (a timed-out script may have set the key: that is
`info`), or swallow a failed renewal (it is surfaced through still_held and LockLost).
A refused connection is not ambiguous (nothing was sent): the acquire polls on until its
timeout as if the lock were taken, and then fails; a client hammering a dead node in a
tight loop of instant errors is no use to anyone.

Options: node_timeout_ms (100; socket and connect timeout), retry_delay_ms (50; upper
bound of the jittered pause between polls), drift_factor (0.01), watchdog (false),
watchdog_interval_ms (ttl/3).
"""

from __future__ import annotations

import errno
import random
import time
from typing import Any, Mapping, Sequence

import redis

from harness.core.contracts.cluster import Node
from harness.core.errors import LockLost, NotAcquired
from harness.core.options import Option, values
from harness.core.contracts.client import DRIFT_FACTOR, Clock, Lease, node_timeout, retry_delay, unique_value
from workloads.redis_common import RELEASE, RENEW, connect
from workloads.renewal import Renewals

# Take the lock and, only then, a fencing token, in one atomic step. Returns the token or nil.
ACQUIRE = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return false
"""


def never_sent(e: BaseException) -> bool:
    """True when redis-py could not even connect, so the command never reached the server.

    redis-py raises ConnectionError from inside the OSError of its connect(); refused and
    unreachable only happen there. A connect *timeout* is not counted: it looks like a read
    timeout (both come from socket.timeout), and a read timeout is ambiguous.
    """
    ctx = e.__context__
    return isinstance(e, redis.ConnectionError) and (
        isinstance(ctx, ConnectionRefusedError)
        or (isinstance(ctx, OSError) and ctx.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH)))


class RedisSingleClient:
    name = "redis"
    release_checks_owner = True  # a late release cannot delete another holder's lock
    has_fencing = True
    servers = ("valkey", 1)
    lock_kinds = ("mutex", "semaphore")  # the sorted-set semaphore: workloads/kinds_redis.py
    OPTIONS = (node_timeout(100.0), retry_delay(), DRIFT_FACTOR,
               Option(name="watchdog", type=bool, default=False, help="renew the lease every ttl/3 in the background"),
               Option(name="watchdog_interval_ms", type=float, default=None, above=0, max=3_600_000,
                      help="renewal period of the watchdog, ms (default ttl/3)"))

    def __init__(self, options: Mapping[str, Any] | None = None, clock: Clock | None = None):
        options = options or {}
        v = values(options, self.OPTIONS)
        self.node_timeout = v["node_timeout_ms"] / 1000
        self.retry_delay = v["retry_delay_ms"] / 1000
        self.drift_factor = v["drift_factor"]
        self.watchdog = v["watchdog"]
        self.watchdog_interval_ms = v["watchdog_interval_ms"]
        self.clock = clock or Clock()
        self.rng = random.Random()
        self.conn: redis.Redis | None = None
        self.renewals = Renewals(what="renewals", gone="renewal found the key gone or owned by another client",
                                 join_timeout=self.node_timeout * 2 + 0.1)

    def open(self, nodes: Sequence[Node]) -> None:
        lock_nodes = [n for n in nodes if n.role == "lock"]
        if not lock_nodes:
            raise ValueError("redis needs one lock node; got none")
        self.node = lock_nodes[0]
        self.conn = connect(self.node, self.node_timeout)

    def _valid_from(self, start_ns: int, ttl_ms: int) -> int:
        return start_ns + int(ttl_ms * (1 - self.drift_factor) * 1e6)

    def acquire(self, key: str, ttl_ms: int, timeout_s: float, *, permits: int | None = None) -> Lease:
        if permits is not None:
            from workloads import kinds_redis

            return kinds_redis.acquire(self, key, ttl_ms, timeout_s, permits, never_sent)
        deadline = time.monotonic() + timeout_s
        polls = 0
        while True:
            value = unique_value()
            start = time.monotonic_ns()
            polls += 1
            last_error = None
            try:
                token = self.conn.eval(ACQUIRE, 2, key, f"{key}:fence", value, int(ttl_ms))
            except redis.ConnectionError as e:
                if not never_sent(e):
                    raise
                token, last_error = None, e  # the node is down: poll on, as for a taken lock
            if token is not None:
                lease = Lease(key=key, value=value, token=int(token), acquired_ns=time.monotonic_ns(),
                              valid_until_ns=self._valid_from(start, ttl_ms),
                              meta={"ttl_ms": ttl_ms, "polls": polls, "node": self.node.name})
                self._hold(lease, ttl_ms)
                return lease
            pause = self.rng.uniform(0, self.retry_delay)
            if time.monotonic() + pause > deadline:
                why = f"node unreachable ({last_error})" if last_error else "held by another client"
                raise NotAcquired(f"{why} after {polls} poll(s)")
            time.sleep(pause)

    # -- the watchdog -----------------------------------------------------------------------
    def _hold(self, lease: Lease, ttl_ms: int) -> None:
        def refresh() -> int | None:
            start = time.monotonic_ns()
            ok = int(self.conn.eval(RENEW, 1, lease.key, lease.value, int(ttl_ms)))
            return self._valid_from(start, ttl_ms) if ok else None

        interval = (self.watchdog_interval_ms or ttl_ms / 3) / 1000 if self.watchdog else None
        self.renewals.hold(lease, interval, refresh)

    def current(self, lease: Lease) -> Lease:
        """The lease with the validity the client believes now (extended by the watchdog)."""
        return self.renewals.current(lease)

    def still_held(self, lease: Lease) -> bool:
        """False once a renewal found the lock gone, or the validity passed without renewal."""
        return self.renewals.still_held(lease)

    def lost_reason(self, lease: Lease) -> str | None:
        return self.renewals.lost_reason(lease)

    # -- release and renew --------------------------------------------------------------------
    def release(self, lease: Lease) -> bool:
        if lease.meta.get("permits") is not None:
            from workloads import kinds_redis

            return kinds_redis.release(self, lease)
        self.renewals.unhold(lease)
        return bool(int(self.conn.eval(RELEASE, 1, lease.key, lease.value)))

    def renew(self, lease: Lease) -> Lease:
        if lease.meta.get("permits") is not None:
            from workloads import kinds_redis

            return kinds_redis.renew(self, lease)
        ttl_ms = int(lease.meta.get("ttl_ms", 0)) or 2000
        start = time.monotonic_ns()
        if not int(self.conn.eval(RENEW, 1, lease.key, lease.value, ttl_ms)):
            self.renewals.mark_lost(lease)
            raise LockLost(f"{lease.key} is no longer held with value {lease.value}")
        return self.renewals.extend(lease, self._valid_from(start, ttl_ms))

    def close(self) -> None:
        self.renewals.close()
        if self.conn is not None:
            self.conn.close()
