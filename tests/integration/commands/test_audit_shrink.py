"""One short `chaos audit` in the suite, end to end on real valkey: a client that sets its key
without a TTL (tests/clients/liar.py no-ttl) under the kill-holder scenario alone fails "expiry
after the holder's death" (exit 1) with its run dir, cause and replay command, and the audit
shrinks that run: the smallest schedule whose replays still fail the row (one kill), its
reproduce rate and the command that replays it; the card (audit.json, audit.html, JUnit) says
all of it. About 1.5 minutes on 2 cores (a run and a few replays of 13 s workloads)."""

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.conftest import ROOT, chaos

pytestmark = pytest.mark.integration

LIAR = f"python3 {ROOT / 'tests/clients/liar.py'} no-ttl"


def test_a_lock_that_outlives_its_dead_holder_fails_and_is_shrunk_to_one_kill(tmp_path):
    junit = tmp_path / "audit.xml"
    r = chaos("audit", "--client", LIAR, "--servers", "valkey:1", "--ttl", "1000", "--acquire-timeout", "1",
              "--scenarios", "kill-holder", "--budget", "0", "--shrink", "1.5", "--store", str(tmp_path),
              "--junit", str(junit), "--json", timeout=600)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr[-3000:]
    card = json.loads(r.stdout.strip().splitlines()[-1])
    rows = {row["promise"]: row for row in card["rows"]}
    assert rows["outlived"]["status"] == "FAIL", rows["outlived"]
    f = rows["outlived"]["failures"][0]
    assert f["scenario"] == "kill-holder" and "outlived its holder" in f["cause"], f
    sh = f["shrunk"]
    assert sh["faults"] == 1 <= sh["of_faults"] and sh["schedule"].count("kill") == 1, sh
    hits, _, n = sh["reproduced"].partition(" of ")
    assert 1 <= int(hits) <= int(n) == 2, sh  # kept at one of two replays, then confirmed to two
    assert sh["replay"].startswith("chaos run --replay ") and Path(sh["run_dir"]).is_dir()
    assert json.loads((Path(f["run_dir"]) / "shrink.json").read_text())["findings"] == ["audit:outlived"]
    assert "shrunk:" in r.stderr and "replay the smallest:" in r.stderr  # the terminal card (stderr with --json)
    page = next((tmp_path / "audit").glob("*/audit.html")).read_text()
    assert "shrunk to <b>" in page
    case = next(c for c in ET.parse(junit).getroot().iter("testcase") if c.get("name") == "expiry after the holder's death")
    assert "replay the smallest:" in case.find("failure").text
