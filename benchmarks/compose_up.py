"""What the compose provider costs at start and stop: cluster up (until every server serves)
and down, per backend, against the local provider measured in the same run.

    python benchmarks/compose_up.py [--repeat 3]

Needs root and `make compose` (a Docker engine and the images). Prints, per backend, the
median up and down seconds of each provider and the compose / local ratio.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.cluster.assemble import make_cluster  # noqa: E402
from harness.core.spec import TestSpec  # noqa: E402
from results.store import new_run_id  # noqa: E402

BACKENDS = ("redis", "redlock", "etcd", "zookeeper")


def once(backend: str, cluster: str, log_dir: Path) -> tuple[float, float]:
    spec = TestSpec(backend=backend, cluster=cluster, concurrency=5)
    c = make_cluster(spec, new_run_id(), log_dir, [])
    t0 = time.perf_counter()
    c.up()
    t1 = time.perf_counter()
    c.down()
    return t1 - t0, time.perf_counter() - t1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    import tempfile

    print(f"{'backend':10} {'local up':>9} {'compose up':>11} {'ratio':>6} {'local down':>11} {'compose down':>13}")
    with tempfile.TemporaryDirectory() as tmp:
        for backend in BACKENDS:
            got = {}
            for cluster in ("local", "compose"):
                runs = [once(backend, cluster, Path(tmp)) for _ in range(args.repeat)]
                got[cluster] = (statistics.median(u for u, _ in runs), statistics.median(d for _, d in runs))
            (lu, ld), (cu, cd) = got["local"], got["compose"]
            print(f"{backend:10} {lu:8.2f}s {cu:10.2f}s {cu / lu:5.2f}x {ld:10.2f}s {cd:12.2f}s")
    return 0


if __name__ == "__main__":
    from benchmarks.stops import main_of

    main_of(main, "compose_up")
