"""The predicates of the known results under aimed client faults and slow links
(harness/commands/reproduce_aimed.py), on hand-made histories (no servers)."""

from harness.commands.reproduce import SCENARIOS
from harness.commands.reproduce_aimed import (bands, freed_at_expiry, queue_moves_past_dead_waiter, release_cut_until_expiry,
                                             slow_acquires_fail, waiter_kept_out)
from harness.core.history import NEMESIS
from tests.unit.commands.test_reproduce import MS, fails, hold, op

SAFE = {"violations": 0}


def fault(start: str, heal: str, a: float, b: float, value=None, landed: str = "ok") -> list:
    return [op(a - 5, NEMESIS, "invoke", start), op(a, NEMESIS, landed, start, value=value or {}),
            op(b, NEMESIS, "invoke", heal), op(b + 5, NEMESIS, "ok", heal)]


def test_a_band_runs_from_the_ok_to_the_heals_invoke_and_a_missed_fault_has_none():
    h = fault("pause-waiter", "resume-waiter", 100, 200, {"process": 2}) + \
        fault("pause-waiter", "resume-waiter", 300, 310, landed="fail")
    assert bands(h, "pause-waiter", "resume-waiter") == [(100 * MS, 200 * MS, {"process": 2})]


# --- a waiter paused or cut off ---------------------------------------------------------
kept_out = waiter_kept_out("partition-waiter", "heal-waiter")


def test_a_waiter_not_granted_in_its_band_is_kept_out():
    h = fault("partition-waiter", "heal-waiter", 100, 200, {"process": 2}) + hold(1, 90, 150) + \
        [op(95, 2, "invoke", "acquire"), op(230, 2, "fail", "acquire")] + hold(2, 260, 270)
    assert kept_out(SAFE, h) is True


def test_a_waiter_granted_in_its_band_or_two_holders_or_no_fault_is_a_miss():
    band = fault("partition-waiter", "heal-waiter", 100, 200, {"process": 2})
    assert kept_out(SAFE, band + hold(2, 150, 160)) is False
    assert kept_out({"violations": 1}, band) is False
    assert kept_out(SAFE, hold(2, 150, 160)) is False
    assert waiter_kept_out("pause-waiter", "resume-waiter")(SAFE, band) is False  # another fault's band


# --- a holder killed ----------------------------------------------------------------------
def killed(told_ms: float) -> list:
    return [op(9, 0, "invoke", "acquire"), op(10, 0, "ok", "acquire", key="k", valid_until_ns=int(told_ms * MS)),
            op(50, NEMESIS, "invoke", "kill-holder"),
            op(60, NEMESIS, "ok", "kill-holder", value={"process": 0, "worker": 0})]


def grant(p, t: float, key: str = "k") -> list:
    return [op(t - 1, p, "invoke", "acquire", key=key), op(t, p, "ok", "acquire", key=key)]


def test_the_dead_holders_lock_is_taken_once_its_validity_has_ended():
    assert freed_at_expiry(SAFE, killed(2000) + grant(1, 2050)) is True


def test_a_grant_before_the_validity_or_never_or_much_later_is_a_miss():
    assert freed_at_expiry(SAFE, killed(2000) + grant(1, 1900)) is False
    assert freed_at_expiry(SAFE, killed(2000) + grant(1, 2050, key="other")) is False  # another key's grant
    assert freed_at_expiry(SAFE, killed(2000)) is False
    assert freed_at_expiry(SAFE, killed(2000) + grant(1, 4000)) is False
    assert freed_at_expiry(SAFE, grant(1, 2050)) is False  # nobody killed


# --- a slow link -----------------------------------------------------------------------
def test_acquires_over_the_slow_link_fail_and_none_succeeds():
    band = fault("slow-link", "fast-link", 100, 200)
    assert slow_acquires_fail(SAFE, band + fails(1, 150) + hold(2, 90, 95)) is True
    # invoked in the band, failed after the heal: still never granted
    assert slow_acquires_fail(SAFE, band + [op(190, 1, "invoke", "acquire"), op(230, 1, "fail", "acquire")]) is True
    # invoked in the band, granted by an attempt after the heal: not held against it
    assert slow_acquires_fail(SAFE, band + fails(1, 150) + [op(190, 2, "invoke", "acquire"),
                                                             op(230, 2, "ok", "acquire")]) is True


def test_an_acquire_granted_over_the_slow_link_or_none_tried_is_a_miss():
    band = fault("slow-link", "fast-link", 100, 200)
    assert slow_acquires_fail(SAFE, band + fails(1, 150) + hold(2, 160, 170)) is False
    assert slow_acquires_fail(SAFE, band + hold(2, 90, 95)) is False
    assert slow_acquires_fail(SAFE, fails(1, 150)) is False


def test_each_new_known_result_is_one_safe_variant_of_its_fault():
    for name, fault_ in (("zk-waiter-session-expiry", "pause-waiter"), ("redis-holder-killed", "kill-holder"),
                         ("redlock-slow-acquire", "slow-link"), ("etcd-waiter-cut-off", "partition-waiter"),
                         ("redis-release-cut", "cut-in-flight"), ("zk-waiter-killed", "kill-holder")):
        sc = SCENARIOS[name]
        assert sc.spec["nemesis"] == (fault_,) and [e.verdict for _, e in sc.variants.values()] == ["safe"]


# --- a release cut as it left -------------------------------------------------------------
def release_cut(told_ms: float) -> list:
    return [op(9, 0, "invoke", "acquire"), op(10, 0, "ok", "acquire", key="k", valid_until_ns=int(told_ms * MS)),
            op(40, 0, "invoke", "release", key="k"), op(50, NEMESIS, "invoke", "cut-in-flight"),
            op(60, NEMESIS, "ok", "cut-in-flight", value={"process": 0, "worker": 0, "during": "release"}),
            op(500, 0, "info", "release", key="k")]


def test_a_key_whose_release_was_cut_lives_to_its_ttl_then_comes_free():
    assert release_cut_until_expiry(SAFE, release_cut(2000) + grant(1, 2100)) is True


def test_a_key_freed_before_its_validity_or_never_is_a_miss():
    assert release_cut_until_expiry(SAFE, release_cut(2000) + grant(1, 600)) is False  # the cut release freed it
    assert release_cut_until_expiry(SAFE, release_cut(2000)) is False
    assert release_cut_until_expiry(SAFE, grant(1, 2100)) is False  # nothing cut


# --- a waiter killed mid-acquire ----------------------------------------------------------
def waiter_killed(at: float) -> list:
    return [op(at - 20, 2, "invoke", "acquire"), op(at - 10, NEMESIS, "invoke", "kill-holder"),
            op(at, NEMESIS, "ok", "kill-holder", value={"process": 2, "worker": 2, "during": "acquire"})]


def test_the_queue_moves_past_a_dead_waiter_within_its_session():
    moves = queue_moves_past_dead_waiter(2000)
    assert moves(SAFE, hold(1, 50, 900) + waiter_killed(100) + grant(3, 2000)) is True


def test_a_queue_stuck_behind_a_dead_waiter_or_no_kill_is_a_miss():
    moves = queue_moves_past_dead_waiter(2000)
    assert moves(SAFE, hold(1, 50, 900) + waiter_killed(100) + grant(3, 4000)) is False  # 3.9 s > 2 s + 1.5 s
    assert moves(SAFE, hold(1, 50, 900) + waiter_killed(100)) is False
    assert moves(SAFE, grant(3, 2000)) is False
    assert moves({"violations": 1}, hold(1, 50, 900) + waiter_killed(100) + grant(3, 2000)) is False
