"""What recording costs: chaoslock's cycles per second against a bare redis-py loop doing
the same four commands (acquire, read, write, release) from the same namespace, on the
same servers, measured in the same run.

    python benchmarks/overhead.py [--seconds 8] [--repeat 3]

One worker on `redis`, no hold, no fault. The bare loop and chaoslock run in turn
(bare, chaoslock, bare, ...) so drift on the machine hits both; the line that matters is `overhead`: how much of
the bare loop's rate recording costs (the target is under 10 %), from the median of
each repeat's chaoslock/bare ratio. The pairs matter on a small VM: there a ping-pong
loop's rate moves by 2x between minutes (which core the kernel puts each process on,
how deep the idle cores sleep), far more than recording costs, and a pair run back to
back shares the machine's mood where medians of each side taken apart do not.
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
from harness.core.history import read_history  # noqa: E402
from harness.engine.runner import run  # noqa: E402

from benchmarks.stops import stop_if_interrupted  # noqa: E402
from harness.core.spec import TestSpec  # noqa: E402
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
    out = stop_if_interrupted(run(spec, progress=False))  # a press ends the benchmark, not only this run
    ops = [o for o in read_history(out.run_dir / "history.jsonl") if isinstance(o.process, int)]
    releases = [o for o in ops if o.f == "release" and o.type != "invoke"]
    span = (releases[-1].time_ns - ops[0].time_ns) / 1e9
    return len(releases) / span


def recording_us_per_cycle(cycles: int = 20000) -> float:
    """CPU microseconds the worker spends recording one cycle's eight ops, with the pickling
    its queue's feeder thread does for them: the part of the overhead that is chaoslock's own
    code, free of the machine's noise."""
    import multiprocessing as mp
    from multiprocessing.reduction import ForkingPickler

    from harness.engine.worker import BATCH, Recorder

    class Pickling:  # what mp.Queue.put costs a batch, minus the pipe
        def put(self, batch):
            ForkingPickler.dumps(batch)

    rec = Recorder(Pickling(), 0, mp.Array("b", 1, lock=False), 0, batch=BATCH)
    t = time.process_time()
    for _ in range(cycles):
        rec("invoke", "acquire", key="k")
        rec("ok", "acquire", key="k", value="0123456789abcdef", token=5, valid_until_ns=time.monotonic_ns())
        rec("invoke", "read", key="k:counter", token=5)
        rec("ok", "read", key="k:counter", value=3, token=5)
        rec("invoke", "write", key="k:counter", value=4, token=5)
        rec("ok", "write", key="k:counter", value=4, token=5)
        rec("invoke", "release", key="k", value="0123456789abcdef")
        rec("ok", "release", key="k", value="0123456789abcdef")
        rec.settle()
    rec.flush()
    return (time.process_time() - t) / cycles * 1e6


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
    pairs = [ci / bi for bi, ci in zip(got["bare"], got["chaoslock"])]
    ratio = statistics.median(pairs)
    print(f"bare redis-py loop  {b:8.0f} cycles/s (median of {args.repeat})")
    print(f"chaoslock recorded  {c:8.0f} cycles/s (median of {args.repeat})")
    print(f"ratio of each repeat's pair: {' '.join(f'{r:.2f}' for r in pairs)}")
    print(f"ratio {ratio:.3f}  overhead {100 * (1 - ratio):.1f} % (median of the pairs; target: under 10 %)")
    us = recording_us_per_cycle()
    print(f"recording alone: {us:.1f} us of CPU per cycle, {100 * us * b / 1e6:.1f} % of the bare loop's "
          f"{1e6 / b:.0f} us cycle")
    return 0


if __name__ == "__main__":
    from benchmarks.stops import main_of

    main_of(main, "overhead")
