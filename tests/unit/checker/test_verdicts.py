"""One strict reader of stored verdicts (harness/core/contracts/checker.py parse_verdict): what chaoslock
writes is read as written, everything else is "unknown", so nothing unproven reads as valid:
not in the matrix, its recheck, JUnit, reproduce's tables, the compare page or `chaos check`."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from harness.core.contracts.checker import UNKNOWN, merge_valid, parse_valid, parse_verdict, recognised, verdict_csv, verdict_word
from results.junit import write_junit

ODD = ["False", "True", "TRUE", "maybe", "", " true", "1", "0", "yes", "no", None, 1, 0, 1.0, 2, [], {}, "VALID"]


@pytest.mark.parametrize("stored, read", [
    (True, True), (False, False), ("true", True), ("false", False), ("unknown", UNKNOWN),
    ("crash", "crash"), ("unsupported", "unsupported"),
])
def test_what_chaoslock_writes_is_read_as_written(stored, read):
    assert parse_verdict(stored) is read if isinstance(read, bool) else parse_verdict(stored) == read
    assert recognised(stored)


@pytest.mark.parametrize("stored", ODD)
def test_anything_else_is_unknown_never_valid(stored):
    assert parse_verdict(stored) == UNKNOWN and parse_valid(stored) == UNKNOWN
    assert not recognised(stored)
    assert verdict_csv(stored) == "unknown" and verdict_word(stored) == "UNKNOWN"


def test_a_run_verdict_is_only_ever_true_false_or_unknown():
    assert parse_valid("crash") == UNKNOWN and parse_valid("unsupported") == UNKNOWN
    assert [verdict_csv(v) for v in (True, False, "true", "unknown", "crash")] == ["true", "false", "true", "unknown", "crash"]


@pytest.mark.parametrize("odd", ["maybe", None, "False", 1, ""])
def test_merging_an_unrecognised_verdict_is_never_valid(odd):
    assert merge_valid([True, odd]) == UNKNOWN
    assert merge_valid([odd, False]) is False  # a proven violation stands
    assert merge_valid([True, True]) is True


@pytest.mark.parametrize("odd", ["False", "maybe", "", "1", None, "yes"])
def test_junit_never_passes_an_unrecognised_verdict(tmp_path, odd):
    p = write_junit(tmp_path / "j.xml", [{"name": "c", "classname": "k", "valid": odd, "message": "m"}])
    case = ET.parse(p).getroot().find("testsuite/testcase")
    assert case.find("error") is not None and case.find("failure") is None
    assert ET.parse(p).getroot().get("errors") == "1"


def test_junit_reads_the_csv_words_like_the_json_ones(tmp_path):
    cases = [{"name": n, "valid": v} for n, v in (("a", True), ("b", "true"), ("c", False), ("d", "false"))]
    root = ET.parse(write_junit(tmp_path / "j.xml", cases)).getroot()
    assert (root.get("failures"), root.get("errors")) == ("2", "0")


# --- judging matrix cells -------------------------------------------------------------------
@pytest.mark.parametrize("valids, expected, observed", [
    (["False"], "safe", "unknown"), (["maybe"], "safe", "unknown"), ([""], "safe", "unknown"),
    (["true", "maybe"], "safe", "unknown"), (["True"], "safe", "unknown"), ([None], "safe", "unknown"),
    (["false", "maybe"], "unsafe", "unsafe"),  # one proven violation, but a run that proved nothing
])
def test_a_cell_with_an_unrecognised_verdict_is_unknown_and_not_matched(valids, expected, observed):
    from harness.commands.matrix.judge import judge_cell

    assert judge_cell(valids, expected) == (observed, False)


def test_a_row_the_matrix_never_writes_matches_not_even_either():
    from harness.commands.matrix.judge import judge_cell, run_matches

    assert judge_cell(["maybe"], "either") == ("unknown", False)
    assert judge_cell(["unknown"], "either") == ("unknown", True)
    assert not run_matches("False", "either") and run_matches("unknown", "either")


def test_rejudge_reads_every_row_through_the_parser():
    from harness.commands.matrix.expectations import Expectations
    from harness.commands.matrix.judge import rejudge

    rows = [{"backend": "redis", "nemesis": "none", "fencing": "off", "seed": s, "valid": v}
            for s, v in ((1, "true"), (2, "False"), (3, "maybe"), (4, ""))]
    (cell,) = rejudge(rows, Expectations(tables={"redis": {"expect": "safe"}}))
    assert (cell["observed"], cell["matched"]) == ("unknown", False)
    assert [r["matched"] for r in rows] == [True, False, False, False]
    assert [r["valid"] for r in rows] == ["true", "unknown", "unknown", "unknown"]
    assert [r.get("stored_valid") for r in rows] == [None, "False", "maybe", ""]


# --- chaos check and the run summary ---------------------------------------------------------
@pytest.mark.parametrize("odd", ["maybe", "False", 1, "", None])
def test_the_summary_a_check_prints_never_says_valid(odd):
    from harness.commands.cli import exit_code, verdict_text

    text = verdict_text({"valid": odd, "violations": 0, "run_dir": "/x"})
    assert text.startswith("UNKNOWN") and text.splitlines()[-1] == "  exit code: 2"
    assert exit_code(odd) == 2
    assert exit_code("true") == 0 and exit_code("false") == 1


# --- the compare battery ----------------------------------------------------------------------
def test_compare_reads_no_safety_count_from_an_undecided_run(tmp_path):
    """A run that proved nothing says nothing about conflicts: the claim of 0 conflicts is
    inconclusive, not confirmed by a 0 that was never checked."""
    from harness.commands.compare import summarize
    from harness.commands.compare.battery import QUICK, measure
    from harness.commands.compare.claims import CONFIRMED, INCONCLUSIVE, ROWS, verdict

    def run(spec):
        return {"valid": "maybe", "violations": 0, "acquires_ok": 500, "stale_writes_accepted": 0,
                "stale_writes_rejected": 0}, [], str(tmp_path)

    m = summarize(measure("etcd", QUICK, str(tmp_path), run=run, say=lambda s: None))["medians"]
    assert m.get("conflicts_per_10k_none") is None and m.get("gc_breaks_at_2ttl") is None
    assert m.get("stale_accepted") is None and m.get("server_clock_violations") is None
    row = next(r for r in ROWS if r.id == "conflicts_per_10k_none")
    assert verdict(row, "etcd", m.get(row.id), m)[1] == INCONCLUSIVE
    gc = next(r for r in ROWS if r.id == "gc_boundary")  # etcd claims to tolerate a 2 x TTL pause
    assert m.get("gc_boundary") is None and verdict(gc, "etcd", m.get("gc_boundary"), m)[1] == INCONCLUSIVE

    def decided(spec):
        return {"valid": True, "violations": 0, "acquires_ok": 500}, [], str(tmp_path)

    m = summarize(measure("etcd", QUICK, str(tmp_path), run=decided, say=lambda s: None))["medians"]
    assert m["conflicts_per_10k_none"] == 0 and verdict(row, "etcd", 0, m)[1] == CONFIRMED


# --- reproduce ----------------------------------------------------------------------------------
def _rows(tmp_path, *matched) -> str:
    p = tmp_path / "rows.jsonl"
    p.write_text("".join(json.dumps({"scenario": "gc-pause", "variant": "fenced", "seed": s, "expected": "safe",
                                     "matched": m, "violations": 0}) + "\n" for s, m in enumerate(matched, 1)))
    return str(p)


@pytest.mark.parametrize("odd", ["yes", "True", 1, "maybe", None])
def test_reproduce_summarize_counts_only_a_true_match(tmp_path, odd):
    from tests.conftest import chaos

    r = chaos("reproduce", "--summarize", _rows(tmp_path, True, odd))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "| gc-pause | fenced | safe | 1-2 | 1/2 |" in r.stdout
    assert "seed 2" in r.stderr and "not true or false" in r.stderr and "Traceback" not in r.stderr


def _run_dir(tmp_path, valid):
    d = tmp_path / "run"
    d.mkdir()
    (d / "spec.json").write_text(json.dumps({"concurrency": 3}))
    (d / "history.jsonl").write_text("")
    summary = {"valid": valid, "violations": 2, "stale_writes_accepted": 0, "stale_writes_rejected": 3,
               "lost_updates": 0, "violations_by_cause": {"overran-paused": 2}}
    (d / "results.json").write_text(json.dumps({"summary": summary, "checkers": {}}))
    return d


@pytest.mark.parametrize("valid, matched", [(True, True), ("maybe", False), ("unknown", False), ("True", False),
                                            (None, False)])
def test_a_safe_scenario_needs_a_valid_run(tmp_path, valid, matched):
    from harness.commands.reproduce import judge

    r = judge("gc-pause", "fenced", 1, _run_dir(tmp_path, valid))
    assert r["matched"] is matched
    if not matched:
        assert any("not VALID" in e for e in r["errors"]), r


def test_reproduce_recheck_of_an_odd_verdict_is_a_miss(tmp_path):
    from tests.conftest import chaos

    d = _run_dir(tmp_path, "maybe")
    p = tmp_path / "rows.jsonl"
    p.write_text(json.dumps({"scenario": "gc-pause", "variant": "fenced", "seed": 1, "expected": "safe",
                             "matched": True, "run_dir": str(d)}) + "\n")
    r = chaos("reproduce", "--summarize", str(p), "--recheck")
    assert r.returncode == 1 and "MISS" in r.stdout and "'maybe'" in r.stdout, r.stdout + r.stderr
    assert "| gc-pause | fenced | safe | 1 | 0/1 |" in r.stdout


# --- explore ------------------------------------------------------------------------------------
@pytest.mark.parametrize("valid", ["maybe", "unknown", None])
def test_an_explore_probe_that_decided_nothing_neither_breaks_nor_holds(monkeypatch, tmp_path, valid):
    from harness.commands.explore import Undecided, probe
    from harness.engine.runner import RunOutcome

    def run(spec, progress=False):
        return RunOutcome(run_dir=tmp_path, summary={"valid": valid, "violations": 0}, results={})

    monkeypatch.setattr("harness.engine.runner.run", run)  # what probe() imports when it runs
    with pytest.raises(Undecided, match="decided nothing"):
        probe("redis", "pause-holder", 1.0, 1, 5.0, str(tmp_path), 1000)
    monkeypatch.setattr("harness.engine.runner.run", lambda spec, progress=False: RunOutcome(
        run_dir=tmp_path, summary={"valid": valid, "violations": 2}, results={}))
    assert probe("redis", "pause-holder", 1.0, 1, 5.0, str(tmp_path), 1000) == (True, 2)  # a violation stands
