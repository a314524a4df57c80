"""`chaos reproduce` and `chaos explore` end to end on real valkey servers.

gc-pause, both variants, one seed each: without fencing the paused holder's late write
lands (two holders, data broken); with fencing the store refuses it. The campaign leaves
rows.jsonl and summary.md behind, and --summarize --recheck judges its runs again. explore with no
bisection steps probes its two ends: a pause of 3 x TTL must break mutual exclusion. The
known results of the aimed client faults and slow links, one short run each, stay safe the
way their designs say they must.
"""

import json
import re

import pytest

from tests.conftest import chaos

pytestmark = pytest.mark.integration


def test_gc_pause_reaches_both_expected_verdicts(tmp_path):
    r = chaos("reproduce", "gc-pause", "--seeds", "1", "--time-limit", "12", "--store", str(tmp_path), "--json")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    by_variant = {row["variant"]: row for row in rows}
    assert set(by_variant) == {"nofence", "fenced"} and all(row["matched"] for row in rows)
    unsafe, safe = by_variant["nofence"], by_variant["fenced"]
    assert unsafe["violations"] >= 1 and (unsafe["stale_accepted"] >= 1 or unsafe["lost"] >= 1)
    assert set(unsafe["causes"]) == {"overran-paused"} and set(safe["causes"]) == {"overran-paused"}, rows
    assert safe["stale_rejected"] >= 1 and safe["stale_accepted"] == 0 and safe["lost"] == 0
    assert unsafe["first_violation_s"] is not None and unsafe["first_violation_s"] > 0
    assert re.search(r"MATCH .*\n.*MATCH", r.stdout)

    (campaign,) = (tmp_path / "reproduce").iterdir()
    assert len((campaign / "rows.jsonl").read_text().splitlines()) == 2
    assert "| gc-pause | fenced | safe | 1 | 1/1 |" in (campaign / "summary.md").read_text()
    again = chaos("reproduce", "--summarize", str(campaign), "--recheck")  # judges the stored runs anew
    assert again.returncode == 0 and "| gc-pause | nofence | unsafe | 1 | 1/1 |" in again.stdout
    assert again.stdout.count("MATCH") == 2


def test_explore_finds_a_long_pause_breaks_redis(tmp_path):
    r = chaos("explore", "--backend", "redis", "--fault", "pause-holder", "--lo", "0.25", "--hi", "3",
              "--steps", "0", "--time-limit", "10", "--store", str(tmp_path))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert re.search(r"pause-holder 3\.000 x TTL \(6\.00 s\): BREAKS \([1-9]\d* violations\)", r.stdout), r.stdout
    assert re.search(r"boundary: mutual exclusion breaks from about 3\.000 x TTL|breaks already at 0\.25", r.stdout)


AIMED = ("zk-waiter-session-expiry", "redis-holder-killed", "redlock-slow-acquire", "etcd-waiter-cut-off",
         "redis-release-cut", "zk-waiter-killed")
# The suite reproduces two of them (a session design and a lease design, each under its own aimed
# fault); all six are a campaign test (the nightly runs it), and the faults themselves each have
# their own test in tests/integration/nemesis/.
SUITE_AIMED = ("zk-waiter-session-expiry", "redis-holder-killed")


@pytest.mark.parametrize("scenarios", [pytest.param(SUITE_AIMED, id="two"),
                                       pytest.param(AIMED, id="all", marks=pytest.mark.campaign)])
def test_the_aimed_faults_known_results_are_safe_as_their_designs_say(tmp_path, scenarios):
    r = chaos("reproduce", *scenarios, "--seeds", "1", "--time-limit", "14", "--store", str(tmp_path), "--json")
    rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert [row["scenario"] for row in rows] == list(scenarios) and all(row["matched"] for row in rows), rows
    assert all(row["violations"] == 0 and row["expected"] == "safe" for row in rows), rows
