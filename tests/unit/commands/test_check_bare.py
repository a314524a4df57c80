"""`chaos check` of a bare history (no spec.json beside it) judges it on what it says (issue
37): no default backend, TTL or key count; what a check needs and the history lacks makes that
check unknown with the reason; `--ttl`, `--keys` and `--backend` supply them. The golden
histories are tests/golden/bare/ (its README rows)."""

from __future__ import annotations

import json
import shutil

import pytest

from harness.checker.policy import summarize, verdicts
from harness.commands.check import bare_given
from harness.core.errors import BadArgument
from harness.core.spec import TestSpec
from results import store
from results.store import load_run
from tests.conftest import chaos
from tests.paths import TESTS

BARE = TESTS / "golden" / "bare"


def judged(name: str, **given) -> dict:
    spec, history = load_run(BARE / f"{name}.jsonl")
    spec = bare_given(spec, **{"ttl_ms": None, "keys": None, "backend": None, **given})
    return summarize(spec, verdicts(spec, history), None, {})


def test_a_bare_history_assumes_no_spec():
    spec, _ = load_run(BARE / "long-ttl-ok.jsonl")
    assert spec.is_bare and spec.backend is None and spec.ttl_ms is None and spec.keys is None
    assert spec.acquire_timeout is None and spec.concurrency is None


def test_a_key_that_lived_its_long_ttl_is_not_stuck_by_a_default_ttl():
    s = judged("long-ttl-ok")
    assert s["valid"] == "unknown" and s["stuck"] is None  # was: STUCK against the default TTL of 2 s
    assert "checker liveness could not decide (the history does not say the lock's TTL" in s["unknown_reason"]
    s = judged("long-ttl-ok", ttl_ms=30_000)
    assert s["checkers"]["liveness"] is True and s["stuck"] == 0
    # still unknown, for what the history lacks: no grant says until when it is valid
    assert s["valid"] == "unknown" and "liveness" not in s["unknown_reason"]
    assert "fresh-leases could not decide (none of the 2 grant(s) says" in s["unknown_reason"]


def test_holds_on_different_keys_are_no_overlap_without_a_key_count():
    s = judged("two-keys-ok")
    assert s["checkers"]["mutex"] is True and s["violations"] == 0 and s["valid"] != False  # noqa: E712
    assert s["keys"] == 2


def test_causes_use_no_backend_s_facts_unless_told():
    """An early grant under a jump of 3 servers' clocks: Redlock's facts (5 servers, expiry on
    the moved clock) explained it for any bare history; now the servers are unknown."""
    s = judged("early-clock-jump-bad")
    assert s["valid"] is False and s["backend"] is None and s["violations_by_cause"] == {"unknown": 1}
    s = judged("early-clock-jump-bad", backend="redlock")
    assert s["backend"] == "redlock" and s["violations_by_cause"] == {"early-server-clock": 1}
    s = judged("early-clock-jump-bad", backend="etcd")  # etcd's leases use the monotonic clock
    assert s["violations_by_cause"] == {"unexplained": 1}


def test_the_flags_supply_what_the_history_lacks_and_are_checked():
    spec, _ = load_run(BARE / "two-keys-ok.jsonl")
    given = bare_given(spec, ttl_ms=30_000, keys=2, backend="redis")
    assert (given.ttl_ms, given.keys, given.backend, given.is_bare) == (30_000, 2, "redis", True)
    for bad, words in (({"ttl_ms": 10}, "--ttl must be between 50 ms"), ({"keys": 0}, "--keys must be between 1"),
                       ({"backend": "redlok"}, "unknown backend 'redlok'")):
        with pytest.raises(BadArgument, match=words):
            bare_given(spec, **{"ttl_ms": None, "keys": None, "backend": None, **bad})


def test_a_run_with_a_spec_refuses_the_flags(tmp_path):
    shutil.copy(BARE / "two-keys-ok.jsonl", tmp_path / "history.jsonl")
    store.write_spec(tmp_path, TestSpec(backend="redis", keys=2))
    spec, _ = load_run(tmp_path)
    with pytest.raises(BadArgument, match="this run's spec.json says them .*drop --ttl"):
        bare_given(spec, ttl_ms=30_000, keys=None, backend=None)


def test_chaos_check_ttl_on_the_command_line():
    r = chaos("check", str(BARE / "long-ttl-ok.jsonl"), "--json")
    assert r.returncode == 2 and json.loads(r.stdout)["stuck"] is None
    r = chaos("check", str(BARE / "long-ttl-ok.jsonl"), "--ttl", "30000", "--keys", "1", "--backend", "redis", "--json")
    out = json.loads(r.stdout)
    assert r.returncode == 2 and out["stuck"] == 0 and out["backend"] == "redis" and out["checkers"]["liveness"] is True
    r = chaos("check", str(BARE / "long-ttl-ok.jsonl"), "--ttl", "7")
    assert r.returncode == 254 and "--ttl must be between 50 ms" in r.stderr
