"""A counting semaphore on etcd (`etcd --lock semaphore:N`): a lease per holder, keys
under a prefix, at most N granted.

The design of etcd's own concurrency recipes (clientv3/concurrency's Mutex, with N places
instead of one): a contender grants itself a lease, puts /chaoslock-sem/<key>/<value>
under that lease, and reads the prefix. It holds a permit while its key is among the
first N by create revision; otherwise it watches the prefix, from the read's revision + 1,
for a DELETE (a holder released, or its lease expired) and reads again, until its acquire
timeout, when it deletes its key, revokes its lease and fails. Waiting keys keep their
place: the permits go in create-revision order, a queue. The lease is refreshed while it
waits (as the mutex does) and by the keepalive thread while it holds.

What breaks, by design: a permit lives as long as its lease. A holder paused past the
lease's TTL stops its keepalives; etcd deletes its key, the next contender in line holds,
and the paused holder wakes believing it holds: N + 1 holders (pause-holder). Lease TTLs
run on the leader's monotonic clock, so clock-skew changes nothing.

Outcomes: a failed grant is `fail` (no key can exist without it); a put or read that
errors is `info` (the key may be there): we revoke the lease, which deletes the key if
it was written, and raise. No token: N holders at once have no order a fence could use.
"""

from __future__ import annotations

import queue
import time
from typing import Any

from harness.core.contracts.client import Lease, unique_value
from harness.core.errors import NotAcquired

PREFIX = "/chaoslock-sem"


def _prefix(key: str) -> str:
    return f"{PREFIX}/{key}/"


def acquire(client: Any, key: str, ttl_ms: int, timeout_s: float, permits: int, *,
            lease_seconds: Any, revoke: Any) -> Lease:
    """A permit, NotAcquired, or an ambiguous error (our key then revoked with its lease).
    `lease_seconds(ttl_ms)` and `revoke(client, id)` are the mutex's (workloads/etcd.py)."""
    c = client.client
    deadline = time.monotonic() + timeout_s
    value = unique_value()
    mine = _prefix(key) + value
    granted_at = time.monotonic_ns()
    try:
        lease = c.lease(lease_seconds(ttl_ms))
    except Exception as e:
        raise NotAcquired(f"lease grant failed: {type(e).__name__}: {e}") from None
    granted = int(lease.ttl)
    reads = 0
    try:
        c.put(mine, value, lease=lease.id)
        while True:
            if reads and time.monotonic_ns() - granted_at > granted * 1e9 / 3:
                t = time.monotonic_ns()
                if client._refresh(lease.id) <= 0:
                    raise NotAcquired("our lease expired while we waited for a permit")
                granted_at = t
            reads += 1
            resp = c.get_prefix_response(_prefix(key))
            order = sorted(resp.kvs, key=lambda kv: kv.create_revision)
            place = next((i for i, kv in enumerate(order) if kv.key.decode() == mine), None)
            if place is None:
                raise NotAcquired("our key is gone: the lease expired while we waited")
            if place < permits:
                out = Lease(key=key, value=value, token=None, acquired_ns=time.monotonic_ns(),
                            valid_until_ns=client._valid(granted_at, ttl_ms, granted),
                            meta={"lease_id": lease.id, "ttl_ms": ttl_ms, "granted_s": granted, "permits": permits,
                                  "place": place, "reads": reads, "endpoint": c._current_endpoint_label})
                client._hold(out, ttl_ms, granted)
                return out
            if time.monotonic() >= deadline:
                raise NotAcquired(f"{place} contender(s) ahead of us for {permits} permit(s) after {timeout_s:g}s")
            _wait_delete(client, _prefix(key), int(resp.header.revision) + 1, deadline)
    except NotAcquired:
        _give_up(c, mine, lease.id, revoke)
        raise
    except BaseException:
        revoke(c, lease.id)  # deletes our key if the ambiguous put did write it
        raise


def _give_up(c: Any, mine: str, lease_id: int, revoke: Any) -> None:
    try:
        c.delete(mine)
    except Exception:
        pass  # the revoke below (or the lease's TTL) takes it
    revoke(c, lease_id)


def _wait_delete(client: Any, prefix: str, start_revision: int, deadline: float) -> None:
    """Block until a key under `prefix` is deleted, the watch breaks, or a recheck is due."""
    from pyetcd import events

    q: queue.Queue = queue.Queue()
    try:
        wid = client.client.add_watch_prefix_callback(prefix, q.put, start_revision=start_revision)
    except Exception:
        time.sleep(max(0.0, min(0.05, deadline - time.monotonic())))
        return
    try:
        until = min(deadline, time.monotonic() + client.watch_recheck)
        while (left := until - time.monotonic()) > 0:
            try:
                r = q.get(timeout=left)
            except queue.Empty:
                return
            if isinstance(r, Exception) or any(isinstance(e, events.DeleteEvent) for e in r.events):
                return
    finally:
        try:
            client.client.cancel_watch(wid)
        except Exception:
            pass


def release(client: Any, lease: Lease, revoke: Any) -> bool:
    """Delete our key (True if it was still there) and revoke our lease."""
    c = client.client
    client.renewals.unhold(lease)
    try:
        resp = c.delete(_prefix(lease.key) + lease.value, return_response=True)
    finally:
        revoke(c, lease.meta["lease_id"])
    return int(resp.deleted) > 0
