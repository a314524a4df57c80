"""The seeded schedule on a real run: same seed, same nemesis ops. (That another seed plans
other ops is tests/unit/engine/test_generator.py's, without servers.)"""

from __future__ import annotations

from tests.integration.nemesis.probes import MARKS, figure, nemesis_ops, run_json

pytestmark = MARKS


def test_same_seed_same_nemesis_ops(tmp_path):
    args = ("--backend", "redlock", "--nemesis", "clock-skew,partition", "--time-limit", "7", "--nemesis-interval", "1")
    # both at once: the schedule is the seed's alone, whatever the machine's load (and the
    # suite saves a run's time)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(lambda i: run_json(tmp_path / str(i), *args, "--seed", "5"), range(2)))
    plans = [[(o["f"], o["value"]) for o in nemesis_ops(h)] for _, h in runs]
    assert len(plans[0]) >= 4
    assert plans[0] == plans[1]
    figure("seeded schedule", f"seed 5 twice: {len(plans[0])} identical nemesis invokes {[f for f, _ in plans[0]]}")
