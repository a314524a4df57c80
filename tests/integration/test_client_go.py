"""The Go reference client (clients/go-etcd: etcd's own clientv3/concurrency Mutex) against a
real etcd cluster over the client protocol: it passes the conformance check, a fault-free run is
valid, and under pause-holder it reaches the in-process etcd verdicts (etcd-lock-pause): unsafe
without fencing, data safe with its token (the key's create revision) (issue 15)."""

import json
import shutil
import subprocess

import pytest

from tests.conftest import ROOT, chaos, installed

pytestmark = pytest.mark.integration

BINARY = ROOT / "clients/go-etcd/bin/go-etcd"


@pytest.fixture(scope="module")
def client():
    installed(shutil.which("go") is not None or BINARY.exists(),
              "Go, and so clients/go-etcd (scripts/clients/go-etcd.sh installs golang-go and golang-etcd-server-dev "
              "and builds it),")
    if shutil.which("go") is not None:  # up to date in a few ms; rebuilds after main.go changed
        r = subprocess.run([str(ROOT / "scripts/clients/go-etcd.sh")], check=False, capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, f"scripts/clients/go-etcd.sh failed: {r.stdout}{r.stderr}"
    assert BINARY.exists()
    return str(BINARY)


def run(tmp_path, client, *args):
    r = chaos("run", "--client", client, "--servers", "etcd:3", *args, "--store", str(tmp_path), "--json",
              "--seed", "1", timeout=120)
    assert "Traceback" not in r.stderr + r.stdout, r.stderr[-2000:]
    assert r.stdout.strip(), r.stderr[-2000:]
    return r, json.loads(r.stdout.strip().splitlines()[-1])


def test_the_go_client_passes_the_conformance_check(client):
    r = chaos("client-check", client, "--servers", "etcd:3", timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("PASS") == 10 and "all steps passed" in r.stdout


def test_the_go_client_is_valid_without_faults(tmp_path, client):
    r, s = run(tmp_path, client, "--time-limit", "5", "--concurrency", "3")
    assert s["valid"] is True and s["critical_sections"] >= 2, r.stderr[-1000:]


@pytest.mark.parametrize("fencing, valid", [([], False), (["--fencing"], True)])
def test_the_go_client_reaches_the_in_process_etcd_verdicts_under_a_gc_pause(tmp_path, client, fencing, valid):
    r, s = run(tmp_path, client, "-n", "pause-holder", "-o", "pause_multiple=3", "--time-limit", "12", *fencing)
    assert s["valid"] is valid and s["violations"] >= 1, r.stderr[-1000:]
    assert set(s["violations_by_cause"]) == {"overran-paused"}, s["violations_by_cause"]
