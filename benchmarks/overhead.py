"""What recording costs: chaoslock's cycles per second against a bare redis-py loop doing
the same four commands (acquire, read, write, release) from the same namespace, on the
same servers, measured in the same run.

    python benchmarks/overhead.py [--seconds 8] [--repeat 3]

One worker on `redis`, no hold, no fault. The bare loop and chaoslock run in turn
(bare, chaoslock, bare, ...) so drift on the machine hits both; each side's rate is the
median of its repeats, and the line that matters is `overhead`: how much of the bare
loop's rate recording costs (the target is under 10 %).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.cluster.assemble import make_cluster  # noqa: E402
from harness.history import read_history  # noqa: E402
from harness.runner import run  # noqa: E402
from harness.spec import TestSpec  # noqa: E402
from results.store import new_run_id  # noqa: E402

# The bare loop: the backend's own scripts, a fresh value per acquire, nothing recorded.
BARE = r"""
import sys, time, uuid
sys.path.insert(0, {root!r})
from harness.cluster.netns import enter_netns
if {netns!r}:
    enter_netns({netns!r})
import redis
from workloads.redis_single import ACQUIRE
from workloads.redis_common import RELEASE
from workloads.resource import READ, WRITE
lock = redis.Redis(host={lock_host!r}, port={lock_port}, socket_timeout=1)
store = redis.Redis(host={store_host!r}, port={store_port}, socket_timeout=1)
keys = ("bare-lock:counter:value", "bare-lock:counter:max-token")
n, end = 0, time.monotonic() + {seconds}
t0 = time.monotonic()
while time.monotonic() < end:
    v = uuid.uuid4().hex
    token = lock.eval(ACQUIRE, 2, "bare-lock", "bare-lock:fence", v, 2000)
    ok, value = store.eval(READ, 2, *keys, str(token))
    store.eval(WRITE, 2, *keys, str(token), value + 1)
    lock.eval(RELEASE, 1, "bare-lock", v)
    n += 1
print(n / (time.monotonic() - t0))
"""


def bare(seconds: float, tmp: Path) -> float:
    """Cycles/s of the bare loop, in client c1's namespace of a cluster of its own."""
    spec = TestSpec(backend="redis", concurrency=1)
    cluster = make_cluster(spec, new_run_id(), tmp, [])
    cluster.up()
    try:
        place = cluster.client(0)
        lock = place.nodes[0]
        store = next(n for n in cluster.nodes if n.role == "store")
        code = BARE.format(root=str(ROOT), netns=place.netns or "", lock_host=lock.host, lock_port=lock.port,
                           store_host=store.host, store_port=store.port, seconds=seconds)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        return float(out.stdout.strip())
    finally:
        cluster.down()


def recorded(seconds: float, tmp: Path) -> float:
    """Cycles/s chaoslock records: released cycles between the first invoke and the last release."""
    spec = TestSpec(backend="redis", concurrency=1, hold_max_ms=0, time_limit=seconds, recovery=0.0,
                    store=str(tmp / "store"), command="benchmarks/overhead.py")
    out = run(spec, progress=False)
    ops = [o for o in read_history(out.run_dir / "history.jsonl") if isinstance(o.process, int)]
    releases = [o for o in ops if o.f == "release" and o.type != "invoke"]
    span = (releases[-1].time_ns - ops[0].time_ns) / 1e9
    return len(releases) / span


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=8.0, help="seconds each side runs, per repeat")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    got: dict[str, list[float]] = {"bare": [], "chaoslock": []}
    with tempfile.TemporaryDirectory(prefix="chaoslock-overhead-") as tmp:
        for i in range(args.repeat):
            for side, fn in (("bare", bare), ("chaoslock", recorded)):
                t = time.monotonic()
                rate = fn(args.seconds, Path(tmp))
                got[side].append(rate)
                print(f"  repeat {i + 1} {side:9} {rate:8.0f} cycles/s ({time.monotonic() - t:.1f} s)", flush=True)
    b, c = statistics.median(got["bare"]), statistics.median(got["chaoslock"])
    print(f"bare redis-py loop  {b:8.0f} cycles/s (median of {args.repeat})")
    print(f"chaoslock recorded  {c:8.0f} cycles/s (median of {args.repeat})")
    print(f"ratio {c / b:.3f}  overhead {100 * (1 - c / b):.1f} % (target: under 10 %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
