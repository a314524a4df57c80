"""The swarm provider (`--cluster swarm`) on the real 3-engine swarm of `make swarm`: the
servers placed on different engines, every fault applied through the engines and read back,
runs reaching the local provider's verdicts on the same seeds, and nothing left on any engine
after a run, nor after a SIGKILLed run once `chaos cluster down --all` ran.

Campaign (the nightly's swarm job): the first `make swarm` on a clean machine loads about 2 GB of
images into each engine (2 min), more than the suite's 30 minutes can spare."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.cluster.compose_file import RUN_LABEL
from tests.conftest import ROOT, chaos

pytestmark = [pytest.mark.integration, pytest.mark.campaign]

SWARM = str(ROOT / "scripts" / "swarm" / "swarm.sh")
ENGINES = ("e1", "e2", "e3")


def d(engine: str, *args: str) -> str:
    r = subprocess.run(["docker", "-H", f"unix:///run/chaoslock-swarm/{engine}.sock", *args], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def ours_on_engines() -> list[str]:
    """Every service, container and iptables rule of any run on any engine of the lab."""
    out = [f"service {l}" for l in d("e1", "service", "ls", "-q", "--filter", f"label={RUN_LABEL}").split()]
    for e in ENGINES:
        out += [f"container {l} on {e}" for l in d(e, "ps", "-aq", "--filter", f"label={RUN_LABEL}").split()]
        rules = subprocess.run(["ip", "netns", "exec", f"chswarm-{e}", "iptables-save"], capture_output=True, text=True).stdout
        out += [f"rule on {e}: {l}" for l in rules.splitlines() if "--comment chaoslock-" in l]
    out += [l for l in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.splitlines()
            if l.startswith("cl-")]
    return out


@pytest.fixture(scope="module")
def lab():
    """The lab swarm: the one that is up, or one this module makes and removes."""
    if shutil.which("dockerd") is None:
        pytest.skip("no Docker engine is installed here; `make swarm` installs and makes one")
    made = not Path("/run/chaoslock-swarm/nodes").exists()
    if made:
        subprocess.run(["bash", SWARM, "up", "3"], check=True, timeout=900, capture_output=True)
    try:
        assert ours_on_engines() == []
        yield
    finally:
        if made:
            subprocess.run(["bash", SWARM, "down"], timeout=300, capture_output=True)


def _run(tmp_path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    r = chaos("run", "--cluster", "swarm", *args, "--store", str(tmp_path), "--json", timeout=600)
    lines = [l for l in r.stdout.splitlines() if l.startswith("{")]
    assert lines, r.stderr[-3000:]
    return r, json.loads(lines[-1])


def _placement(summary: dict) -> dict[str, str]:
    text = (Path(summary["run_dir"]) / "nodes" / "placement.txt").read_text()
    return {l.split()[0]: l.split()[2] for l in text.splitlines()}


def test_redlock_under_clock_jumps_breaks_on_the_swarm_as_it_does_locally(lab, tmp_path):
    """The default chaos test (make chaos's seed), its five valkey masters spread over the three
    engines: mutual exclusion broken by masters whose clocks jumped (granted early), exit 1. An
    engine that lacks the image gets it from one that has it, before anything starts."""
    d("e3", "rmi", "chaoslock-valkey:9.1.2")
    r, s = _run(tmp_path, "--backend", "redlock", "--nemesis", "clock-skew", "--time-limit", "20", "--concurrency", "5",
                "--seed", "7")
    assert r.returncode == 1 and s["valid"] is False and s["violations"] > 0, s
    assert "loading the image chaoslock-valkey:9.1.2 into engine e3 from this machine" in r.stderr, r.stderr[-1000:]
    local = chaos("run", "--backend", "redlock", "--nemesis", "clock-skew", "--time-limit", "20", "--concurrency", "5",
                  "--seed", "7", "--store", str(tmp_path / "local"), timeout=600)
    assert local.returncode == r.returncode, local.stdout[-1500:]
    assert set(s["violations_by_cause"]) <= {"early-server-clock"} and s["unexplained"] == 0, s["violations_by_cause"]
    placed = _placement(s)
    assert {placed[f"n{i}"] for i in range(1, 6)} == set(ENGINES), placed
    assert ours_on_engines() == []


def test_etcd_with_fencing_holds_under_partitions_and_paused_holders(lab, tmp_path):
    r, s = _run(tmp_path, "--backend", "etcd", "--nemesis", "partition,pause-holder", "--fencing", "--time-limit", "20",
                "--seed", "7")
    # a holder paused past its lease overlaps the next (violations the pause explains); its stale
    # writes are refused by the token: valid, as on the local provider with the same seed
    assert r.returncode == 0 and s["valid"] is True and s["lost_updates"] == 0 and s["stale_writes_accepted"] == 0, s
    assert s["unexplained"] == 0 and s["acquires_ok"] >= 5, s
    local = chaos("run", "--backend", "etcd", "--nemesis", "partition,pause-holder", "--fencing", "--time-limit", "20",
                  "--seed", "7", "--store", str(tmp_path / "local"), timeout=600)
    assert local.returncode == r.returncode, local.stdout[-1500:]
    placed = _placement(s)
    assert sorted(placed[n] for n in ("e1", "e2", "e3")) == list(ENGINES), placed  # one member per engine
    history = [json.loads(l) for l in open(Path(s["run_dir"]) / "history.jsonl")]
    assert any(o["f"] == "partition" and o["type"] == "ok" for o in history if o["process"] == "nemesis")
    assert ours_on_engines() == []


def test_every_fault_lands_through_the_engines_and_is_read_back(lab):
    """Partitions between servers and of one client, slow links of a client and between servers
    (delay and loss), pause, kill and restart, a clock move: each applied through the engines' API
    (or the client's namespace) and read back."""
    from harness.cluster.kinds import node_names, server_kind
    from harness.cluster.provider import Group
    from harness.cluster.swarm import SwarmCluster
    from harness.cluster.swarm_engines import read_nodes
    from harness.cluster.valkey import ValkeyKind
    from harness.core.contracts.cluster import RUN_ID

    import secrets

    run_id = secrets.token_hex(3)
    assert RUN_ID.fullmatch(run_id)
    kind = server_kind("valkey", {})
    groups = [Group(kind=kind, names=node_names("valkey", 3), fake_clock=True),
              Group(kind=ValkeyKind(), names=("store",), role="store")]
    c = SwarmCluster(run_id, groups, read_nodes("/run/chaoslock-swarm/nodes"), clients=2)
    c.up()
    try:
        assert {c.placed[n].name for n in ("n1", "n2", "n3")} == set(ENGINES)
        assert c.reaches("n1", "n2") and c.reaches("c1", "n1")
        c.partition({"n1": ["n2"], "n2": ["n1"], "c1": ["n3"], "n3": ["c1"]})
        assert not c.reaches("n1", "n2") and not c.reaches("n2", "n1")
        assert c.reaches("n1", "n3") and c.reaches("n2", "n3") and c.reaches("n1", "store")
        assert not c.reaches("c1", "n3") and c.reaches("c2", "n3") and c.reaches("c1", "n1")
        c.heal()
        assert c.reaches("n1", "n2") and c.reaches("c1", "n3")
        from harness.core.contracts.cluster import Shape

        got = c.shape_links([("c1", "n1"), ("c1", "n2")], Shape(delay_ms=200), seed=1)
        assert got["rtt_after_ms"] - got["rtt_before_ms"] >= 100, got  # a connect waits out the delay once
        c.unshape_links()
        got = c.shape_links([("n1", "n2")], Shape(delay_ms=200), seed=1)  # in e1's host namespace, by its helper
        assert got["rtt_after_ms"] - got["rtt_before_ms"] >= 100, got
        assert c.reaches("n1", "n3") and c.reaches("n2", "n1")  # other links untouched
        c.unshape_links()
        again = c.shape_links([("n1", "n2")], Shape(loss=1.0), seed=1)
        assert again["connects_failed"] == "40/40", again
        c.unshape_links()
        assert c.reaches("n1", "n2")
        c.set_clock("n2", 30.0)
        assert abs(c.read_clock_offset("n2") - 30.0) < 1.0 and abs(c.read_clock_offset("n1")) < 1.0
        c.set_clock("n2", 0.0)
        c.pause("n3")
        from harness.cluster.valkey import connect

        with pytest.raises(Exception):
            connect(c.node("n3"), 0.5).ping()  # frozen: accepts, never answers
        c.resume("n3")
        assert connect(c.node("n3"), 2).ping()
        c.kill("n3")
        assert not c.reaches("c1", "n3")
        c.restart("n3")
        assert c.reaches("c1", "n3") and connect(c.node("n3"), 2).ping()
    finally:
        c.down()
    assert ours_on_engines() == []


RELAY = "python3 clients/python-relay/relay.py --backend etcd"  # the etcd design as a client process


def test_clients_on_the_swarm_are_paused_and_killed_where_they_run(lab, tmp_path):
    """-o clients_on=spread: client host cI's pod on engine eI, each worker's client process in a
    container of its own there. The etcd design keeps its lease alive from a thread of the client
    process: a pause of the worker alone (on this machine) would leave that thread renewing and
    the lock never lost. The pause reaches the container (frozen by its engine), so the lease runs
    out and the next holder overlaps the paused one: violations the pause explains, exit 1, as on
    the local provider with the same seed. kill-holder kills the holder's container through its
    engine; with --fencing the run is valid."""
    common = ["--client", RELAY, "--servers", "etcd:3", "--concurrency", "3", "--time-limit", "20", "--seed", "7"]
    r, s = _run(tmp_path / "pause", *common, "--nemesis", "pause-holder", "-o", "clients_on=spread")
    assert r.returncode == 1 and s["violations"] > 0 and s["unexplained"] == 0, s
    assert set(s["violations_by_cause"]) == {"overran-paused"}, s["violations_by_cause"]
    local = chaos("run", *common, "--nemesis", "pause-holder", "--store", str(tmp_path / "local"), timeout=600)
    assert local.returncode == r.returncode, local.stdout[-1500:]
    placed = _placement(s)
    assert [placed[c] for c in ("c1", "c2", "c3")] == list(ENGINES), placed
    assert ours_on_engines() == []

    r, s = _run(tmp_path / "kill", *common, "--nemesis", "kill-holder", "--fencing", "-o", "clients_on=manager")
    assert r.returncode == 0 and s["valid"] is True and s["lost_updates"] == 0, s
    kills = [o for o in map(json.loads, open(Path(s["run_dir"]) / "history.jsonl"))
             if o["process"] == "nemesis" and o["f"] == "kill-holder" and o["type"] == "ok"]
    assert kills and all(len(o["value"]["containers"]) == 1 and o["value"]["gone"] for o in kills), kills
    assert {_placement(s)[c] for c in ("c1", "c2", "c3")} == {"e1"}
    assert ours_on_engines() == []


def test_a_client_on_the_swarm_is_cut_paused_and_killed_through_its_engine(lab):
    """The pod's network cut from one server (rules in the pod, read back from it), the other
    client untouched; a worker's client container paused, resumed and killed by its engine."""
    import secrets

    from harness.cluster.kinds import node_names, server_kind
    from harness.cluster.provider import Group
    from harness.cluster.swarm import SwarmCluster
    from harness.cluster.swarm_engines import read_nodes
    from harness.cluster.valkey import ValkeyKind

    run_id = secrets.token_hex(3)
    groups = [Group(kind=server_kind("valkey", {}), names=node_names("valkey", 3)),
              Group(kind=ValkeyKind(), names=("store",), role="store")]
    c = SwarmCluster(run_id, groups, read_nodes("/run/chaoslock-swarm/nodes"), clients=2, clients_on="spread")
    c.up()
    proc = None
    try:
        assert c.reaches("c1", "n1") and c.reaches("c2", "n1")
        c.partition({"c1": ["n1"], "n1": ["c1"]})
        assert not c.reaches("c1", "n1") and c.reaches("c1", "n2") and c.reaches("c2", "n1")
        c.cut_one_way("c2", ["n3"], "request")
        assert not c.reaches("c2", "n3") and c.reaches("c1", "n3")
        c.heal()
        assert c.reaches("c1", "n1") and c.reaches("c2", "n3")
        from harness.core.contracts.cluster import Shape

        got = c.shape_links([("c2", "n1"), ("c2", "n2")], Shape(delay_ms=200), seed=1)  # in c2's pod, on e2
        assert got["rtt_after_ms"] - got["rtt_before_ms"] >= 100 and got["probe"] == "c2->n1:21000", got
        c.unshape_links()
        proc = subprocess.Popen([*c.client(1).wrap, "sleep", "60"], stdin=subprocess.PIPE)

        def state() -> list[str]:
            return d("e2", "ps", "-a", "--filter", f"label=chaoslock.worker=1", "--filter", f"label={RUN_LABEL}={run_id}",
                     "--format", "{{.State}}").split()

        deadline = time.monotonic() + 30
        while state() != ["running"] and time.monotonic() < deadline:
            time.sleep(0.2)
        assert state() == ["running"]
        c.pause_client(1)
        assert state() == ["paused"]
        c.resume_client(1)
        assert state() == ["running"]
        c.pause_client(1)
        assert len(c.kill_client(1)["containers"]) == 1  # a paused container too
        assert state() in ([], ["exited"])
    finally:
        if proc is not None:
            proc.kill()
        c.down()
    assert ours_on_engines() == []


@pytest.mark.parametrize("args, left", [
    (["--backend", "etcd", "--nemesis", "partition"], "--comment chaoslock-"),
    (["--client", RELAY, "--servers", "etcd:3", "--nemesis", "partition-client", "-o", "clients_on=spread"], "pod"),
])
def test_a_sigkilled_run_leaves_what_cluster_down_all_removes_on_every_engine(lab, tmp_path, args, left):
    p = subprocess.Popen([sys.executable, "-m", "harness", "run", "--cluster", "swarm", *args, "--time-limit", "120",
                          "--seed", "3", "--store", str(tmp_path)], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:  # until the stack runs and a cut is in place (in a client pod)
            rules = "".join(subprocess.run(["ip", "netns", "exec", f"chswarm-{e}", "iptables-save"], capture_output=True,
                                           text=True).stdout for e in ENGINES)
            if left == "pod":
                rules = "".join(subprocess.run(["docker", "-H", f"unix:///run/chaoslock-swarm/{e}.sock", "exec", pod,
                                                "iptables-save"], capture_output=True, text=True).stdout
                                for e in ENGINES for pod in d(e, "ps", "-q", "--filter", "label=chaoslock.client").split())
            if "--comment chaoslock-" in rules:
                break
            assert p.poll() is None, p.communicate()[1][-2000:]
            time.sleep(0.5)
        else:
            pytest.fail("no cut appeared on any engine within 180 s")
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate(timeout=30)
        assert ours_on_engines() != []  # the killed run left its stack, containers and a cut
        r = chaos("cluster", "down", "--all", timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        assert ours_on_engines() == [], r.stdout[-2000:]
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
