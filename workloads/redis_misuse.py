"""Two Redis locks with the bugs the articles warn about, kept on purpose to be caught.

They exist so the harness can show, on a real server, what each mistake does; nobody
should copy them. Both run on node n1 of a one-node valkey cluster and poll a taken lock
after a jittered pause, like `redis`.

`redis-unsafe-release` (misuse: a constant value and a plain DEL). Acquire is
`SET key "locked" NX PX ttl`; release is `DEL key`. The value proves nothing, so a holder
whose lease expired while it worked (a pause, a slow critical section) deletes the lock
of the client that took it next, and a third client walks in: two holders, then three.

`redis-setnx-expire` (misuse: SETNX and EXPIRE as two commands). Acquire is `SETNX key
value`, then, as a second command, `PEXPIRE key ttl` (PEXPIRE rather than EXPIRE only so
the TTL keeps its milliseconds; the bug is the same). A client that dies between the two
leaves a key without a TTL: the lock is never released and every later acquire fails.
Option `crash_between` is the probability with which the client "crashes" there: it
raises SimulatedCrash after a successful SETNX (an `info`: the op happened) and never
sends the PEXPIRE; the worker then continues as a new process, like a restarted service
whose predecessor left the key behind. Release is the safe compare-and-delete, so that
the only bug shown is the non-atomic expiry. If the PEXPIRE itself fails the client
raises as well (`info`), leaving the same immortal key: that is the real-world variant.

Neither has fencing: token None. (An INCR token could be bolted on, but these designs
exist to show the failures fencing-free code meets; fencing would hide the first bug.)

A refused connection (nothing sent) is polled on like a taken lock, as in `redis`.
Must not: be "fixed". Options: node_timeout_ms (100), retry_delay_ms (50),
crash_between (0.0; redis-setnx-expire only).
"""

from __future__ import annotations

import abc
import random
import time
from typing import Any, Mapping, Sequence

import redis

from harness.core.contracts.cluster import Node
from harness.core.errors import LockLost, NotAcquired
from harness.core.options import Option, values
from harness.core.contracts.client import Clock, Lease, node_timeout, retry_delay, unique_value
from workloads.redis_common import RELEASE, connect
from workloads.redis_single import never_sent

CONSTANT = "locked"  # the articles' anti-pattern: every holder uses the same value


class SimulatedCrash(Exception):
    """The client died between SETNX and EXPIRE (an `info`: the SETNX took effect)."""


class _Polling(abc.ABC):
    """Shared plumbing: one node, no retries, jittered polling until the acquire timeout."""

    name = ""
    has_fencing = False
    servers = ("valkey", 1)
    OPTIONS: tuple[Option, ...] = (node_timeout(100.0), retry_delay())

    def __init__(self, options: Mapping[str, Any] | None = None, clock: Clock | None = None):
        options = options or {}
        v = values(options, self.OPTIONS)
        self.node_timeout = v["node_timeout_ms"] / 1000
        self.retry_delay = v["retry_delay_ms"] / 1000
        self.clock = clock or Clock()
        self.rng = random.Random()
        self.conn: redis.Redis | None = None

    def open(self, nodes: Sequence[Node]) -> None:
        lock_nodes = [n for n in nodes if n.role == "lock"]
        if not lock_nodes:
            raise ValueError(f"{self.name} needs one lock node; got none")
        self.node = lock_nodes[0]
        self.conn = connect(self.node, self.node_timeout)

    @abc.abstractmethod
    def _try(self, key: str, ttl_ms: int) -> Lease | None:
        """One attempt: a Lease if this client took the lock, None if it is taken."""

    def acquire(self, key: str, ttl_ms: int, timeout_s: float) -> Lease:
        deadline = time.monotonic() + timeout_s
        polls = 0
        while True:
            polls += 1
            try:
                lease, last_error = self._try(key, ttl_ms), None
            except redis.ConnectionError as e:
                if not never_sent(e):
                    raise
                lease, last_error = None, e  # the node is down: poll on, as for a taken lock
            if lease is not None:
                return lease
            pause = self.rng.uniform(0, self.retry_delay)
            if time.monotonic() + pause > deadline:
                why = f"node unreachable ({last_error})" if last_error else "held by another client"
                raise NotAcquired(f"{why} after {polls} poll(s)")
            time.sleep(pause)

    def renew(self, lease: Lease) -> Lease:
        """These designs never extend a lock: a renewal is refused as a lost lease."""
        raise LockLost(f"{self.name} cannot renew a lock (the design has no renewal)")

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


class UnsafeReleaseClient(_Polling):
    name = "redis-unsafe-release"
    release_checks_owner = False  # its bug: a late release deletes whoever holds the lock then

    def _try(self, key: str, ttl_ms: int) -> Lease | None:
        start = time.monotonic_ns()
        if not self.conn.set(key, CONSTANT, nx=True, px=int(ttl_ms)):
            return None
        return Lease(key=key, value=CONSTANT, acquired_ns=time.monotonic_ns(),
                     valid_until_ns=start + int(ttl_ms * 1e6), meta={"ttl_ms": ttl_ms})

    def release(self, lease: Lease) -> bool:
        # The bug: deletes whatever lock is there now, ours or not.
        return bool(self.conn.delete(lease.key))


class SetnxExpireClient(_Polling):
    name = "redis-setnx-expire"
    release_checks_owner = True  # a late release cannot delete another holder's lock
    OPTIONS = _Polling.OPTIONS + (
        Option(name="crash_between", type=float, default=0.0, min=0, max=1,
               help="probability that the client dies between SETNX and EXPIRE"),)

    def __init__(self, options: Mapping[str, Any] | None = None, clock: Clock | None = None):
        super().__init__(options, clock)
        self.crash_between = values(options, self.OPTIONS)["crash_between"]

    def _try(self, key: str, ttl_ms: int) -> Lease | None:
        value = unique_value()
        start = time.monotonic_ns()
        if not self.conn.setnx(key, value):
            return None
        if self.rng.random() < self.crash_between:
            raise SimulatedCrash(f"client crashed after SETNX {key}, before EXPIRE: the key has no TTL")
        if not self.conn.pexpire(key, int(ttl_ms)):
            raise SimulatedCrash(f"PEXPIRE {key} found no key after our SETNX")
        return Lease(key=key, value=value, acquired_ns=time.monotonic_ns(),
                     valid_until_ns=start + int(ttl_ms * 1e6), meta={"ttl_ms": ttl_ms})

    def release(self, lease: Lease) -> bool:
        return bool(int(self.conn.eval(RELEASE, 1, lease.key, lease.value)))
