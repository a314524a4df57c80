"""The native load mode's pure parts: what it refuses (one sentence each, before any server
starts), and how the checkers count the lock cycle alone (-o resource=none). Native runs
themselves are real: tests/integration/engine/test_native_load.py, benchmarks/ceiling.py."""

from __future__ import annotations

import pytest

from harness.checker.lock import check_stats
from harness.core.history import Op
from harness.core.spec import TestSpec
from harness.engine.native import refusal

NATIVE = {"load_driver": "native"}


@pytest.mark.parametrize("change,words", [
    ({"backend": "pottery"}, "not pottery; use -o load_clients=K"),
    ({"backend": "redlock", "options": {**NATIVE, "validity_clock": "wall"}}, "drop -o validity_clock"),
    ({"nemesis": ("pause-holder",)}, "one process per client"),
    ({"renew": True}, "drop --renew"),
    ({"reenter": True}, "drop --reenter"),
    ({"lock": "semaphore:2"}, "drop --lock semaphore:2"),
    ({"options": {**NATIVE, "watchdog": "true"}}, "drop -o watchdog"),
    ({"options": {**NATIVE, "load_clients": "4"}}, "two load modes"),
])
def test_what_the_native_driver_cannot_run_is_refused_in_one_sentence(change, words):
    spec = TestSpec(**{"backend": "redis", "options": NATIVE, **change})
    why = refusal(spec)
    assert why is not None and words in why and "\n" not in why, why


@pytest.mark.parametrize("backend", ["redis", "redlock", "etcd", "zookeeper"])
def test_the_plain_cycle_of_a_design_it_implements_is_accepted(backend):
    assert refusal(TestSpec(backend=backend, options=NATIVE, fencing=True, keys=4, concurrency=8)) is None


def _cycle(p: int, t: int, work: bool) -> list[Op]:
    ops = [Op(time_ns=t, process=p, type="invoke", f="acquire", key="k"),
           Op(time_ns=t + 1, process=p, type="ok", f="acquire", key="k", value=f"v{p}", token=p)]
    if work:
        ops += [Op(time_ns=t + 2, process=p, type="invoke", f="write", key="k:counter", value=1),
                Op(time_ns=t + 3, process=p, type="fail", f="write", key="k:counter", value=1, error="stale-token")]
    return ops + [Op(time_ns=t + 4, process=p, type="invoke", f="release", key="k", value=f"v{p}"),
                  Op(time_ns=t + 5, process=p, type="ok", f="release", key="k", value=f"v{p}")]


def test_the_lock_cycle_alone_counts_each_released_hold_as_a_critical_section():
    history = [o for i in range(3) for o in _cycle(i, 10 * i, work=False)]
    assert check_stats(None, history).summary["critical_sections"] == 3


def test_holders_that_touched_the_resource_count_only_accepted_writes():
    history = [o for i in range(3) for o in _cycle(i, 10 * i, work=True)]  # every write refused
    assert check_stats(None, history).summary["critical_sections"] == 0
