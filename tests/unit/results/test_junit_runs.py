"""`chaos run --repeat M --junit FILE`: a run an interrupt cut short never counts as a pass, and
the runs it left undone are cases too (errors), so a CI job never reads a partial repeat as green."""

import xml.etree.ElementTree as ET

from results.junit import cases_from_runs, write_junit


def _cases(tmp_path, summaries, of):
    root = ET.parse(write_junit(tmp_path / "j.xml", cases_from_runs(summaries, of=of))).getroot()
    return root, root.findall("testsuite/testcase")


def test_an_interrupted_valid_run_is_not_a_pass_and_undone_runs_are_errors(tmp_path):
    done = {"valid": True, "seed": 1, "backend": "redis", "run_dir": "a"}
    cut = {"valid": True, "seed": 1, "backend": "redis", "run_dir": "b", "interrupted": True}
    root, cases = _cases(tmp_path, [done, cut], of=4)
    assert len(cases) == 4
    assert cases[0].find("error") is None and cases[0].find("failure") is None  # the whole run passes
    assert cases[1].find("error") is not None and "interrupted" in cases[1].find("error").get("message", "") + (cases[1].find("error").text or "")
    assert all(c.find("error") is not None for c in cases[2:])
    assert "not run" in (cases[3].find("error").text or "") + cases[3].find("error").get("message", "")
    assert (root.get("errors"), root.get("failures")) == ("3", "0")


def test_an_interrupted_run_that_proved_a_violation_still_fails(tmp_path):
    cut = {"valid": False, "seed": 1, "backend": "redis", "run_dir": "b", "interrupted": True, "violations": 2}
    root, cases = _cases(tmp_path, [cut], of=1)
    assert cases[0].find("failure") is not None and root.get("failures") == "1"
