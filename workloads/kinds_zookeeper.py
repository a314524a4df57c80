"""ZooKeeper's read-write lock and semaphore, as kazoo ships them (`zookeeper-recipe --lock`).

`--lock rw`: kazoo.recipe.lock.ReadLock / WriteLock on /chaoslock/<key>. Both queue as
EPHEMERAL|SEQUENTIAL children of that node (`__rlock__` and `__lock__`); a reader waits
only for writers ahead of it, a writer for everyone ahead of it. Token: the czxid of our
node, read with one exists() after acquiring, as for the mutex recipe.

`--lock semaphore:N`: kazoo.recipe.lock.Semaphore(max_leases=N) on /chaoslock/<key>. A
contender takes the recipe's inner Lock on /chaoslock/<key>-__lock__, and while holding it
creates an EPHEMERAL lease node /chaoslock/<key>/<uuid> if fewer than N exist. No token:
N holders at once have no order a fence could use.

What holds, and why: every holder's node is ephemeral, so ZooKeeper frees its place when
the session expires, and a holder that was paused past its session timeout wakes still
believing it holds while a newcomer has its place: the same break the mutex recipe has
under pause-holder, for the same reason (scenario 3). While the session lives the server
keeps the node, however long the holder is paused.

As for the mutex recipe: LockTimeout or a False return is `fail`; other errors `info`; one
recipe object per (key, kind) per client; the session listener marks holds lost.
"""

from __future__ import annotations

import time
from typing import Any

from harness.core.contracts.client import Lease, unique_value
from harness.core.errors import NotAcquired

ROOT = "/chaoslock"


def _recipe(client: Any, key: str, mode: str | None, permits: int | None) -> Any:
    which = ("semaphore", permits) if permits is not None else (mode or "write", None)
    recipe = client.locks.get((key, which))
    if recipe is None:
        zk, path = client.s.zk, f"{ROOT}/{key}"
        if permits is not None:
            recipe = zk.Semaphore(path, "chaoslock", max_leases=permits)
        else:
            recipe = (zk.ReadLock if mode == "read" else zk.WriteLock)(path, "chaoslock")
        client.locks[(key, which)] = recipe
    return recipe


def acquire(client: Any, key: str, timeout_s: float, *, mode: str | None, permits: int | None, hold: Any) -> Lease:
    """One acquire of the kind: a Lease, NotAcquired (fail) or another error (info).
    `hold(path=...)` makes the record the client's session listener marks lost."""
    from kazoo.exceptions import LockTimeout

    recipe = _recipe(client, key, mode, permits)
    try:
        got = recipe.acquire(blocking=True, timeout=timeout_s)
    except LockTimeout as e:
        raise NotAcquired(str(e)) from None
    if not got:
        raise NotAcquired(f"kazoo {type(recipe).__name__}.acquire returned False (its retry deadline passed)")
    path = recipe.create_path if permits is not None else f"{recipe.path}/{recipe.node}"
    value = unique_value()
    client.s.holds[value] = hold(path=path)
    asked = time.monotonic_ns()
    token = None
    try:
        stat = client.s.call(client.s.zk.exists_async(path))
        if stat is None:
            raise ConnectionError(f"the recipe's node {path} vanished right after acquiring")
        token = None if permits is not None else stat.czxid
    except BaseException:
        client.s.holds.pop(value, None)
        try:
            recipe.release()
        except Exception:
            pass
        raise
    return Lease(key=key, value=value, token=token, acquired_ns=time.monotonic_ns(),
                 valid_until_ns=asked + int(client.s.session_ms * 1e6),
                 meta={"path": path, "mode": mode, "permits": permits, "session_timeout_ms": client.s.session_ms})


def release(client: Any, lease: Lease) -> bool:
    client.s.holds.pop(lease.value, None)
    recipe = _recipe(client, lease.key, lease.meta.get("mode"), lease.meta.get("permits"))
    if not recipe.is_acquired:
        return False
    return bool(recipe.release())
