"""The compose provider on a real Docker engine (Debian's docker.io, `make compose`): the
servers in containers, every fault applied to them from the host and read back, runs
reaching the local provider's verdicts, and nothing left behind (containers, networks,
namespaces), also after a SIGKILLed run."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from harness.cluster import compose as C
from harness.cluster import compose_file as F
from harness.cluster.kinds import node_names, server_kind
from harness.cluster.provider import Group
from harness.cluster.reaper import proc_state
from harness.cluster.valkey import ValkeyKind, connect
from tests.conftest import ROOT, chaos, eventually

pytestmark = pytest.mark.integration


def _leftovers() -> list[str]:
    """Every container, network and namespace a compose run could leave."""
    with C.Engine(timeout=30) as eng:
        flt = {"label": F.RUN_LABEL}
        ps = [n.lstrip("/") for c in eng.api.containers(all=True, filters=flt) for n in c["Names"]]
        nets = [n["Name"] for n in eng.api.networks(filters=flt)]
    ns = [line.split()[0] for line in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.splitlines()
          if line.startswith("cl-")]
    return [n for n in ps if n != "chaoslock-harness"] + nets + ns


def _have_images(*kinds: str) -> bool:
    with C.Engine(timeout=30) as eng:
        return all(eng.has_image(F.image(k)) for k in kinds)


@pytest.fixture(scope="module")
def engine():
    """A Docker engine with the images: `make compose` installs and starts what is missing."""
    if os.geteuid() != 0:
        pytest.skip("the compose provider needs root (namespaces, iptables, signals to the containers' processes)")
    if C.engine_problem() or not _have_images("valkey", "etcd", "zookeeper"):
        r = subprocess.run(["make", "-s", "compose"], cwd=ROOT, capture_output=True, text=True, timeout=1200)
        assert r.returncode == 0, f"make compose failed: {r.stdout[-1500:]}{r.stderr[-1500:]}"
    assert C.engine_problem() is None
    assert not _leftovers(), f"compose leftovers before the tests: {_leftovers()}"
    yield
    assert not _leftovers()


def test_a_run_id_that_looks_like_a_number_labels_its_containers_as_written(engine, tmp_path):
    """Compose reads YAML 1.2: a run started at 09:06:30 (run id 090630) written bare would
    label its containers 90630, which `chaos cluster down` never matches."""
    servers = [(F.TOPOLOGY[n], server_kind("valkey")) for n in ("n1", "store")]
    f = tmp_path / "run.yml"
    f.write_text(F.render(F.document(servers, run="090630", state=str(tmp_path), faketime=None, people=False), head=False))
    doc = json.loads(C.compose_cli("-f", str(f), "config", "--format", "json").stdout)
    assert {svc["labels"][F.RUN_LABEL] for svc in doc["services"].values()} == {"090630"}
    assert doc["networks"]["chaos"]["labels"][F.RUN_LABEL] == "090630"


def _run(tmp_path, *args: str) -> tuple[dict, subprocess.CompletedProcess]:
    r = chaos("run", "--cluster", "compose", "--store", str(tmp_path), "--json", *args)
    lines = [line for line in r.stdout.splitlines() if line.startswith("{")]
    assert lines and r.returncode in (0, 1), f"exit {r.returncode}; stderr: {r.stderr[-2500:]}"
    assert not _leftovers(), f"the run left {_leftovers()}"
    return json.loads(lines[-1]), r


def _nemesis_ops(run_dir: str) -> list[dict]:
    with open(os.path.join(run_dir, "history.jsonl")) as f:
        ops = [json.loads(line) for line in f]
    return [op for op in ops if op.get("process") == "nemesis" and op.get("type") != "invoke"]


# The local provider's verdicts for the same runs (tests/integration/workloads/test_backends.py,
# test_redlock_run.py, nemesis/): fault-free is valid everywhere; pause-holder breaks the
# single Redis (overran its lease); clock jumps break Redlock (granted early); a partition
# and a kill do not break etcd or ZooKeeper.
RUNS = [  # each backend once, under a fault: its cluster comes up, is faulted and goes down in containers
    # A 3 s pause (1.5 x TTL) lands on a holder's read between 1.5 s and time - recovery - pause.
    # redis and ZooKeeper are campaign tests (the nightly runs them): the suite keeps a clock fault
    # and a network fault in containers, within its 30 minutes
    pytest.param("redis", "pause-holder", 10, 3, False, "overran-paused", id="redis-pause-holder",
                 marks=pytest.mark.campaign),
    pytest.param("redlock", "clock-skew", 10, 7, False, "early-server-clock", id="redlock-clock-skew"),
    pytest.param("etcd", "partition", 10, 5, True, None, id="etcd-partition"),
    pytest.param("zookeeper", "kill", 10, 5, True, None, id="zookeeper-kill", marks=pytest.mark.campaign),
]


@pytest.mark.parametrize("backend,nemesis,seconds,seed,valid,cause", RUNS)
def test_run_reaches_the_local_verdict(engine, tmp_path, backend, nemesis, seconds, seed, valid, cause):
    args = ["--backend", backend, "--nemesis", nemesis, "--time-limit", str(seconds), "--concurrency", "4"]
    if nemesis == "pause-holder":
        args += ["-o", "pause_multiple=1.5"]
    s, r = _run(tmp_path, *args, *(["--seed", str(seed)] if seed else []))
    assert s["valid"] is valid, f"{backend} {nemesis}: {r.stdout[-1500:]}"
    if cause:
        assert cause in s["violations_by_cause"] and not s["unexplained"], s["violations_by_cause"]
    if nemesis != "none":
        done = _nemesis_ops(s["run_dir"])
        assert any(op["type"] == "ok" and op["f"] not in ("heal", "resume", "clock-reset", "restart") for op in done), done
        assert not [op for op in done if op["type"] == "fail"], done
    logs = os.listdir(os.path.join(s["run_dir"], "nodes"))
    assert "store.log" in logs and len(logs) >= 2  # the servers' own logs, copied out of /state


def _cluster(kind_name: str, count: int, clients: int, fake: bool = False) -> C.ComposeCluster:
    import secrets

    kind = server_kind(kind_name)
    return C.ComposeCluster(secrets.token_hex(3), [Group(kind=kind, names=node_names(kind_name, count), fake_clock=fake),
                                                  Group(kind=ValkeyKind(), names=("store",), role="store")], clients=clients)


def test_faults_take_effect_on_containers(engine):
    """Partition (servers and one client), pause, kill and restart with the data kept and the
    cut still in place, and the vDSO clock patch re-applied after the restart, on etcd."""
    from harness.cluster.etcd import EtcdKind

    c = _cluster("etcd", 3, clients=2)
    c.up()
    try:
        assert c.reaches("c1", "e1") and c.reaches("e1", "e2")
        c.partition({"e1": ["e2", "e3"], "e2": ["e1"], "e3": ["e1"], "c1": ["e2"]})
        assert not c.reaches("e1", "e2") and not c.reaches("e3", "e1") and c.reaches("e2", "e3")
        assert not c.reaches("c1", "e2") and c.reaches("c2", "e2") and c.reaches("c1", "e1")
        pids = C._pid_namespace_members(c.pids("e3")[0])
        c.pause("e3")
        assert eventually(lambda: all(proc_state(p) == "T" for p in pids), timeout=5)
        c.resume("e3")
        assert eventually(lambda: not any(proc_state(p) == "T" for p in pids), timeout=5)

        c.heal()
        assert eventually(lambda: c.reaches("e1", "e2") and c.reaches("c1", "e2"), timeout=5)
        kind = EtcdKind()
        import urllib.request

        url = f"http://{c.node('e2').endpoint}/v3/kv/put"
        urllib.request.urlopen(urllib.request.Request(url, data=b'{"key": "a2VwdA==", "value": "eWVz"}'), timeout=5).read()
        # Rules in e1's own namespace, cutting one client only: the cluster stays whole, so the
        # restarted e1 serves (a cut between members could leave it electing forever).
        c.partition({"e1": ["c1"]})
        c.set_clock("e1", 40.0)
        assert abs(c.read_clock_offset("e1") - 40.0) < 1.0
        c.kill("e1")
        assert c.pids("e1") == [] and not kind.node_ready(c.node("e1"))
        c.restart("e1")
        assert not c.reaches("c1", "e1") and c.reaches("c2", "e1"), \
            "the cut must survive the container's restart (its new namespace)"
        assert abs(c.read_clock_offset("e1") - 40.0) < 1.0, "the clock patch must be re-applied after the restart"
        c.heal()
        assert eventually(lambda: c.reaches("c1", "e1"), timeout=5)
        get = f"http://{c.node('e1').endpoint}/v3/kv/range"
        body = eventually(lambda: urllib.request.urlopen(urllib.request.Request(get, data=b'{"key": "a2VwdA=="}'),
                                                         timeout=2).read(), timeout=20)
        assert b"eWVz" in body, "the restarted member must keep its data"
    finally:
        c.down()
    assert not _leftovers()


def test_libfaketime_clock_on_valkey_containers(engine):
    c = _cluster("valkey", 2, clients=1, fake=True)
    c.up()
    try:
        r = connect(c.node("n1"), 1.0)
        r.set("k", "v", px=10_000)
        c.set_clock("n1", 30)
        assert abs([c.read_clock_offset("n1") for _ in range(3)][-1] - 30) < 0.5
        assert r.get("k") is None, "the key must expire early on the node whose clock jumped"
        assert connect(c.node("n2"), 1.0).ping()
    finally:
        c.down()


def test_remove_run_takes_only_what_carries_its_run_label(engine):
    """As `chaos cluster down <id>` does, through the SDK: the run's container (with its
    volumes) and network go; another run's container and an unlabelled one stay."""
    import secrets

    ours, other = secrets.token_hex(3), secrets.token_hex(3)
    made: dict[str, str] = {}
    with C.Engine(timeout=30) as eng:
        try:
            for key, labels in (("ours", {F.RUN_LABEL: ours}), ("other", {F.RUN_LABEL: other}), ("none", {"x": ours})):
                made[key] = eng.api.create_container(F.image("valkey"), command=["true"], labels=labels,
                                                     name=f"chaoslock-sdk-{key}-{ours}")["Id"]
            made["net"] = eng.api.create_network(f"chaoslock-sdk-{ours}", labels={F.RUN_LABEL: ours})["Id"]
            assert {ours, other} <= C.leftover_runs()
            done = C.remove_run(ours)
            assert sorted(done) == sorted([f"container {made['ours'][:12]} (run {ours})",
                                           f"network {made['net'][:12]} (run {ours})"]), done
            left = {c["Id"] for c in eng.api.containers(all=True, filters={"name": f"chaoslock-sdk-.*-{ours}"})}
            assert left == {made["other"], made["none"]}
            assert C.remove_run(ours) == []
        finally:
            for key, iid in made.items():
                (eng.remove_network if key == "net" else eng.remove_container)(iid)


def _running(name: str) -> bool:
    with C.Engine(timeout=30) as eng:
        return eng.running_pid(name) > 0


def test_a_killed_run_is_removed_by_cluster_down_all(engine, tmp_path):
    out = tmp_path / "chaos.out"
    with open(out, "wb") as f:
        p = subprocess.Popen([sys.executable, "-m", "harness", "run", "--cluster", "compose", "--backend", "redis",
                              "--time-limit", "60", "--store", str(tmp_path / "runs")], cwd=ROOT, stdout=f, stderr=f)

    def up() -> bool:
        assert p.poll() is None, f"the run ended early (exit {p.returncode}): {out.read_text()[-1500:]}"
        return _running("chaoslock-n1") and any(line.startswith("cl-") and "-c1" in line for line in subprocess.run(
            ["ip", "netns", "list"], capture_output=True, text=True).stdout.splitlines())
    try:
        try:
            eventually(up, timeout=60)
        except AssertionError as e:
            raise AssertionError(f"{e}; the run said: {out.read_text()[-1500:]}") from None
        time.sleep(1)
    finally:  # the chaos process alone, as the OOM killer would (test_leftovers.py does the same locally)
        p.send_signal(signal.SIGKILL)
        p.wait()
    assert _leftovers()
    r = chaos("cluster", "down", "--all")
    assert r.returncode == 0, r.stderr
    assert not _leftovers(), r.stdout
    assert "container" in r.stdout and "network" in r.stdout


def test_the_harness_image_runs_compose_runs_from_a_container(engine):
    """`docker compose up -d --wait harness`, then `docker compose exec harness chaos run
    --cluster compose ...`: the partition is applied from inside the harness container."""
    if not _have_images("harness"):
        r = subprocess.run(["make", "-s", "compose-harness"], cwd=ROOT, capture_output=True, text=True, timeout=1200)
        assert r.returncode == 0, f"make compose-harness failed: {r.stdout[-1500:]}{r.stderr[-1500:]}"
    base = ["-f", str(F.COMPOSE_FILE), "--profile", "harness"]
    try:
        C.compose_cli(*base, "up", "-d", "--wait", "harness")
        r = C.compose_cli(*base, "exec", "-T", "harness", "chaos", "run", "--cluster", "compose", "--backend", "etcd",
                     "--nemesis", "partition", "--nemesis-interval", "1", "--time-limit", "5", "--seed", "5",
                     "--store", "/tmp/runs", "--json",
                     check=False)
        assert r.returncode == 0, f"{r.stdout[-1500:]}{r.stderr[-1500:]}"
        s = json.loads([line for line in r.stdout.splitlines() if line.startswith("{")][-1])
        assert s["valid"] is True, s
        hist = C.compose_cli(*base, "exec", "-T", "harness", "cat", f"{s['run_dir']}/history.jsonl").stdout
        cuts = [json.loads(line) for line in hist.splitlines() if '"partition"' in line]
        assert any(op["type"] == "ok" for op in cuts), cuts[:4]
    finally:
        C.compose_cli(*base, "rm", "--stop", "--force", "harness", check=False)
    assert not _leftovers()
