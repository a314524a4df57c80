"""The Java reference client (clients/java-curator: Curator's InterProcessMutex) against a real
ZooKeeper ensemble: it speaks the protocol, is valid without faults, and under a GC pause past its
session it is unsafe without fencing and safe with the czxid as token (issue 15)."""

import json
from pathlib import Path

import pytest

from tests.conftest import ROOT, chaos

pytestmark = pytest.mark.integration

LAUNCHER = ROOT / "clients/java-curator/bin/java-curator"
if not LAUNCHER.exists():
    pytestmark = [pytestmark, pytest.mark.skip(reason=f"{LAUNCHER.relative_to(ROOT)} is not built: "
                                                      f"run scripts/clients/java-curator.sh")]


def run(tmp_path, *args):
    r = chaos("run", "--client", str(LAUNCHER), "--servers", "zookeeper:3", *args,
              "--store", str(tmp_path), "--json", "--seed", "1")
    assert "Traceback" not in r.stderr + r.stdout, r.stderr[-2000:]
    assert r.stdout.strip(), r.stderr[-2000:]
    return r, json.loads(r.stdout.strip().splitlines()[-1])


def test_curator_passes_the_conformance_check():
    r = chaos("client-check", str(LAUNCHER), "--servers", "zookeeper:3")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("PASS") == 10 and "all steps passed" in r.stdout


def test_curator_is_valid_without_faults(tmp_path):
    r, s = run(tmp_path, "--time-limit", "5", "--concurrency", "3")
    assert s["valid"] is True and s["critical_sections"] >= 1, r.stderr[-1000:]


@pytest.mark.parametrize("fencing, valid", [([], False), (["--fencing"], True)])
def test_curator_under_a_pause_past_its_session(tmp_path, fencing, valid):
    """Paused 2.5 x the 1 s TTL with a 1 s session: ZooKeeper deletes the lock node, the next
    client takes the lock, the paused one wakes, writes, and its release() still returns ok."""
    r, s = run(tmp_path, "-n", "pause-holder", "-o", "pause_multiple=2.5", "-o", "session_timeout_ms=1000",
               "--ttl", "1000", "--time-limit", "9", "--concurrency", "3", *fencing)
    assert s["valid"] is valid and s["violations"] >= 1, r.stderr[-1000:]
    ops = [json.loads(line) for line in Path(s["run_dir"], "history.jsonl").read_text().splitlines()]
    paused, = [o["value"]["process"] for o in ops if o["f"] == "pause-holder" and o["type"] == "ok"]
    resumed = next(i for i, o in enumerate(ops) if o["f"] == "resume-holder" and o["type"] == "ok")
    release = next(o for o in ops[resumed:] if o["process"] == paused and o["f"] == "release" and o["type"] != "invoke")
    assert release["type"] == "ok", f"Curator's release() after its node was deleted: {release}"
    assert set(s["violations_by_cause"]) == {"overran-paused"}, s["violations_by_cause"]
    assert s["releases_ok_after_lease_lost"] >= 1, "the report shows that Curator's release() cannot tell"
