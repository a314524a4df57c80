#!/usr/bin/env python3
"""A lock client that works (SET NX PX on one Redis, like clients/example-redis) but is
hostile in one way per MODE, to prove the harness contains it (issue 25):

  flood-stderr           writes to stderr as fast as it can, all the time
  close-stdout           closes its stdout before it answers init, then keeps reading
  close-stdout-later     answers init, then closes its stdout and keeps reading
  close-stdin-later      answers init, then closes its stdin and sleeps
  long-line              answers acquire with a 20 MiB line that never ends
  deep-json              answers acquire with a JSON value nested 100,000 deep
  huge-numbers           answers acquire with valid_ms 1e308 and a 40-digit token
  hide SECONDS [setsid]  forks a grandchild that drops its environment, ignores SIGTERM
                         (and with setsid leaves the process group) and runs `sleep SECONDS`
"""

import json
import os
import signal
import sys
import threading
import time
import uuid

import redis

mode = sys.argv[1]
RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"


def hide(seconds: str, setsid: bool) -> None:
    if os.fork() == 0:
        if setsid:
            os.setsid()
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        os.execve("/bin/sleep", ["sleep", seconds], {})


def flood() -> None:
    chunk = ("x" * 1023 + "\n").encode()
    while True:
        try:
            os.write(2, chunk)
        except OSError:
            time.sleep(0.01)


def say(rep: dict) -> None:
    try:
        os.write(1, (json.dumps(rep) + "\n").encode())
    except OSError:  # its stdout is closed (close-stdout*): it goes on regardless
        pass


if mode == "hide":
    hide(sys.argv[2], "setsid" in sys.argv[3:])
elif mode == "flood-stderr":
    threading.Thread(target=flood, daemon=True).start()
elif mode == "close-stdout":
    os.close(1)

r = None
for line in sys.stdin:
    req = json.loads(line)
    op, rep = req["op"], {"type": "unsupported"}
    if op == "init":
        s = req["servers"][0]
        r = redis.Redis(host=s["host"], port=s["port"], socket_timeout=0.5)
        say({"id": req["id"], "type": "ok"})
        if mode == "close-stdout-later":
            os.close(1)
        elif mode == "close-stdin-later":
            os.close(0)
            time.sleep(3600)
        continue
    if op == "acquire" and mode == "long-line":
        os.write(1, ('{"id": %d, "type": "ok", "value": "' % req["id"] + "v" * (20 << 20)).encode())
        time.sleep(3600)
    if op == "acquire" and mode == "deep-json":
        os.write(1, ('{"id": %d, "type": "ok", "value": ' % req["id"] + "[" * 100_000 + "]" * 100_000 + "}\n").encode())
        continue
    try:
        if op == "acquire":
            value, deadline = uuid.uuid4().hex, time.monotonic() + req["timeout_s"]
            while not r.set(req["key"], value, nx=True, px=req["ttl_ms"]):
                if time.monotonic() > deadline:
                    raise LookupError("the lock is taken")
                time.sleep(0.05)
            rep = {"type": "ok", "value": value, "token": r.incr(req["key"] + ":fence"), "valid_ms": req["ttl_ms"] * 0.9}
            if mode == "huge-numbers":
                rep.update(valid_ms=1e308, token=10 ** 40)
        elif op == "release":
            rep = {"type": "ok" if r.eval(RELEASE, 1, req["key"], req["value"]) else "fail"}
        elif op == "close":
            say({"id": req["id"], "type": "ok"})
            break
    except LookupError as e:
        rep = {"type": "fail", "error": str(e)}
    except Exception as e:  # a timeout: the SET may have happened
        rep = {"type": "info", "error": repr(e)}
    say({"id": req["id"], **rep})
