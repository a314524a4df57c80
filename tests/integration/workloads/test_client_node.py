"""Node's `redlock` from npm (clients/node-redlock) through the client protocol, on five
real valkey masters: it speaks the protocol, holds without faults, and breaks as Redlock
does when a majority of the masters' clocks jump (issue 15)."""

import json
import shutil

import pytest

from tests.conftest import ROOT, chaos, installed

pytestmark = pytest.mark.integration

CLIENT = ROOT / "clients" / "node-redlock"
CMD = f"node {CLIENT / 'client.js'}"

@pytest.fixture(autouse=True)
def node_client():
    installed(shutil.which("node") is not None and (CLIENT / "node_modules" / "redlock").is_dir(),
              "node or the client's npm packages (clients/node-redlock)")


def test_it_passes_the_conformance_check():
    r = chaos("client-check", CMD, "--servers", "valkey:5")
    assert r.returncode == 0 and r.stdout.count("PASS") == 12, r.stdout + r.stderr


# the pause is a campaign test (the nightly runs it): Redlock's lack of a token is the clock jump's finding too
@pytest.mark.parametrize("nemesis, valid", [("none", True), ("clock-skew", False),
                                            pytest.param("pause-holder", False, marks=pytest.mark.campaign)])
def test_redlock_from_npm_without_faults_and_under_clock_jumps_and_a_gc_pause(tmp_path, nemesis, valid):
    """Redlock has no token, so a paused holder that wakes writes unfenced: unsafe."""
    r = chaos("run", "--client", CMD, "--servers", "valkey:5", "--nemesis", nemesis, "-o", "pause_multiple=2.5",
              "--time-limit", "12" if nemesis != "none" else "6",
              "--seed", "1", "--store", str(tmp_path), "--json")
    s = json.loads(r.stdout.strip().splitlines()[-1])
    assert s["valid"] is valid, r.stderr[-1500:]
    assert s["critical_sections"] >= 5
    expected = {"none": set(), "clock-skew": {"early-server-clock"}, "pause-holder": {"overran-paused"}}[nemesis]
    assert set(s["violations_by_cause"]) == expected, s["violations_by_cause"]
