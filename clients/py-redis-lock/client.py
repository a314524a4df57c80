#!/usr/bin/env python3
"""The python-redis-lock package's lock (redis_lock.Lock) over the chaoslock client protocol.

A thin shell: each op calls the library once and reports what it said; it adds no check of its
own (clients/py-redis-lock/README.md says what each op maps to). One JSON request per line on
stdin, one reply per line on stdout, logs on stderr (docs/client-protocol.md). It runs in its
own venv (scripts/clients/py-redis-lock.sh) and imports nothing of chaoslock.
"""
import json
import math
import sys
import time

import redis
import redis_lock
from redis.exceptions import RedisError


def main() -> None:
    r = None
    locks = {}  # lease value (the Lock's id) -> redis_lock.Lock
    for line in sys.stdin:
        req = json.loads(line)
        op, rep = req.get("op"), {"type": "unsupported"}
        try:
            if op == "init":
                if req.get("lock", "mutex") != "mutex":
                    rep = {"type": "unsupported", "error": "python-redis-lock's Lock is a mutex; it has no read-write lock or semaphore"}
                else:
                    s, opts = req["servers"][0], req.get("options") or {}
                    # The waiter BLPOPs for up to the acquire timeout, so the socket timeout must be longer
                    # (redis-py's default is none: a lost reply would hang forever); the rest is default.
                    t = float(opts.get("socket_timeout_ms", 3000)) / 1000
                    r = redis.StrictRedis(host=s["host"], port=s["port"], socket_timeout=t, socket_connect_timeout=0.5)
                    rep = {"type": "ok"}
            elif op == "acquire":
                # expire is whole seconds (the library int()s it): the TTL rounded up, never shortened.
                lock = redis_lock.Lock(r, req["key"], expire=math.ceil(req["ttl_ms"] / 1000))
                # timeout is whole seconds too ("an integer value"), and 4.0.1 int()s a fraction to 0, which
                # it takes as no timeout at all: round it up, as the TTL.
                if lock.acquire(blocking=True, timeout=math.ceil(req["timeout_s"])):
                    locks[lock.id] = lock
                    # No token (the design has none) and no valid_ms: the library states no validity.
                    rep = {"type": "ok", "value": lock.id, "token": None}
                else:
                    rep = {"type": "fail", "error": f"not acquired within {req['timeout_s']} s"}
            elif op in ("release", "renew", "held"):
                lock = locks.get(req["value"])
                if lock is None:
                    rep = {"type": "fail", "error": f"no lease {req['value']} taken by this client"}
                elif op == "held":
                    # What the library's own Lock._held computes: GET the key, compare with our id.
                    rep = {"type": "ok", "held": lock.get_owner_id() == lock.id}
                elif op == "renew":
                    lock.extend(expire=math.ceil(req["ttl_ms"] / 1000))
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
        except (redis_lock.NotAcquired, redis_lock.NotExpirable) as e:  # the script said: not ours (or no TTL)
            if op == "release":
                locks.pop(req["value"], None)
            rep = {"type": "fail", "error": f"{type(e).__name__}: {e}"}
        except (redis_lock.TimeoutTooLarge, redis_lock.InvalidTimeout, redis_lock.AlreadyAcquired) as e:
            rep = {"type": "fail", "error": f"{type(e).__name__}: {e}"}  # refused before asking Redis
        except (RedisError, RuntimeError) as e:  # a timeout, a lost connection, an unknown script code
            rep = {"type": "info", "error": f"{type(e).__name__}: {e}"}
        print(json.dumps({"id": req.get("id"), **rep}), flush=True)


if __name__ == "__main__":
    main()
