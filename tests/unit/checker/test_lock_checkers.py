"""The lock checkers on hand-made histories (tests/golden/lock/)."""


import pytest

from harness.checker.lock import check_mutex, check_stats, check_writes, holding_windows
from harness.core.history import Op, read_history
from tests.paths import TESTS

GOLDEN = TESTS / "golden" / "lock"


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


def test_expired_lease_release_is_not_a_mutex_violation_but_overlap_still_is():
    from harness.checker.linearizable import check_linearizable
    from harness.checker.lock import lease_history

    def op(t, p, ty, f):
        return Op(time_ns=t * 1_000_000, process=p, type=ty, f=f, key="lock")

    # 0 holds until it releases at 10 (fail: its lease had expired); 1 acquires at 12.
    expired = [op(0, 0, "invoke", "acquire"), op(1, 0, "ok", "acquire"), op(10, 0, "invoke", "release"),
               op(11, 0, "fail", "release"), op(12, 1, "invoke", "acquire"), op(13, 1, "ok", "acquire")]
    expired = [o.with_index(i) for i, o in enumerate(expired)]
    assert check_linearizable(expired, "mutex").valid is False  # a plain mutex misreads expiry
    assert check_linearizable(lease_history(expired), "mutex").valid is True
    # 1 acquires at 5, while 0 still believes it holds (its release is invoked at 10).
    overlap = [op(0, 0, "invoke", "acquire"), op(1, 0, "ok", "acquire"), op(4, 1, "invoke", "acquire"),
               op(5, 1, "ok", "acquire"), op(10, 0, "invoke", "release"), op(11, 0, "fail", "release")]
    overlap = [o.with_index(i) for i, o in enumerate(overlap)]
    assert check_linearizable(lease_history(overlap), "mutex").valid is False


def test_accepted_tokens_going_down_break_the_fence_only_when_fencing_is_on():
    from harness.core.spec import TestSpec

    def op(t, p, ty, f, **kw):
        return Op(time_ns=t * 1_000_000, process=p, type=ty, f=f, **kw)

    C = "lock:counter"
    h = [op(0, 0, "invoke", "acquire", key="lock"), op(1, 0, "ok", "acquire", key="lock", token=7),
         op(2, 0, "invoke", "write", key=C, value=1, token=7), op(3, 0, "ok", "write", key=C, value=1, token=7),
         op(4, 0, "invoke", "release", key="lock"), op(5, 0, "ok", "release", key="lock"),
         op(6, 1, "invoke", "acquire", key="lock"), op(7, 1, "ok", "acquire", key="lock", token=3),
         op(8, 1, "invoke", "write", key=C, value=2, token=3), op(9, 1, "ok", "write", key=C, value=2, token=3),
         op(10, 1, "invoke", "release", key="lock"), op(11, 1, "ok", "release", key="lock"),
         op(20, "final", "invoke", "read", key=C), op(21, "final", "ok", "read", key=C, value=2)]
    h = [o.with_index(i) for i, o in enumerate(h)]
    fenced = check_writes(TestSpec(fencing=True), h)
    assert fenced.valid is False and fenced.summary["writes_out_of_token_order"] == 1
    unfenced = check_writes(TestSpec(fencing=False), h)
    assert unfenced.valid is True and unfenced.summary["writes_out_of_token_order"] == 1
