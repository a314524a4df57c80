"""The lock checkers on hand-made histories (tests/golden/lock/)."""

from pathlib import Path

import pytest

from harness.checker.lock import check_mutex, check_stats, check_writes, holding_windows
from harness.history import Op, read_history

GOLDEN = Path(__file__).parent.parent / "golden" / "lock"


def load(name: str) -> list[Op]:
    return read_history(GOLDEN / f"{name}.jsonl")


def test_sequential_holders_are_valid():
    h = load("sequential-ok")
    assert check_mutex(None, h).valid is True
    w = check_writes(None, h)
    assert w.valid is True and w.summary["lost_updates"] == 0 and w.summary["final_counter"] == 2


def test_overlap_is_a_violation_with_its_duration_and_ops():
    r = check_mutex(None, load("overlap-bad"))
    assert r.valid is False and r.summary["violations"] == 1
    o = r.details["overlaps"][0]
    assert {o["first"]["process"], o["second"]["process"]} == {0, 1}
    assert o["overlap_ms"] == pytest.approx(5.0)  # 1 acquires at 5 ms, 0 releases at 10 ms


def test_overlap_loses_an_update_and_accepts_a_stale_write():
    w = check_writes(None, load("overlap-bad"))
    assert w.valid is False
    assert w.summary["lost_updates"] == 1
    assert w.summary["stale_writes_accepted"] == 1 and w.summary["stale_writes_rejected"] == 0


def test_fencing_rejects_the_stale_write_and_keeps_data_safe():
    h = load("fenced-overlap-rejected")
    assert check_mutex(None, h).valid is False  # the lock itself still failed
    w = check_writes(None, h)
    assert w.valid is True
    assert w.summary["stale_writes_rejected"] == 1 and w.summary["stale_writes_accepted"] == 0
    assert w.summary["lost_updates"] == 0


def test_a_holder_that_never_releases_holds_until_the_end():
    h = load("unreleased-bad")
    wins = holding_windows(h)
    assert any(w.end_ns is None for w in wins)
    assert check_mutex(None, h).summary["violations"] == 1


def test_missing_final_read_is_unknown_not_valid():
    h = [o for o in load("sequential-ok") if o.process != "final"]
    assert check_writes(None, h).valid == "unknown"


def test_stats_count_outcomes_and_latency():
    s = check_stats(None, load("sequential-ok")).summary
    assert s["acquires_ok"] == 2 and s["acquires_fail"] == 0 and s["critical_sections"] == 2
    assert s["p50_acquire_ms"] is not None
