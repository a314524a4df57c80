"""`chaos cluster up/status/down`, teardown after a SIGKILLed run, and refusals (issue 3)."""

import os
import signal
import subprocess
import sys

import pytest

from harness.cluster.reaper import processes
from tests.conftest import OWNER, ROOT, chaos, eventually, need_root_netns

pytestmark = pytest.mark.integration


def ours() -> dict[str, str]:
    """Everything of chaoslock visible from the root namespace."""
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    rules = subprocess.run(["iptables-save"], capture_output=True, text=True).stdout
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return {"netns": "\n".join(line for line in ns.splitlines() if line.startswith("cl-")),
            "links": "\n".join(line for line in links.splitlines() if ": clb" in line or ": clv" in line),
            "rules": "\n".join(line for line in rules.splitlines() if "chaoslock" in line),
            "procs": "\n".join(line for line in ps.splitlines() if "chaos-run=" in line or "CHAOSLOCK" in line)}


def new(now: dict[str, str], before: dict[str, str]) -> dict[str, set[str]]:
    """What `ours()` shows now that it did not show before, by kind."""
    return {k: set(now[k].splitlines()) - set(before[k].splitlines()) for k in now}


def nothing_new_since(before: dict[str, str]):
    """A check for eventually(): passes once `ours()` shows nothing `before` did not."""
    def check() -> bool:
        left = {k: sorted(v) for k, v in new(ours(), before).items() if v}
        assert not left, f"left behind: {left}"
        return True
    return check


def run_id_from(out: str) -> str:
    return out.split("cluster ", 1)[1].split()[0]


@pytest.mark.skipif(need_root_netns() is not None, reason=str(need_root_netns()))
def test_up_status_down_leaves_nothing():
    before = ours()
    up = chaos("cluster", "up", "--backend", "redlock")
    assert up.returncode == 0, up.stderr
    rid = run_id_from(up.stdout)
    assert "198.18." in up.stdout or "198.19." in up.stdout
    status = chaos("cluster", "status")
    assert f"{rid}: 6/6 nodes alive" in status.stdout
    down = chaos("cluster", "down", rid)
    assert down.returncode == 0 and rid in down.stdout
    eventually(nothing_new_since(before), timeout=10)


@pytest.mark.skipif(need_root_netns() is not None, reason=str(need_root_netns()))
def test_down_all_after_a_sigkilled_cluster_up():
    before = ours()
    p = subprocess.Popen([sys.executable, "-m", "harness", "cluster", "up", "--backend", "etcd"], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Kill it as soon as its namespaces and a first server exist: before the cluster is ready.
    eventually(lambda: p.poll() is not None or (new(ours(), before)["netns"] and processes(owner=OWNER)),
               timeout=60, step=0.02)
    assert p.poll() is None, f"cluster up ended before it could be killed: {p.communicate()[1][-2000:]}"
    p.send_signal(signal.SIGKILL)
    p.wait(10)
    assert any(new(ours(), before).values()), "the killed run should have left something to clean"
    r = chaos("cluster", "down", "--all")
    assert r.returncode == 0, r.stderr
    eventually(nothing_new_since(before), timeout=10)  # --all may remove older leftovers too


def test_not_root_is_refused_with_one_sentence(monkeypatch, capsys, tmp_path):
    from harness.commands import cli
    from harness.cluster import netns

    monkeypatch.setattr(netns, "_available", False)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(SystemExit) as e:
        cli.main(["run", "--netns", "--time-limit", "2", "--store", str(tmp_path)])
    assert e.value.code == 254
    assert "need root" in capsys.readouterr().err


def test_unknown_backend_for_cluster_up():
    r = chaos("cluster", "up", "--backend", "etcdd")
    assert r.returncode == 254 and "unknown backend 'etcdd'" in r.stderr


def test_missing_etcd_binary_names_the_package(monkeypatch, tmp_path):
    env_path = os.environ["PATH"]
    monkeypatch.setenv("PATH", "/nonexistent")
    try:
        r = subprocess.run([sys.executable, "-m", "harness", "run", "--backend", "etcd", "--time-limit", "2",
                            "--no-netns", "--store", str(tmp_path)], capture_output=True, text=True, cwd=ROOT,
                           env=dict(os.environ, PATH="/nonexistent"), timeout=60)
    finally:
        monkeypatch.setenv("PATH", env_path)
    assert r.returncode == 254 and "etcd-server" in r.stderr, r.stderr
