"""A counting semaphore on one Redis node (`redis --lock semaphore:N`).

The design shipped libraries use: a sorted set per semaphore whose members are the
holders' unique values, each scored by the moment its permit expires (Redis in Action
6.3's counting semaphore, Redisson's RPermitExpirableSemaphore). It keeps the articles'
SET NX PX rules for each permit: a unique value per acquisition (never a constant),
expiry decided by the server's clock (the script reads TIME, as PX does), taking a
permit is one atomic script, and a release removes only the caller's own member.

Acquire (ACQUIRE, one Lua script): drop the members whose expiry has passed, then, if
fewer than N remain, add ours scored now + ttl and return 1; else 0, and the client polls
again after a jittered pause until its acquire timeout, like the mutex (no wait queue).
Release: ZREM of our member (0: it had expired, or was dropped: "not held"). Renew and the
watchdog: rescore our member to now + ttl only if it is still there and unexpired.
The set's own key expires one TTL after the last permit given or renewed, so an idle
semaphore leaves nothing behind.

What breaks, by design: a permit is a lease. A holder paused past its TTL loses its
member to the next acquire's cleanup and wakes still believing it holds: N + 1 holders
(pause-holder with its default 2 x TTL breaks it; scenario 1 of the articles, per permit).
A server clock jumped forward expires every member at once (clock-skew). No token: N
holders at once have no order a fence could use.

Must not: trust a client's clock for expiry, remove another holder's member, or turn an
ambiguous error into NotAcquired (a timed-out script may have added us: `info`).
"""

from __future__ import annotations

import time
from typing import Any, Callable

import redis

from harness.core.contracts.client import Lease, unique_value
from harness.core.errors import LockLost, NotAcquired

# KEYS: the set. ARGV: permits, our value, ttl ms. The server's own clock, in ms.
ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return 1
end
return 0
"""

# KEYS: the set. ARGV: our value, ttl ms. 1 if our unexpired member was rescored.
RENEW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if score and tonumber(score) > now then
  redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), ARGV[1])
  if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
  return 1
end
return 0
"""


def set_key(key: str) -> str:
    return f"{key}:semaphore"


def acquire(client: Any, key: str, ttl_ms: int, timeout_s: float, permits: int,
            never_sent: Callable[[BaseException], bool]) -> Lease:
    """Poll for a permit until `timeout_s`: a Lease, NotAcquired, or an ambiguous error.
    `never_sent(e)`: the error came before the script reached the server (the mutex's rule)."""
    deadline = time.monotonic() + timeout_s
    polls = 0
    while True:
        value = unique_value()
        start = time.monotonic_ns()
        polls += 1
        last_error = None
        try:
            got = int(client.conn.eval(ACQUIRE, 1, set_key(key), permits, value, int(ttl_ms)))
        except redis.ConnectionError as e:
            if not never_sent(e):
                raise
            got, last_error = 0, e
        if got:
            lease = Lease(key=key, value=value, token=None, acquired_ns=time.monotonic_ns(),
                          valid_until_ns=client._valid_from(start, ttl_ms),
                          meta={"ttl_ms": ttl_ms, "polls": polls, "node": client.node.name, "permits": permits})
            _hold(client, lease, ttl_ms)
            return lease
        pause = client.rng.uniform(0, client.retry_delay)
        if time.monotonic() + pause > deadline:
            why = f"node unreachable ({last_error})" if last_error else f"all {permits} permits taken"
            raise NotAcquired(f"{why} after {polls} poll(s)")
        time.sleep(pause)


def _hold(client: Any, lease: Lease, ttl_ms: int) -> None:
    def refresh() -> int | None:
        start = time.monotonic_ns()
        ok = int(client.conn.eval(RENEW, 1, set_key(lease.key), lease.value, int(ttl_ms)))
        return client._valid_from(start, ttl_ms) if ok else None

    interval = (client.watchdog_interval_ms or ttl_ms / 3) / 1000 if client.watchdog else None
    client.renewals.hold(lease, interval, refresh)


def release(client: Any, lease: Lease) -> bool:
    client.renewals.unhold(lease)
    return bool(int(client.conn.zrem(set_key(lease.key), lease.value)))


def renew(client: Any, lease: Lease) -> Lease:
    ttl_ms = int(lease.meta.get("ttl_ms", 0)) or 2000
    start = time.monotonic_ns()
    if not int(client.conn.eval(RENEW, 1, set_key(lease.key), lease.value, ttl_ms)):
        client.renewals.mark_lost(lease)
        raise LockLost(f"{lease.key}: permit {lease.value} expired or was taken back")
    return client.renewals.extend(lease, client._valid_from(start, ttl_ms))
