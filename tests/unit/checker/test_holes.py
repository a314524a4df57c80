"""A history with holes proves nothing: ops the clients recorded that never reached it (the
runner counts them: outcome.json's `ops_lost`), or writes the counter counts that the history
lacks (`writes_missing`), make the run "unknown" with the reason, never INVALID nor VALID,
even where the holes make holders look as if they never let go."""

from __future__ import annotations

from harness.checker.lock import check_writes
from harness.checker.policy import summarize, verdicts
from harness.core.contracts.checker import UNKNOWN
from harness.core.history import Op
from harness.core.spec import TestSpec


def _op(i, t, p, type_, f, key="lock", value=None, valid_until_ns=None):
    return Op(index=i, time_ns=t, process=p, type=type_, f=f, key=key, value=value, valid_until_ns=valid_until_ns)


def _cycle(i, t, p, value, release=True):
    """acquire (its lease valid for the TTL, 60 s), read, write value, release (the release
    left out: a lost op)."""
    ops = [_op(i, t, p, "invoke", "acquire"),
           _op(i + 1, t + 1, p, "ok", "acquire", value=f"v{p}", valid_until_ns=t + 1 + 60_000_000_000),
           _op(i + 2, t + 2, p, "invoke", "read", "lock:counter"), _op(i + 3, t + 3, p, "ok", "read", "lock:counter", value - 1),
           _op(i + 4, t + 4, p, "invoke", "write", "lock:counter", value), _op(i + 5, t + 5, p, "ok", "write", "lock:counter", value)]
    if release:
        ops += [_op(i + 6, t + 6, p, "invoke", "release", value=f"v{p}"), _op(i + 7, t + 7, p, "ok", "release", value=f"v{p}")]
    return ops


def _final(i, t, value):
    return [_op(i, t, "final", "invoke", "read", "lock:counter"), _op(i + 1, t + 1, "final", "ok", "read", "lock:counter", value)]


def _history(final: int, release_first: bool) -> list[Op]:
    return _cycle(0, 100, 0, 1, release=release_first) + _cycle(8, 200, 1, 2) + _final(16, 300, final)


def test_a_counter_ahead_of_the_history_is_unknown_with_the_count():
    h = _cycle(0, 100, 0, 1) + _final(8, 300, 3)  # one write recorded, three counted
    r = check_writes(None, h)
    assert r.valid == UNKNOWN and r.summary["writes_missing"] == 2
    assert "ops are missing from the history" in r.error


def test_a_counter_behind_the_history_is_still_a_lost_update():
    r = check_writes(None, _cycle(0, 100, 0, 1) + _cycle(8, 200, 1, 1) + _final(16, 300, 1))
    assert r.valid is False and r.summary["lost_updates"] == 1 and r.summary["writes_missing"] == 0


def test_a_lost_release_with_the_counter_agreeing_is_a_violation():
    """The control: without a reason to doubt the history, an unreleased holder overlaps."""
    spec = TestSpec(backend="redis", ttl_ms=60_000)
    s = summarize(spec, verdicts(spec, _history(2, release_first=False)), None, {"started": True})
    assert s["valid"] is False and s["violations"] >= 1


def test_ops_lost_make_the_same_history_unknown_never_invalid():
    spec = TestSpec(backend="redis", ttl_ms=60_000)
    s = summarize(spec, verdicts(spec, _history(2, release_first=False)), None, {"started": True, "ops_lost": 3})
    assert s["valid"] == UNKNOWN and "3 op(s) the clients recorded never reached the history" in s["unknown_reason"]
    assert s["violations"] >= 1  # what the checker saw is still shown


def test_writes_missing_make_it_unknown_never_invalid():
    spec = TestSpec(backend="redis", ttl_ms=60_000)
    s = summarize(spec, verdicts(spec, _history(3, release_first=False)), None, {"started": True})
    assert s["valid"] == UNKNOWN and "1 more write(s) than the history records" in s["unknown_reason"]


def test_a_whole_history_stays_valid():
    spec = TestSpec(backend="redis", ttl_ms=60_000)
    s = summarize(spec, verdicts(spec, _history(2, release_first=True)), None, {"started": True})
    assert s["valid"] is True and s["writes_missing"] == 0 and "unknown_reason" not in s


def test_a_worker_killed_from_outside_makes_it_unknown_never_invalid():
    spec = TestSpec(backend="redis", ttl_ms=60_000)
    s = summarize(spec, verdicts(spec, _history(2, release_first=False)), None,
                  {"started": True, "workers_died": ["c1 (signal 9)"]})
    assert s["valid"] == UNKNOWN and "c1 (signal 9) were ended by a signal from outside" in s["unknown_reason"]


def test_a_replay_that_applied_none_of_its_faults_is_unknown_with_the_reason():
    from harness.checker.replayed import check_replayed

    spec = TestSpec(backend="redis", ttl_ms=60_000, facts={"replay": {"of": "r", "faults": [
        {"f": "pause-holder", "at": 2.0, "duration": 4.0}]}})
    missed = _history(2, release_first=True) + [
        Op(index=30, time_ns=400, process="nemesis", type="invoke", f="pause-holder"),
        Op(index=31, time_ns=401, process="nemesis", type="fail", f="pause-holder", error="no holder to pause")]
    r = check_replayed(spec, missed)
    assert r.valid == UNKNOWN and "applied none of its 1 recorded fault(s)" in r.error and "no holder" in r.error
    s = summarize(spec, verdicts(spec, missed), None, {"started": True})
    assert s["valid"] == UNKNOWN and s["checkers"]["replayed"] == UNKNOWN
    applied = missed[:-1] + [Op(index=31, time_ns=401, process="nemesis", type="ok", f="pause-holder")]
    assert check_replayed(spec, applied).valid is True
    assert summarize(spec, verdicts(spec, applied), None, {"started": True})["valid"] is True
