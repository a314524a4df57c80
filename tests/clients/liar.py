#!/usr/bin/env python3
"""clients/example-redis/client.py with a bug put in, on purpose: the cause checker must call
what it does UNEXPLAINED, with no fault at all. MODE:
  long-validity  asks the server for a quarter of the TTL (it still claims 0.9 TTL of validity)
  skip-nx        every third acquire is a plain SET: it takes the lock from whoever holds it
"""
import runpy
import sys
from pathlib import Path

import redis

mode = sys.argv[1]
honest_set = redis.Redis.set
calls = 0


def lying_set(self, name, value, nx=False, px=None, **kw):
    global calls
    if px is not None:  # the acquire's SET (the example's only one with a TTL)
        calls += 1
        if mode == "long-validity":
            px = max(1, px // 4)
        elif mode == "skip-nx" and calls % 3 == 0:
            nx = False
    return honest_set(self, name, value, nx=nx, px=px, **kw)


redis.Redis.set = lying_set
runpy.run_path(str(Path(__file__).resolve().parents[2] / "clients/example-redis/client.py"), run_name="__main__")
