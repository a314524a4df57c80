"""Load mode's pure parts: how clients are grouped into processes, and that a fault run refuses
it. A load-mode run itself is real (benchmarks/ceiling.py, tests/integration)."""

from __future__ import annotations

import pytest

from harness.core.errors import BadArgument
from harness.core.spec import TestSpec
from harness.engine.load import groups
from harness.engine.pool import Workers


@pytest.mark.parametrize("n,k", [(1, 16), (16, 16), (17, 16), (32, 16), (256, 16), (5, 2), (7, 3)])
def test_groups_cover_every_slot_once_in_even_processes(n, k):
    g = groups(n, k)
    assert [s for grp in g for s in grp] == list(range(n))
    assert len(g) == -(-n // k) and max(map(len, g)) <= k and max(map(len, g)) - min(map(len, g)) <= 1


def test_a_fault_run_refuses_load_mode_in_one_sentence():
    spec = TestSpec(backend="redis", nemesis=("pause-holder",), options={"load_clients": "8"})
    with pytest.raises(BadArgument, match="one process per client"):
        Workers(spec, cluster=None)
