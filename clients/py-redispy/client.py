#!/usr/bin/env python3
"""redis-py's own lock, `Redis.lock(...)` (redis.lock.Lock), over the chaoslock client protocol.

A thin shell: each op calls the library once and reports what it said; it adds no check of its
own (clients/py-redispy/README.md says what each op maps to). One JSON request per line on
stdin, one reply per line on stdout, logs on stderr (docs/client-protocol.md). It runs in its
own venv (scripts/clients/py-redispy.sh) and imports nothing of chaoslock.
"""
import json
import sys
import time

import redis
from redis.exceptions import LockError, RedisError


def main() -> None:
    r = None
    locks = {}  # lease value (the Lock's own token) -> redis.lock.Lock
    for line in sys.stdin:
        req = json.loads(line)
        op, rep = req.get("op"), {"type": "unsupported"}
        try:
            if op == "init":
                if req.get("lock", "mutex") != "mutex":
                    rep = {"type": "unsupported", "error": "redis-py's Lock is a mutex; it has no read-write lock or semaphore"}
                else:
                    s, opts = req["servers"][0], req.get("options") or {}
                    # The application's socket timeouts (redis-py's default is none: a lost reply would
                    # hang forever). Everything else is redis-py's default, its 10 retries included.
                    t = float(opts.get("socket_timeout_ms", 500)) / 1000
                    r = redis.Redis(host=s["host"], port=s["port"], socket_timeout=t, socket_connect_timeout=t)
                    rep = {"type": "ok"}
            elif op == "acquire":
                lock = r.lock(req["key"], timeout=req["ttl_ms"] / 1000, blocking_timeout=req["timeout_s"])
                if lock.acquire():
                    value = lock.local.token.decode()
                    locks[value] = lock
                    # No token (the design has none) and no valid_ms: redis-py states no validity.
                    rep = {"type": "ok", "value": value, "token": None}
                else:
                    rep = {"type": "fail", "error": f"not acquired within {req['timeout_s']} s"}
            elif op in ("release", "renew", "held"):
                lock = locks.get(req["value"])
                if lock is None:
                    rep = {"type": "fail", "error": f"no lease {req['value']} taken by this client"}
                elif op == "held":
                    rep = {"type": "ok", "held": bool(lock.owned())}  # redis-py's owned() GETs the key
                elif op == "renew":
                    lock.extend(req["ttl_ms"] / 1000, replace_ttl=True)
                    rep = {"type": "ok"}
                else:
                    lock.release()
                    locks.pop(req["value"], None)
                    rep = {"type": "ok"}
            elif op == "clock":
                rep = {"type": "ok", "now_ms": time.time() * 1000}
            elif op == "close":
                print(json.dumps({"id": req.get("id"), "type": "ok"}), flush=True)
                return
        except LockError as e:  # LockNotOwnedError included: the library says it was not (or no longer) ours
            if op == "release":
                locks.pop(req["value"], None)
            rep = {"type": "fail", "error": f"{type(e).__name__}: {e}"}
        except RedisError as e:  # a timeout or a lost connection: it may have happened
            rep = {"type": "info", "error": f"{type(e).__name__}: {e}"}
        print(json.dumps({"id": req.get("id"), **rep}), flush=True)


if __name__ == "__main__":
    main()
