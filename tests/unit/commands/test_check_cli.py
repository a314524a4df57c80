"""`chaos check`: exit 0 valid, 1 invalid, 2 unknown, 254 for a file that is not a history."""

import json

import pytest

from tests.conftest import chaos
from tests.unit.checker.test_linearizable import hard_history
from tests.paths import TESTS

GOLDEN = TESTS / "golden"


@pytest.mark.parametrize("name, model, code", [
    ("mutex-ok", "mutex", 0), ("mutex-bad", "mutex", 1),
    ("register-ok", "register", 0), ("register-bad", "register", 1),
    ("cas-register-concurrent-ok", "cas-register", 0), ("cas-register-bad", "cas-register", 1),
    ("fenced-register-ok", "fenced-register", 0), ("fenced-register-stale-bad", "fenced-register", 1),
])
def test_check_a_history_with_a_model(name, model, code):
    r = chaos("check", str(GOLDEN / f"{name}.jsonl"), "--model", model, "--json")
    assert r.returncode == code, r.stderr
    out = json.loads(r.stdout)
    assert out["valid"] is (code == 0)
    if code == 1:
        assert out["details"]["counterexample"]["op"]


def test_check_a_whole_lock_history():
    r = chaos("check", str(GOLDEN / "lock" / "overlap-bad.jsonl"), "--json")
    assert r.returncode == 1
    s = json.loads(r.stdout)
    assert s["violations"] == 1 and s["lost_updates"] == 1 and s["stale_writes_accepted"] == 1
    # a bare history says no TTL; its grants say 2 s, as --ttl does (issue 37: no default spec)
    assert chaos("check", str(GOLDEN / "lock" / "sequential-ok.jsonl")).returncode == 2
    assert chaos("check", str(GOLDEN / "lock" / "sequential-ok.jsonl"), "--ttl", "2000").returncode == 0


def test_out_of_time_is_unknown(tmp_path):
    # 40 concurrent info writes and reads no order of them explains: deciding that means
    # trying about 2^40 subsets of the writes, so a half-second budget runs out first.
    path = tmp_path / "history.jsonl"
    path.write_text("".join(json.dumps(o.to_dict()) + "\n" for o in hard_history(40)))
    r = chaos("check", str(path), "--model", "register", "--time-limit", "0.5", "--json", timeout=60)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    out = json.loads(r.stdout)
    assert out["valid"] == "unknown" and out["summary"]["unknown_keys"] == ["x"]
    assert "time limit" in out["details"]["reason"]


def test_not_a_history_is_254_naming_the_line(tmp_path):
    p = tmp_path / "h.jsonl"
    p.write_text('{"time_ns": 1, "process": 0, "type": "invoke", "f": "acquire"}\n{"time_ns": 2, "process": 0, "type": "done", "f": "acquire"}\n')
    r = chaos("check", str(p))
    assert r.returncode == 254 and "line 2" in r.stderr and "type 'done'" in r.stderr


def test_check_time_limit_is_honoured_without_model(tmp_path):
    """Issue 37: `--time-limit` reached the search only with --model; every run check used 10 s."""
    import shutil

    from harness.core.spec import TestSpec
    from results import store

    shutil.copy(GOLDEN / "lock" / "sequential-ok.jsonl", tmp_path / "history.jsonl")
    store.write_spec(tmp_path, TestSpec(backend="redis", facts={"validity": "from-grant"}))
    assert chaos("check", str(tmp_path)).returncode == 0
    r = chaos("check", str(tmp_path), "--time-limit", "1e-9", "--json")
    out = json.loads(r.stdout)
    assert r.returncode == 2 and out["valid"] == "unknown"
    assert "checker linearizable-mutex could not decide (time limit of 1e-09s reached" in out["unknown_reason"]


def test_a_summary_key_two_checkers_share_is_named_by_each():
    """Issue 37: the summary took `invalid_keys`, `model`, ... from whichever checker came first."""
    from harness.checker.policy import summarize, verdicts
    from harness.core.history import read_history
    from harness.core.spec import TestSpec

    spec = TestSpec(backend="redis", facts={"validity": "from-grant"})
    s = summarize(spec, verdicts(spec, read_history(GOLDEN / "lock" / "overlap-bad.jsonl")), None, {})
    assert s["linearizable-mutex.invalid_keys"] == ["lock"] and s["linearizable-register.invalid_keys"] == []
    assert "invalid_keys" not in s and "model" not in s  # they disagree: no plain key reads as the run's
    assert s["linearizable-mutex.model"] == "mutex" and s["unknown_keys"] == []  # they agree: plain too
