"""How the nemesis tests drive a nemesis and look at what it did: nemesis ops and contexts,
reachability from inside a namespace, rules and stopped tasks left behind, the clean state
every test ends in, and `chaos run` for the faults that need a workload."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from harness.cluster import etcd, zookeeper
from harness.cluster.local import LocalCluster
from harness.cluster.reaper import proc_state
from harness.core.history import Op, now_ns
from harness.core.spec import TestSpec
from harness.core.contracts.nemesis import NemesisContext
from tests.conftest import chaos, eventually, need_root_netns

_NO_NETNS = need_root_netns()
# Every module here: integration, and skipped (saying why) without root and namespaces.
MARKS = [pytest.mark.integration, pytest.mark.skipif(_NO_NETNS is not None, reason=_NO_NETNS or "")]


def on(kind: str):
    """Class decorator: its tests share the package's cluster of this server kind."""
    return pytest.mark.parametrize("cluster", [kind], indirect=True)


def figure(name: str, text: str) -> None:
    print(f"\n[figure] {name}: {text}", flush=True)


def inv(f: str, value) -> Op:
    return Op(time_ns=now_ns(), process="nemesis", type="invoke", f=f, value=value)


def ctx(cluster: LocalCluster, concurrency: int = 1, **options) -> NemesisContext:
    return NemesisContext(spec=TestSpec(concurrency=concurrency, options=options), cluster=cluster)


def namespaces(cluster: LocalCluster) -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [l.split()[0] for l in out.splitlines() if l.startswith(f"cl-{cluster.run_id}-")]


def chaoslock_rules(cluster: LocalCluster) -> dict[str, list[str]]:
    """Every iptables rule carrying a chaoslock comment, per namespace of this run."""
    found = {}
    for ns in namespaces(cluster):
        save = subprocess.run(["ip", "netns", "exec", ns, "iptables-save"], capture_output=True, text=True).stdout
        lines = [l for l in save.splitlines() if "chaoslock" in l]
        if lines:
            found[ns] = lines
    return found


def task_states(pid: int) -> set[str]:
    """The state of every thread of the process (SIGSTOP reaches them one by one)."""
    states = {proc_state(int(task.name)) for task in Path(f"/proc/{pid}/task").iterdir()}
    return states - {None}


def is_stopped(pid: int, timeout: float = 1.0) -> bool:
    """SIGSTOP is delivered asynchronously: wait (briefly) until a task shows state T."""
    try:
        eventually(lambda: "T" in task_states(pid), timeout=timeout, step=0.01)
    except AssertionError:
        return False
    return True


def stopped(cluster: LocalCluster) -> list[str]:
    """Nodes with any task in state T (SIGSTOPped)."""
    return [n.name for n in cluster.nodes for pid in cluster.pids(n.name) if "T" in task_states(pid)]


REACH = r"""
import json, socket, sys
from concurrent.futures import ThreadPoolExecutor
def one(t):
    host, port, ping = t
    try:
        with socket.create_connection((host, port), timeout=0.6) as s:
            if not ping:
                return True
            s.settimeout(0.6); s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False
ts = json.loads(sys.argv[1])
with ThreadPoolExecutor(len(ts)) as ex:
    print(json.dumps(list(ex.map(one, ts))))
"""


def reach(ns: str, targets: list[tuple[str, int, bool]]) -> list[bool]:
    """From inside namespace `ns`: which (host, port, redis-ping?) targets answer."""
    r = subprocess.run(["ip", "netns", "exec", ns, "python3", "-c", REACH, json.dumps(targets)],
                       capture_output=True, text=True, timeout=20)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def lock_nodes(cluster: LocalCluster):
    return [n for n in cluster.nodes if n.role == "lock"]


def clock_tol(kind: str) -> float:
    return 1.5 if kind == "etcd" else 0.5


def assert_clean(cluster: LocalCluster) -> None:
    """(c): no rule, no stopped task, every node alive and serving, clocks back."""
    assert chaoslock_rules(cluster) == {}
    assert stopped(cluster) == []
    for n in lock_nodes(cluster):
        assert cluster.pids(n.name), f"{n.name} is not running"
        kind = cluster._kinds[n.name]
        eventually(lambda: kind.node_ready(n), timeout=25)
        if n.kind == "valkey" and not n.clock_file:
            continue
        off = cluster.read_clock_offset(n.name)
        assert abs(off) <= clock_tol(n.kind), f"{n.name} clock is off by {off:+.3f}s"


def clock_samples(cluster: LocalCluster, name: str, seconds: float, every: float = 0.03) -> list[float]:
    """The node's clock offset, read back every `every` seconds for `seconds`."""
    samples, t = [], time.monotonic()
    while time.monotonic() - t < seconds:
        samples.append(cluster.read_clock_offset(name))
        time.sleep(every)
    return samples


def need_timewarp():
    from harness.cluster import timewarp

    reason = timewarp.supported()
    if reason:
        pytest.skip(reason)


def member_id(node) -> str:
    return etcd.status(node)["header"]["member_id"]


def synced_followers(node) -> int | None:
    out = zookeeper.four_letter(node, "mntr")
    for line in out.splitlines():
        if line.startswith("zk_synced_followers"):
            return int(line.split()[1])
    return None


def zk_roles(cluster: LocalCluster):
    """(leader, followers) once the ensemble serves."""
    nodes = lock_nodes(cluster)
    lead = eventually(lambda: zookeeper.leader(nodes) if
                      zookeeper.ZooKeeperKind().cluster_ready(nodes) else None, timeout=30)
    return cluster.node(lead), [n for n in nodes if n.name != lead]


# -- whole runs: the faults that need a workload ------------------------------------------

EXIT = {True: 0, False: 1, "unknown": 2}


def run_json(tmp_path: Path, *args: str, timeout: float = 120) -> tuple[dict, list[dict]]:
    """`chaos run ... --json`: its summary and history. Any verdict will do, but the exit
    code must be the one the summary's verdict stands for (never a crash or a refusal)."""
    r = chaos("run", *args, "--store", str(tmp_path), "--json", timeout=timeout)
    assert r.returncode in EXIT.values(), f"exit {r.returncode}: {r.stderr[-2000:]}"
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert r.returncode == EXIT[summary["valid"]], (r.returncode, summary["valid"], r.stderr[-2000:])
    history = [json.loads(l) for l in (Path(summary["run_dir"]) / "history.jsonl").read_text().splitlines() if l]
    return summary, history


def nemesis_ops(history: list[dict], type_: str = "invoke") -> list[dict]:
    return [o for o in history if o["process"] == "nemesis" and o["type"] == type_]
