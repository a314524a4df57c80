"""Redlock (Antirez) on N independent Redis-compatible masters.

Acquire: SET key value NX PX ttl on every node in turn, each with a short timeout; the
lock is held when a majority (N/2+1) said OK and validity = ttl - elapsed - drift is
still positive, where drift = ttl * drift_factor + 2 ms. Otherwise release everywhere and
retry after a jittered pause until the acquire timeout. Release: compare-and-delete on
every node. Elapsed time is measured with the monotonic clock, as the algorithm requires.

No fencing token: Redlock has no counter that is monotonic across its independent nodes,
so `token` stays None and the report says so.
"""

from __future__ import annotations

import random
import time
from typing import Any, Mapping, Sequence

import redis

from harness.core.contracts.cluster import Node
from harness.core.errors import NotAcquired
from harness.core.options import Option, values
from harness.core.contracts.client import DRIFT_FACTOR, Clock, Lease, node_timeout, retry_delay, unique_value
from workloads.redis_common import RELEASE, RENEW, connect


class RedlockClient:
    """Options: node_timeout_ms (50), drift_factor (0.01), retry_delay_ms (50),
    validity_clock (monotonic | wall). `wall` measures the acquire's elapsed time with the
    wall clock, a bug some implementations have: a client clock step during an acquire
    then inflates (or deflates) the validity it believes it has."""

    name = "redlock"
    release_checks_owner = True  # a late release cannot delete another holder's lock
    has_fencing = False
    servers = ("valkey", 5)
    OPTIONS = (node_timeout(50.0), DRIFT_FACTOR, retry_delay(),
               Option(name="validity_clock", type=str, default="monotonic", choices=("monotonic", "wall"),
                      help="clock that times the acquire (wall: the bug some implementations have)"))

    def __init__(self, options: Mapping[str, Any] | None = None, clock: Clock | None = None):
        options = options or {}
        v = values(options, self.OPTIONS)
        self.node_timeout = v["node_timeout_ms"] / 1000
        self.drift_factor = v["drift_factor"]
        self.retry_delay = v["retry_delay_ms"] / 1000
        self.clock = clock or Clock()
        self.wall = v["validity_clock"] == "wall"
        self.clock_reads = ("validity (elapsed time of an acquire)",) if self.wall else ()
        self.rng = random.Random()
        self.conns: list[redis.Redis] = []
        self.names: list[str] = []

    def open(self, nodes: Sequence[Node]) -> None:
        lock_nodes = [n for n in nodes if n.role == "lock"]
        self.names = [n.name for n in lock_nodes]
        self.conns = [connect(n, self.node_timeout) for n in lock_nodes]
        self.quorum = len(self.conns) // 2 + 1

    def _try_all(self, key: str, value: str, ttl_ms: int) -> int:
        got = 0
        for c in self.conns:
            try:
                if c.set(key, value, nx=True, px=ttl_ms):
                    got += 1
            except (redis.RedisError, OSError):
                pass  # a node that does not answer counts as a no; release covers a late yes
        return got

    def _release_all(self, key: str, value: str) -> int:
        released = 0
        for c in self.conns:
            try:
                released += int(c.eval(RELEASE, 1, key, value))
            except (redis.RedisError, OSError):
                pass
        return released

    def acquire(self, key: str, ttl_ms: int, timeout_s: float) -> Lease:
        deadline = time.monotonic() + timeout_s
        while True:
            value = unique_value()
            start = time.monotonic_ns()
            wall0 = self.clock.time()
            got = self._try_all(key, value, ttl_ms)
            elapsed_ms = (self.clock.time() - wall0) * 1e3 if self.wall else (time.monotonic_ns() - start) / 1e6
            drift_ms = ttl_ms * self.drift_factor + 2
            validity_ms = ttl_ms - elapsed_ms - drift_ms
            if got >= self.quorum and validity_ms > 0:
                now = time.monotonic_ns()
                # the validity counts from now, the end of the acquire (its elapsed time is
                # already taken off): start + ttl - drift with a monotonic clock
                return Lease(key=key, value=value, acquired_ns=now,
                             valid_until_ns=now + int(validity_ms * 1e6),
                             meta={"ttl_ms": ttl_ms, "nodes_ok": got, "validity_ms": round(validity_ms, 3)})
            self._release_all(key, value)
            if time.monotonic() + self.retry_delay > deadline:
                raise NotAcquired(f"got {got}/{len(self.conns)} nodes")
            time.sleep(self.rng.uniform(0, self.retry_delay))

    def release(self, lease: Lease) -> bool:
        return self._release_all(lease.key, lease.value) >= self.quorum

    def renew(self, lease: Lease) -> Lease:
        from harness.core.errors import LockLost

        ttl_ms = int(lease.meta.get("ttl_ms", 0)) or 2000
        start = time.monotonic_ns()
        got = 0
        for c in self.conns:
            try:
                got += int(c.eval(RENEW, 1, lease.key, lease.value, ttl_ms))
            except (redis.RedisError, OSError):
                pass
        if got < self.quorum:
            raise LockLost(f"renewed on {got}/{len(self.conns)} nodes")
        return Lease(key=lease.key, value=lease.value, acquired_ns=lease.acquired_ns,
                     valid_until_ns=start + int((ttl_ms * (1 - self.drift_factor) - 2) * 1e6), meta=lease.meta)

    def close(self) -> None:
        for c in self.conns:
            c.close()
