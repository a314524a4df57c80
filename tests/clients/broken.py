#!/usr/bin/env python3
"""A lock client that breaks the protocol on purpose, one way per MODE, after a correct
init: the harness must say what went wrong and restart it, never crash. MODE: badjson,
hang, exit, wrongid, nostart, badtoken. Its `clock` is always right (its wall clock)."""

import json
import sys
import time

mode = sys.argv[1]
if mode == "nostart":
    print("boom: cannot reach the configuration service", file=sys.stderr, flush=True)
    sys.exit(3)
for line in sys.stdin:
    req = json.loads(line)
    if req["op"] == "init":
        print(json.dumps({"id": req["id"], "type": "ok"}), flush=True)
    elif req["op"] == "clock":
        print(json.dumps({"id": req["id"], "type": "ok", "now_ms": time.time() * 1000}), flush=True)
    elif req["op"] == "acquire":
        if mode == "badjson":
            print("this is not json", flush=True)
        elif mode == "hang":
            time.sleep(3600)
        elif mode == "exit":
            sys.exit(7)
        elif mode == "wrongid":
            print(json.dumps({"id": req["id"] + 100, "type": "ok", "value": "v", "token": 1}), flush=True)
        elif mode == "badtoken":
            print(json.dumps({"id": req["id"], "type": "ok", "value": "v", "token": "seven"}), flush=True)
    else:
        print(json.dumps({"id": req["id"], "type": "unsupported"}), flush=True)
