#!/usr/bin/env python3
"""The smallest useful lock client over the chaoslock protocol: SET NX PX on one Redis.

    chaos client-check 'python3 clients/example-redis/client.py' --servers valkey:1
    chaos run --client 'python3 clients/example-redis/client.py' --servers valkey:1 -n pause-holder
"""
import json, sys, time, uuid
import redis

RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"
r = None
for line in sys.stdin:
    req = json.loads(line)
    op, rep = req["op"], {"type": "unsupported"}
    try:
        if op == "init":
            s = req["servers"][0]
            r, rep = redis.Redis(host=s["host"], port=s["port"], socket_timeout=0.5), {"type": "ok"}
        elif op == "acquire":
            value, deadline = uuid.uuid4().hex, time.monotonic() + req["timeout_s"]
            while True:
                sent = time.monotonic()  # the key lives ttl_ms from no earlier than this
                if r.set(req["key"], value, nx=True, px=req["ttl_ms"]):
                    break
                if time.monotonic() > deadline:
                    raise LookupError("the lock is taken")
                time.sleep(0.05)
            token = r.incr(req["key"] + ":fence")
            valid_ms = req["ttl_ms"] * 0.9 - (time.monotonic() - sent) * 1000  # from this reply
            if valid_ms <= 0:  # the acquire took longer than the lease: it is gone already
                r.eval(RELEASE, 1, req["key"], value)
                raise LookupError("acquired too late: the lease had expired")
            rep = {"type": "ok", "value": value, "token": token, "valid_ms": valid_ms}
        elif op == "release":
            rep = {"type": "ok" if r.eval(RELEASE, 1, req["key"], req["value"]) else "fail"}
        elif op == "close":
            print(json.dumps({"id": req["id"], "type": "ok"}), flush=True)
            break
    except LookupError as e:
        rep = {"type": "fail", "error": str(e)}
    except Exception as e:  # a timeout: the SET may have happened
        rep = {"type": "info", "error": repr(e)}
    print(json.dumps({"id": req["id"], **rep}), flush=True)
