"""The seeded schedule on a real run: same seed, same nemesis ops; another seed, others."""

from __future__ import annotations

from tests.integration.nemesis.probes import MARKS, figure, nemesis_ops, run_json

pytestmark = MARKS


def test_same_seed_same_nemesis_ops(tmp_path):
    args = ("--backend", "redlock", "--nemesis", "clock-skew,partition", "--time-limit", "7", "--nemesis-interval", "1")
    runs = [run_json(tmp_path / str(i), *args, "--seed", seed) for i, seed in enumerate(("5", "5", "6"))]
    plans = [[(o["f"], o["value"]) for o in nemesis_ops(h)] for _, h in runs]
    assert len(plans[0]) >= 4
    assert plans[0] == plans[1]
    assert plans[0] != plans[2]
    figure("seeded schedule", f"seed 5 twice: {len(plans[0])} identical nemesis invokes "
                              f"{[f for f, _ in plans[0]]}; seed 6 differs ({[f for f, _ in plans[2]]})")
