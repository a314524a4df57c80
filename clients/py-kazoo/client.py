#!/usr/bin/env python3
"""kazoo's lock recipes over the chaoslock client protocol: Lock (the mutex), ReadLock and
WriteLock (`--lock rw`), Semaphore(max_leases=N) (`--lock semaphore:N`), on one KazooClient.

A thin shell: each op calls the library once and reports what it said; it adds no check of its
own (clients/py-kazoo/README.md says what each op maps to). One JSON request per line on stdin,
one reply per line on stdout, logs on stderr (docs/client-protocol.md). It runs in its own venv
(scripts/clients/py-kazoo.sh) and imports nothing of chaoslock.
"""
import json
import logging
import sys
import threading
import time

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, LockTimeout

ROOT = "/chaos/"


class Session:
    """A connection state listener, as Curator's ConnectionStateListener: counts the SUSPENDED
    and LOST states kazoo reports. A lease is believed held while none came since its acquire began."""

    def __init__(self) -> None:
        self.losses = 0
        self._mu = threading.Lock()

    def __call__(self, state) -> None:  # kazoo calls listeners on its own thread
        if state in (KazooState.SUSPENDED, KazooState.LOST):
            with self._mu:
                self.losses += 1
            print(f"py-kazoo: connection state {state}", file=sys.stderr, flush=True)


def recipe(zk: KazooClient, kind: str, req: dict):
    """The kazoo recipe for this acquire, and whether its node name carries a sequence number."""
    path = ROOT + req["key"]
    if kind == "rw":
        return (zk.ReadLock(path) if req.get("mode") == "read" else zk.WriteLock(path)), True
    if kind.startswith("semaphore:"):
        return zk.Semaphore(path, max_leases=int(req.get("permits") or kind.split(":", 1)[1])), False
    return zk.Lock(path), True


def main() -> None:
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    zk, kind, session = None, "mutex", Session()
    leases = {}  # lease value -> (recipe object, session.losses when its acquire began)
    for line in sys.stdin:
        req = json.loads(line)
        op, rep = req.get("op"), {"type": "unsupported"}
        try:
            if op == "init":
                kind, opts = req.get("lock", "mutex"), req.get("options") or {}
                if kind not in ("mutex", "rw") and not kind.startswith("semaphore:"):
                    rep = {"type": "unsupported", "error": f"kazoo has no lock kind {kind!r}"}
                else:
                    # The session timeout is the application's to choose (kazoo's default is 10 s);
                    # -o session_timeout_ms tells it to the harness and to this client alike.
                    timeout = float(opts.get("session_timeout_ms", 3000)) / 1000
                    zk = KazooClient(hosts=",".join(f"{s['host']}:{s['port']}" for s in req["servers"]), timeout=timeout)
                    zk.add_listener(session)
                    zk.start(timeout=15)
                    rep = {"type": "ok"}
            elif op == "acquire":
                lock, sequential = recipe(zk, kind, req)
                began = session.losses
                try:
                    got = lock.acquire(blocking=True, timeout=req["timeout_s"])
                except LockTimeout as e:  # kazoo gave up waiting (and deleted its node, best effort)
                    got, why = False, f"LockTimeout: {e}"
                else:
                    why = f"not acquired within {req['timeout_s']} s"
                if got:
                    if sequential:  # "<uuid>__lock__0000000042": the sequence number ZooKeeper gave the node
                        value, token = lock.node, int(lock.node[-10:])
                    else:  # a Semaphore's lease node is "<path>/<uuid>", no sequence
                        value, token = lock.create_path.rsplit("/", 1)[1], None
                    leases[value] = (lock, began)
                    # No valid_ms: kazoo states no validity (the lease lasts as long as the session).
                    rep = {"type": "ok", "value": value, "token": token}
                else:
                    rep = {"type": "fail", "error": why}
            elif op in ("release", "held"):
                lock, began = leases.get(req["value"], (None, None))
                if lock is None:
                    rep = {"type": "fail", "error": f"no lease {req['value']} taken by this client"}
                elif op == "held":
                    rep = {"type": "ok", "held": session.losses == began}
                else:
                    released = lock.release()  # False: kazoo says it did not hold it
                    leases.pop(req["value"], None)
                    rep = {"type": "ok"} if released else {"type": "fail", "error": "kazoo: not acquired"}
            elif op == "clock":
                rep = {"type": "ok", "now_ms": time.time() * 1000}
            elif op == "close":
                if zk is not None:
                    zk.stop()
                    zk.close()
                print(json.dumps({"id": req.get("id"), "type": "ok"}), flush=True)
                return
        except KazooException as e:  # connection loss, session expiry, retries exhausted: it may have happened
            rep = {"type": "info", "error": f"{type(e).__name__}: {e}"}
        except Exception as e:  # kazoo's handler raises its own timeout types (e.g. at start)
            rep = {"type": "info", "error": f"{type(e).__name__}: {e}"}
        print(json.dumps({"id": req.get("id"), **rep}), flush=True)


if __name__ == "__main__":
    main()
