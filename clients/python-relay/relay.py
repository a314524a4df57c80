#!/usr/bin/env python3
"""A lock client over the chaoslock client protocol: serves any built-in backend.

    chaos run --client 'python3 clients/python-relay/relay.py --backend redis' --servers valkey:1

It is the protocol's own test (the same scenario through the relay and in process must
reach the same verdict) and an example of a client in a few dozen lines: read one JSON
request per line on stdin, answer one JSON reply per line on stdout, log on stderr.
"""

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the chaoslock checkout

from harness.core import plugins  # noqa: E402
from harness.core.contracts.cluster import Node  # noqa: E402
from harness.core.errors import LockLost, NotAcquired  # noqa: E402
from harness.core.contracts.client import StillHeld  # noqa: E402
from harness.core.kinds import kinds_of, parse  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", required=True, help="a built-in backend (chaos list)")
    backend = ap.parse_args().backend
    client, leases = None, {}
    for line in sys.stdin:
        req = json.loads(line)
        op, rid = req["op"], req["id"]
        try:
            if op == "init" and parse(req.get("lock") or "mutex").name not in kinds_of(plugins.backend_class(backend)):
                rep = {"type": "unsupported", "error": f"backend {backend} has no {req['lock']} lock"}
            elif op == "init":
                nodes = [Node(name=s["name"], kind=s["kind"], role="lock", host=s["host"], port=s["port"])
                         for s in req["servers"]]
                client = plugins.backend_class(backend)(req.get("options") or {}, None)
                client.open(nodes)
                rep = {"type": "ok"}
            elif op == "acquire":
                kind = {k: req[k] for k in ("mode", "permits") if req.get(k) is not None}  # --lock rw, semaphore:N
                lease = client.acquire(req["key"], req["ttl_ms"], req["timeout_s"], **kind)
                leases[lease.value] = lease
                rep = {"type": "ok", "value": lease.value, "token": lease.token,
                       "valid_ms": (lease.valid_until_ns - time.monotonic_ns()) / 1e6}
            elif req.get("value") not in leases and op in ("release", "renew", "held"):
                rep = {"type": "fail", "error": f"no lease {req.get('value')!r} held by this client"}
            elif op == "release":
                rep = {"type": "ok"} if client.release(leases.pop(req["value"])) else {"type": "fail", "error": "not held"}
            elif op == "renew":
                lease = leases[req["value"]] = client.renew(leases[req["value"]])
                rep = {"type": "ok", "valid_ms": (lease.valid_until_ns - time.monotonic_ns()) / 1e6}
            elif op == "held":
                rep = ({"type": "ok", "held": client.still_held(leases[req["value"]])}
                       if isinstance(client, StillHeld) else {"type": "unsupported"})
            elif op == "clock":
                rep = {"type": "ok", "now_ms": time.time() * 1000}
            elif op == "close":
                client.close()
                print(json.dumps({"id": rid, "type": "ok"}), flush=True)
                return
            else:
                rep = {"type": "unsupported"}
        except (NotAcquired, LockLost) as e:
            rep = {"type": "fail", "error": str(e)}
        except Exception as e:  # may have happened
            rep = {"type": "info", "error": f"{type(e).__name__}: {e}"}
        print(json.dumps({"id": rid, **rep}), flush=True)


if __name__ == "__main__":
    main()
