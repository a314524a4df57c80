#!/usr/bin/env python3
"""A lock client with a bug, on purpose, over the client protocol (SET NX PX on one valkey):
the cause checker must call what it does UNEXPLAINED, with no fault at all. MODE:
  long-validity  asks the server for a quarter of the TTL but tells the harness the whole TTL
  skip-nx        every third acquire is a plain SET: it takes the lock from whoever holds it
"""
import json
import sys
import time
import uuid

import redis

mode = sys.argv[1]
RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"
r, n = None, 0
for line in sys.stdin:
    req = json.loads(line)
    op, rep = req["op"], {"type": "unsupported"}
    try:
        if op == "init":
            s = req["servers"][0]
            r, rep = redis.Redis(host=s["host"], port=s["port"], socket_timeout=0.5), {"type": "ok"}
        elif op == "acquire":
            n += 1
            value, deadline, ttl = uuid.uuid4().hex, time.monotonic() + req["timeout_s"], req["ttl_ms"]
            px = ttl // 4 if mode == "long-validity" else ttl
            nx = not (mode == "skip-nx" and n % 3 == 0)
            while not r.set(req["key"], value, nx=nx, px=px):
                if time.monotonic() > deadline:
                    raise LookupError("the lock is taken")
                time.sleep(0.01)
            rep = {"type": "ok", "value": value, "token": None, "valid_ms": ttl * 0.9}
        elif op == "release":
            rep = {"type": "ok" if r.eval(RELEASE, 1, req["key"], req["value"]) else "fail"}
        elif op == "close":
            print(json.dumps({"id": req["id"], "type": "ok"}), flush=True)
            break
    except LookupError as e:
        rep = {"type": "fail", "error": str(e)}
    except Exception as e:
        rep = {"type": "info", "error": repr(e)}
    print(json.dumps({"id": req["id"], **rep}), flush=True)
