"""Fairness and reentrancy, on the golden histories in tests/golden/properties/."""


from harness.checker.policy import checkers, judged
from harness.checker.properties import check_fairness, check_reentrancy
from harness.core.history import read_history
from harness.core.spec import TestSpec
from tests.paths import TESTS

GOLDEN = TESTS / "golden" / "properties"
SPEC = TestSpec(backend="redis", reenter=True, acquire_timeout=2.0)


def test_a_fifo_history_overtakes_nobody():
    s = check_fairness(SPEC, read_history(GOLDEN / "fairness-ok.jsonl")).summary
    assert s["grants"] == 5 and s["overtaking_grants"] == 0 and s["overtake_share"] == 0 and s["worst_overtake"] == 0


def test_overtakes_are_counted_with_the_worst_one():
    r = check_fairness(SPEC, read_history(GOLDEN / "fairness-bad.jsonl"))
    s = r.summary
    # p2 (asked at 20 ms) overtakes p1 (10) and p3 (12, who gives up later); p1, the first
    # to ask, then overtakes nobody.
    assert r.valid is True  # a measure, not a verdict
    assert s["grants"] == 3 and s["overtaking_grants"] == 1 and s["worst_overtake"] == 2
    assert s["waiters_overtaken"] == 2 and s["overtake_share"] == round(1 / 3, 4)


def test_requests_racing_within_the_margin_are_no_overtake():
    h = read_history(GOLDEN / "fairness-bad.jsonl")
    assert check_fairness(SPEC, h, margin_ms=20.0).summary["worst_overtake"] == 0  # 10 and 12 vs 20: a race


def test_a_holder_that_waits_out_its_reacquire_blocks():
    r = check_reentrancy(SPEC, read_history(GOLDEN / "reentrancy-ok.jsonl"))
    assert r.valid is True and r.summary["reentrant_behaviour"] == "blocks" and r.summary["reacquire_blocks"] == 2


def test_an_inner_release_that_frees_the_outer_lock_is_invalid():
    r = check_reentrancy(SPEC, read_history(GOLDEN / "reentrancy-bad.jsonl"))
    assert r.valid is False and r.summary["reentrant_behaviour"] == "succeeds"
    assert "freed the outer lock" in r.details["problems"][0]["problem"]


def test_a_quick_failure_refuses_and_reentrancy_is_judged_only_when_asked():
    h = read_history(GOLDEN / "reentrancy-ok.jsonl")
    fast = [o if o.f != "reacquire" or o.type == "invoke" else
            type(o)(**{**{f: getattr(o, f) for f in o.__slots__}, "time_ns": o.time_ns - 490_000_000}) for o in h]
    assert check_reentrancy(SPEC, fast).summary["reentrant_behaviour"] == "refuses"
    assert "reentrancy" in dict(checkers(SPEC)) and "reentrancy" in judged(SPEC)
    assert "reentrancy" not in dict(checkers(TestSpec(backend="redis")))
