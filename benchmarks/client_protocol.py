"""What the client protocol costs: acquire+release through a child process against the same
backend in process, on one real valkey server, and each reference client's start-up time.

    python benchmarks/client_protocol.py [--n 400]

Prints p50/p99 per acquire+release for the in-process `redis` backend and for the same
backend through the Python relay (clients/python-relay), with their ratio (same run, same
server), then the time from starting each installed reference client to its reply to init.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.cluster.assemble import make_cluster  # noqa: E402
from harness.cluster.provider import state_root  # noqa: E402
from harness.core.spec import TestSpec  # noqa: E402
from results.store import new_run_id  # noqa: E402
from workloads.external import ExternalClient  # noqa: E402
from workloads.redis_single import RedisSingleClient  # noqa: E402


def quantiles(xs: list[float]) -> tuple[float, float]:
    xs = sorted(xs)
    return xs[len(xs) // 2], xs[min(len(xs) - 1, int(len(xs) * 0.99))]


def cycles(client, n: int) -> list[float]:
    out = []
    for i in range(n):
        t = time.perf_counter()
        lease = client.acquire(f"bench-{i % 7}", 2000, 1.0)
        client.release(lease)
        out.append((time.perf_counter() - t) * 1000)
    return out


def startup(command: str, servers: str, nodes) -> float:
    c = ExternalClient({"command": command, "servers": servers}, None)
    t = time.perf_counter()
    c.open(nodes)
    took = (time.perf_counter() - t) * 1000
    c.close()
    return took


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=400)
    n = ap.parse_args().n
    clusters = {}
    try:
        for kind, count in (("valkey", 1), ("valkey", 5), ("etcd", 3), ("zookeeper", 3)):
            spec = TestSpec(backend="external", concurrency=1, options={"command": "x", "servers": f"{kind}:{count}"})
            rid = new_run_id()
            c = make_cluster(spec.validate(), rid, state_root() / rid / "logs", [])
            c.up()
            clusters[(kind, count)] = c
        nodes = [x for x in clusters[("valkey", 1)].nodes if x.role == "lock"]
        inproc = RedisSingleClient({}, None)
        inproc.open(nodes)
        relay = ExternalClient({"command": f"{sys.executable} {ROOT / 'clients/python-relay/relay.py'} --backend redis",
                                "servers": "valkey:1"}, None)
        relay.open(nodes)
        cycles(inproc, 50), cycles(relay, 50)  # warm up
        a, b = quantiles(cycles(inproc, n)), quantiles(cycles(relay, n))
        inproc.close(), relay.close()
        print(f"acquire+release, {n} each, one valkey server, sequential:")
        print(f"  in process (redis backend)   p50 {a[0]:.3f} ms  p99 {a[1]:.3f} ms")
        print(f"  through the protocol (relay) p50 {b[0]:.3f} ms  p99 {b[1]:.3f} ms")
        print(f"  ratio protocol / in process  p50 {b[0] / a[0]:.2f}x  p99 {b[1] / a[1]:.2f}x")
        print("start-up, process start to its reply to init (includes connecting to the servers):")
        refs = [("python relay (redis)", f"{sys.executable} {ROOT / 'clients/python-relay/relay.py'} --backend redis",
                 ("valkey", 1)),
                ("example client (python)", f"{sys.executable} {ROOT / 'clients/example-redis/client.py'}", ("valkey", 1)),
                ("node redlock", f"node {ROOT / 'clients/node-redlock/client.js'}", ("valkey", 5)),
                ("go etcd", str(ROOT / "clients/go-etcd/bin/go-etcd"), ("etcd", 3)),
                ("java curator", str(ROOT / "clients/java-curator/bin/java-curator"), ("zookeeper", 3))]
        for name, command, key in refs:
            exe = command.split()[0]
            if shutil.which(exe) is None and not Path(exe).exists():
                print(f"  {name:26} not installed")
                continue
            lock = [x for x in clusters[key].nodes if x.role == "lock"]
            times = sorted(startup(command, f"{key[0]}:{key[1]}", lock) for _ in range(3))
            print(f"  {name:26} {times[1]:.0f} ms (median of 3)")
    finally:
        for c in clusters.values():
            c.down()


if __name__ == "__main__":
    from benchmarks.stops import main_of

    main_of(main, "client_protocol")
