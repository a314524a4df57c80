#!/usr/bin/env python3
"""pottery's Redlock (pottery.Redlock) on every server given, over the chaoslock client protocol.

A thin shell: each op calls the library once and reports what it said; it adds no check of its
own (clients/py-pottery/README.md says what each op maps to). One JSON request per line on
stdin, one reply per line on stdout, logs on stderr (docs/client-protocol.md). It runs in its
own venv (scripts/clients/py-pottery.sh) and imports nothing of chaoslock.
"""
import json
import logging
import sys
import time

import redis
from pottery import Redlock
from pottery.exceptions import PrimitiveError, QuorumIsImpossible
from redis.exceptions import RedisError


def lost_or_unsure(e: PrimitiveError) -> dict:
    """pottery's "unlocked lock" errors carry the masters' errors: with none, a majority answered
    that the lease is not ours (fail); with some, those masters may have done it (info)."""
    errors = getattr(e, "redis_errors", None) or []
    return {"type": "info" if errors or isinstance(e, QuorumIsImpossible) else "fail",
            "error": f"{type(e).__name__}: {e!r}"}


def main() -> None:
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    masters = []
    locks = {}  # lease value -> Redlock
    n = 0
    for line in sys.stdin:
        req = json.loads(line)
        op, rep = req.get("op"), {"type": "unsupported"}
        try:
            if op == "init":
                if req.get("lock", "mutex") != "mutex":
                    rep = {"type": "unsupported", "error": "pottery's Redlock is a mutex; it has no read-write lock or semaphore"}
                else:
                    opts = req.get("options") or {}
                    # Redlock asks each master to answer well within the TTL, so the application gives
                    # redis-py a short socket timeout (redis-py's default is none); the rest is default.
                    t = float(opts.get("socket_timeout_ms", 200)) / 1000
                    masters = [redis.Redis(host=s["host"], port=s["port"], socket_timeout=t, socket_connect_timeout=t)
                               for s in req["servers"]]
                    rep = {"type": "ok"}
            elif op == "acquire":
                lock = Redlock(key=req["key"], masters=masters, auto_release_time=req["ttl_ms"] / 1000)
                if lock.acquire(timeout=req["timeout_s"]):
                    n += 1
                    value = f"{id(lock):x}-{n}"  # pottery keeps its uuid private (_uuid): a value of our own
                    locks[value] = lock
                    # The validity pottery states: locked(), "how much longer we'll hold the lock", read
                    # from the masters' TTLs less drift and the time locked() took. No token: Redlock has none.
                    rep = {"type": "ok", "value": value, "token": None, "valid_ms": lock.locked() * 1000}
                else:
                    rep = {"type": "fail", "error": f"no quorum within {req['timeout_s']} s"}
            elif op in ("release", "renew", "held"):
                lock = locks.get(req["value"])
                if lock is None:
                    rep = {"type": "fail", "error": f"no lease {req['value']} taken by this client"}
                elif op == "held":
                    rep = {"type": "ok", "held": lock.locked() > 0}  # pottery's locked() asks the masters
                elif op == "renew":
                    lock.auto_release_time = req["ttl_ms"] / 1000  # extend() sets the TTL to auto_release_time
                    lock.extend()
                    rep = {"type": "ok", "valid_ms": lock.locked() * 1000}
                else:
                    locks.pop(req["value"], None)
                    lock.release()
                    rep = {"type": "ok"}
            elif op == "clock":
                rep = {"type": "ok", "now_ms": time.time() * 1000}
            elif op == "close":
                print(json.dumps({"id": req.get("id"), "type": "ok"}), flush=True)
                return
        except PrimitiveError as e:  # ExtendUnlockedLock, ReleaseUnlockedLock, TooManyExtensions, QuorumIsImpossible
            rep = lost_or_unsure(e)
        except RedisError as e:
            rep = {"type": "info", "error": f"{type(e).__name__}: {e}"}
        print(json.dumps({"id": req.get("id"), **rep}), flush=True)


if __name__ == "__main__":
    main()
