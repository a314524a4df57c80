"""etcd locks with pyetcd (PyPI etcd-sdk-python, the python-etcd3 API): ours, and its Lock.

`etcd` (ours), the design of the articles:
  acquire: grant a lease of ceil(ttl_ms / 1000) s (etcd leases are whole seconds; etcd
           3.4 also raises any TTL below its minimum, 2 s with our election timeout, and
           says so in the grant's answer), then one txn
           If(CreateRevision(key) == 0) Then(Put(key, value, lease)) Else(Get(key)).
           If the key exists, watch it from its mod_revision + 1 for a DELETE (so no delete
           between the txn and the watch is missed), then try the txn again, until the
           acquire timeout. The lease is refreshed before a retry once a third of its TTL
           has passed, so a late winner does not start with a nearly expired lease.
  hold:    a keepalive thread refreshes the lease every ttl/3 (pyetcd has no background
           keepalive). A refresh answered with TTL 0 (the lease is gone: python-etcd3 does
           not raise for that) marks the lease lost at once; errors are retried at the next
           tick and mark it lost once the validity passed. still_held() is False then.
  release: txn If(Value(key) == value) Then(Delete(key)), then REVOKE the lease: the
           python-etcd3 family leaves it alive otherwise (a leak until its TTL).
Token: the key's create_revision, i.e. the revision in the header of the txn's put. etcd
revisions are cluster-wide and strictly increasing, so each holder's is above the last.
Validity: start of the grant (or of the last refresh) + min(ttl_ms, granted TTL) x
(1 - drift_factor); each keepalive success moves it on (see redis_single for what an
extended validity means: a paused process stops renewing without noticing).

Endpoints. pyetcd's MultiEndpointEtcd3Client gets all three members with failover on:
a call that fails with UNAVAILABLE or DEADLINE_EXCEEDED marks its member failed for
`endpoint_retry_s` and the next call goes to the next member (the failed call itself is
not retried). Each worker starts on member pid % 3, so workers spread over the members
and some of them talk to whichever member a partition isolates. A worker on a minority
member sees its txn time out (`info`), then fails over.

Outcomes. A failed lease grant is a `fail` (no key can exist without the txn). A txn
that errors is `info`: it may have been applied. We then revoke the lease (best effort),
which deletes the key if it was written, and raise.

`etcd-recipe`: pyetcd's own `client.lock(name, ttl)` (key /locks/<name>), a new Lock per
acquire as its docs show, acquire(timeout) as shipped. Token: the recipe stores the
put's header revision in `lock.revision` after a successful acquire (undocumented but
public), which is the key's create_revision, so it is used. As shipped it grants a new
lease on every attempt and drops a failed attempt's lease without revoking it, and
release() does not revoke the winner's lease either; we revoke the winner's lease after
release() (and after an error), and leave the recipe's per-attempt leak as it is (each
leaked lease expires after its TTL). No keepalive: the recipe's lock lives its TTL.
Its own deadline is measured with time.time(), not a monotonic clock.

Options: op_timeout_ms (1000; gRPC deadline of every call), endpoint_retry_s (1.0),
drift_factor (0.01), keepalive (true; `etcd` only), keepalive_interval_ms (ttl/3),
watch_recheck_ms (1000; longest wait on one watch before trying the txn again, in case a
watch stream died silently). Must not: retry a txn that errored, hide a TTL-0 refresh,
or leave a lease alive after release.
"""

from __future__ import annotations

import math
import os
import queue
import time
from dataclasses import replace
from typing import Any, Mapping, Sequence

from harness.core.contracts.cluster import Node
from harness.core.errors import LockLost, NotAcquired
from harness.core.options import Option, values
from harness.core.contracts.client import DRIFT_FACTOR, Clock, Lease, unique_value
from workloads.renewal import Renewals


def lease_seconds(ttl_ms: int) -> int:
    """etcd leases are whole seconds: round up (never below the TTL asked for), at least 1."""
    return max(1, math.ceil(ttl_ms / 1000))


def valid_until(start_ns: int, ttl_ms: int, granted_s: int, drift_factor: float) -> int:
    """A lease confirmed at start_ns lives for what etcd granted, but the client counts no longer
    than it asked for (etcd keeps a 1 s lease for its minimum TTL), less the drift allowance."""
    return start_ns + int(min(ttl_ms, granted_s * 1000) * (1 - drift_factor) * 1e6)


def make_client(nodes: Sequence[Node], op_timeout: float, endpoint_retry_s: float):
    """A failover client over every member, starting on member pid % n.

    It notes when it last asked for a lease grant (`last_grant_ns`): the recipe grants the
    winning lease right before its txn but does not say when, and its lock lives from there.
    """
    import pyetcd

    class GrantTimed(pyetcd.MultiEndpointEtcd3Client):
        last_grant_ns = 0

        def lease(self, ttl, lease_id=None):
            self.last_grant_ns = time.monotonic_ns()
            return super().lease(ttl, lease_id)

    lock_nodes = [n for n in nodes if n.role == "lock"]
    if not lock_nodes:
        raise ValueError("etcd needs lock nodes; got none")
    first = os.getpid() % len(lock_nodes)
    ordered = lock_nodes[first:] + lock_nodes[:first]
    eps = [pyetcd.Endpoint(n.host, n.port, secure=False, time_retry=endpoint_retry_s) for n in ordered]
    c = GrantTimed(endpoints=eps, timeout=op_timeout, failover=True)
    c._current_endpoint_label = eps[0].netloc  # pyetcd picks at random; we want a spread by process
    return c


def _revoke(client, lease_id: int) -> str | None:
    """Best-effort revoke; the error text if it failed (the lease then lives out its TTL)."""
    try:
        client.revoke_lease(lease_id)
        return None
    except Exception as e:
        return f"{type(e).__name__}: {e}"


ETCD_OPTIONS = (
    Option(name="op_timeout_ms", type=float, default=1000.0, above=0, max=600_000, help="timeout of one etcd call, ms"),
    Option(name="endpoint_retry_s", type=float, default=1.0, min=0, max=600,
           help="how long a call tries the other endpoints after one fails, s"),
    DRIFT_FACTOR)


class EtcdClient:
    name = "etcd"
    release_checks_owner = True  # a late release cannot delete another holder's lock
    has_fencing = True
    servers = ("etcd", 3)
    lock_kinds = ("mutex", "semaphore")  # a lease per holder under a prefix: workloads/kinds_etcd.py
    OPTIONS = ETCD_OPTIONS + (
        Option(name="keepalive", type=bool, default=True, help="renew the lease in the background"),
        Option(name="keepalive_interval_ms", type=float, default=None, above=0, max=3_600_000,
               help="keepalive period, ms (default ttl/3)"),
        Option(name="watch_recheck_ms", type=float, default=1000.0, above=0, max=60_000,
               help="how often a waiter re-reads the key besides its watch, ms"))

    def __init__(self, options: Mapping[str, Any] | None = None, clock: Clock | None = None):
        v = values(options, self.OPTIONS)
        self.op_timeout = v["op_timeout_ms"] / 1000
        self.endpoint_retry_s = v["endpoint_retry_s"]
        self.drift_factor = v["drift_factor"]
        self.keepalive = v["keepalive"]
        self.keepalive_interval_ms = v["keepalive_interval_ms"]
        self.watch_recheck = v["watch_recheck_ms"] / 1000
        self.clock = clock or Clock()
        self.client: Any = None
        self.renewals = Renewals(what="keepalives", gone="keepalive answered TTL 0: the lease expired",
                                 join_timeout=self.op_timeout + 0.1)

    def open(self, nodes: Sequence[Node]) -> None:
        self.client = make_client(nodes, self.op_timeout, self.endpoint_retry_s)

    def _valid(self, start_ns: int, ttl_ms: int, granted_s: int) -> int:
        return valid_until(start_ns, ttl_ms, granted_s, self.drift_factor)

    def _refresh(self, lease_id: int) -> int:
        """One keepalive; the TTL etcd answered (0: the lease no longer exists)."""
        responses = self.client.refresh_lease(lease_id)
        ttl = 0
        for r in responses:
            ttl = r.TTL
        return int(ttl)

    def acquire(self, key: str, ttl_ms: int, timeout_s: float, *, permits: int | None = None) -> Lease:
        if permits is not None:
            from workloads import kinds_etcd

            return kinds_etcd.acquire(self, key, ttl_ms, timeout_s, permits, lease_seconds=lease_seconds, revoke=_revoke)
        c = self.client
        deadline = time.monotonic() + timeout_s
        value = unique_value()
        granted_at = time.monotonic_ns()
        try:
            lease = c.lease(lease_seconds(ttl_ms))
        except Exception as e:  # no txn was sent: the lock cannot have been taken
            raise NotAcquired(f"lease grant failed: {type(e).__name__}: {e}") from None
        granted = int(lease.ttl)
        tries = 0
        try:
            while True:
                if tries and time.monotonic_ns() - granted_at > granted * 1e9 / 3:
                    t = time.monotonic_ns()
                    try:  # our last txn certainly wrote nothing, so any failure here is a fail
                        left = self._refresh(lease.id)
                    except Exception as e:
                        raise NotAcquired(f"lease refresh failed while waiting: {type(e).__name__}: {e}") from None
                    if left <= 0:
                        raise NotAcquired("our lease expired while we waited")
                    granted_at = t
                tries += 1
                ok, resp = c.transaction(compare=[c.transactions.create(key) == 0],
                                         success=[c.transactions.put(key, value, lease=lease.id)],
                                         failure=[c.transactions.get(key)])
                if ok:
                    rev = int(resp[0].response_put.header.revision)
                    out = Lease(key=key, value=value, token=rev, acquired_ns=time.monotonic_ns(),
                                valid_until_ns=self._valid(granted_at, ttl_ms, granted),
                                meta={"lease_id": lease.id, "ttl_ms": ttl_ms, "granted_s": granted, "tries": tries,
                                      "endpoint": c._current_endpoint_label})
                    self._hold(out, ttl_ms, granted)
                    return out
                kvs = resp[0] if resp else []
                if time.monotonic() >= deadline:
                    raise NotAcquired(f"held by another client after {tries} txn(s)")
                if kvs:
                    self._wait_delete(key, kvs[0][1].mod_revision + 1, deadline)
        except NotAcquired:
            _revoke(c, lease.id)
            raise
        except BaseException:
            _revoke(c, lease.id)  # deletes the key if the ambiguous txn did write it
            raise

    def _wait_delete(self, key: str, start_revision: int, deadline: float) -> None:
        """Block until the key is deleted, the watch breaks, or min(deadline, recheck) passes."""
        from pyetcd import events

        q: queue.Queue = queue.Queue()
        try:
            wid = self.client.add_watch_callback(key, q.put, start_revision=start_revision)
        except Exception:
            time.sleep(max(0.0, min(0.05, deadline - time.monotonic())))  # retry the txn shortly
            return
        try:
            until = min(deadline, time.monotonic() + self.watch_recheck)
            while True:
                left = until - time.monotonic()
                if left <= 0:
                    return
                try:
                    r = q.get(timeout=left)
                except queue.Empty:
                    return
                if isinstance(r, Exception) or any(isinstance(e, events.DeleteEvent) for e in r.events):
                    return
        finally:
            try:
                self.client.cancel_watch(wid)
            except Exception:
                pass

    # -- keepalive ---------------------------------------------------------------------------
    def _hold(self, lease: Lease, ttl_ms: int, granted_s: int) -> None:
        def refresh() -> int | None:
            start = time.monotonic_ns()
            return self._valid(start, ttl_ms, granted_s) if self._refresh(lease.meta["lease_id"]) > 0 else None

        interval = (self.keepalive_interval_ms or ttl_ms / 3) / 1000 if self.keepalive else None
        self.renewals.hold(lease, interval, refresh)

    def still_held(self, lease: Lease) -> bool:
        return self.renewals.still_held(lease)

    def current(self, lease: Lease) -> Lease:
        return self.renewals.current(lease)

    # -- release and renew ------------------------------------------------------------------
    def release(self, lease: Lease) -> bool:
        if lease.meta.get("permits") is not None:
            from workloads import kinds_etcd

            return kinds_etcd.release(self, lease, _revoke)
        c = self.client
        self.renewals.unhold(lease)
        try:
            ok, _ = c.transaction(compare=[c.transactions.value(lease.key) == lease.value],
                                  success=[c.transactions.delete(lease.key)], failure=[])
        finally:
            _revoke(c, lease.meta["lease_id"])
        return bool(ok)

    def renew(self, lease: Lease) -> Lease:
        start = time.monotonic_ns()
        if self._refresh(lease.meta["lease_id"]) <= 0:
            self.renewals.mark_lost(lease)
            raise LockLost(f"lease {lease.meta['lease_id']} of {lease.key} has expired")
        return self.renewals.extend(lease, self._valid(start, lease.meta["ttl_ms"], lease.meta["granted_s"]))

    def close(self) -> None:
        self.renewals.close()
        if self.client is not None:
            self.client.close()


class EtcdRecipeClient:
    name = "etcd-recipe"
    release_checks_owner = True  # a late release cannot delete another holder's lock
    has_fencing = True
    servers = ("etcd", 3)
    OPTIONS = ETCD_OPTIONS

    def __init__(self, options: Mapping[str, Any] | None = None, clock: Clock | None = None):
        v = values(options, self.OPTIONS)
        self.op_timeout = v["op_timeout_ms"] / 1000
        self.endpoint_retry_s = v["endpoint_retry_s"]
        self.drift_factor = v["drift_factor"]
        self.clock = clock or Clock()
        self.client: Any = None
        self.locks: dict[str, Any] = {}

    def open(self, nodes: Sequence[Node]) -> None:
        self.client = make_client(nodes, self.op_timeout, self.endpoint_retry_s)

    def acquire(self, key: str, ttl_ms: int, timeout_s: float) -> Lease:
        lock = self.client.lock(key, ttl=lease_seconds(ttl_ms))
        try:
            got = lock.acquire(timeout=timeout_s)
        except BaseException:
            if lock.lease is not None:
                _revoke(self.client, lock.lease.id)
            raise
        if not got:
            raise NotAcquired(f"pyetcd Lock.acquire({timeout_s:g}) returned False")
        value = lock.uuid.hex()
        self.locks[value] = lock
        # Valid from the grant of the winning lease (the recipe's last grant).
        return Lease(key=key, value=value, token=int(lock.revision), acquired_ns=time.monotonic_ns(),
                     valid_until_ns=valid_until(self.client.last_grant_ns, ttl_ms, int(lock.lease.ttl), self.drift_factor),
                     meta={"lease_id": lock.lease.id, "lock_key": lock.key, "ttl_ms": ttl_ms})

    def release(self, lease: Lease) -> bool:
        lock = self.locks.pop(lease.value, None)
        if lock is None:
            return False
        try:
            return bool(lock.release())
        finally:
            _revoke(self.client, lease.meta["lease_id"])  # the recipe leaves it alive

    def renew(self, lease: Lease) -> Lease:
        lock = self.locks.get(lease.value)
        if lock is None:
            raise LockLost(f"{lease.key} is not held by this client")
        start = time.monotonic_ns()
        out = lock.refresh()
        if not out or out[-1].TTL <= 0:
            raise LockLost(f"lease {lease.meta['lease_id']} of {lease.key} has expired")
        return replace(lease, valid_until_ns=valid_until(start, lease.meta["ttl_ms"], out[-1].TTL, self.drift_factor))

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
