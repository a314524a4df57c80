"""An UNKNOWN verdict always says why (harness/checker/policy.py): a run that crashed or judged
nothing says so already; a deciding checker that could not decide is named with its own reason,
in the summary (`unknown_reason`, what `--json` prints) and in `chaos check --model`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.checker.policy import summarize
from harness.core.contracts.checker import UNKNOWN, CheckResult
from harness.core.spec import TestSpec
from tests.conftest import chaos

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "lock"
JUDGED = {"critical_sections": 4}


def results(**unknown: CheckResult) -> dict[str, CheckResult]:
    out = {"mutex": CheckResult(name="mutex", valid=True, summary=JUDGED),
           "liveness": CheckResult(name="liveness", valid=True)}
    return {**out, **unknown}


@pytest.mark.parametrize("result, words", [
    (CheckResult(name="linearizable-mutex", valid=UNKNOWN, details={"reason": "time limit of 10s reached"}),
     "checker linearizable-mutex could not decide (time limit of 10s reached)"),
    (CheckResult(name="linearizable-mutex", valid=UNKNOWN, error="RecursionError: too deep"),
     "checker linearizable-mutex could not decide (RecursionError: too deep)"),
    (CheckResult(name="linearizable-mutex", valid=UNKNOWN), "checker linearizable-mutex could not decide (it gave no reason)"),
    (CheckResult(name="linearizable-mutex", valid="maybe"), "its verdict 'maybe' is not one"),
])
def test_a_checker_that_could_not_decide_is_named_with_its_reason(result, words):
    s = summarize(TestSpec(backend="redis"), results(**{"linearizable-mutex": result}), None, {})
    assert s["valid"] == UNKNOWN and words in s["unknown_reason"]


def test_a_decided_run_has_no_unknown_reason_and_a_finding_checker_that_does_not_apply_does_not_make_one():
    """Issue 37: this test asserted that a finding checker's bare "unknown" (no reason: a crash
    or a checker that could not judge) left the run VALID, the defect itself. A promise that
    does not apply to the run (held, of a client with no opinion) still leaves it alone."""
    na = CheckResult(name="held", valid=UNKNOWN, details={"inapplicable": "no held answers in the history"})
    s = summarize(TestSpec(backend="redis"), results(held=na), None, {})
    assert s["valid"] is True and "unknown_reason" not in s
    assert s["not_judged"] == {"held": "no held answers in the history"}
    s = summarize(TestSpec(backend="redis"), results(held=CheckResult(name="held", valid=UNKNOWN)), None, {})
    assert s["valid"] == UNKNOWN and s["unknown_reason"] == "checker held could not decide (it gave no reason)"


@pytest.mark.parametrize("name", ["outlived", "fresh-leases", "held"])
def test_a_finding_checker_that_crashed_makes_the_run_unknown_with_its_reason(name):
    from harness.core.contracts.checker import safe_check

    def boom(spec, history):
        raise ValueError("cannot read this")

    s = summarize(TestSpec(backend="redis"), results(**{name: safe_check(boom, None, [], name=name)}), None, {})
    assert s["valid"] == UNKNOWN and s["checkers"][name] == UNKNOWN
    assert s["unknown_reason"] == f"checker {name} could not decide (ValueError: cannot read this)"
    assert s["not_judged"][name] == "ValueError: cannot read this"


def test_check_model_says_why_it_is_unknown_in_json_and_in_words():
    r = chaos("check", str(GOLDEN / "sequential-ok.jsonl"), "--model", "mutex", "--time-limit", "1e-9", "--json")
    out = json.loads(r.stdout)
    assert r.returncode == 2 and out["valid"] == UNKNOWN and "time limit of 1e-09s reached" in out["unknown_reason"]
    r = chaos("check", str(GOLDEN / "sequential-ok.jsonl"), "--model", "mutex", "--time-limit", "1e-9")
    assert r.returncode == 2 and r.stdout.startswith("mutex: unknown (checker mutex could not decide (time limit")


def test_a_run_without_a_critical_section_says_what_its_acquires_did():
    s = summarize(TestSpec(backend="redis"), {"mutex": CheckResult(name="mutex", valid=True, summary={
        "critical_sections": 0, "acquires_ok": 0, "acquires_fail": 0, "acquires_info": 12})}, None, {})
    assert s["unknown_reason"] == ("no critical section completed (acquires ok/fail/info 0/0/12), so there is "
                                   "nothing to judge")
