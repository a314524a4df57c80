"""Every nemesis against real clusters in namespaces: in effect, visible, and gone after heal.

The nemesis classes are driven as harness/runner.py drives them (setup with a
NemesisContext, `invoke` with nemesis invoke ops, `teardown`), against one cluster per
server kind, brought up once per class and healed between tests. Faults that need a
workload (pause-holder, client clocks, the seeded schedule) run `chaos run` subprocesses.
Each test shows (a) the fault is in effect, (b) its effect on the servers, (c) that
nothing of it remains: no chaoslock iptables rule in any namespace of the run, no task in
state T, clocks back, killed nodes alive and serving.

Measured figures are printed as `[figure] ...` lines (run with -s); NEMESES.md
tabulates them.
"""

from __future__ import annotations

import json
import random
import secrets
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest

from harness.cluster import etcd, zookeeper
from harness.cluster import grudge as grudge_mod
from harness.cluster.local import Group, LocalCluster
from harness.cluster.reaper import processes
from harness.cluster.valkey import ValkeyKind, connect
from harness.history import Op, now_ns
from harness.spec import TestSpec
from nemesis.base import NemesisContext
from nemesis.clock import ClockSkew
from nemesis.partition import Partition, PartitionClient
from nemesis.process import Kill, Pause
from tests.conftest import chaos, need_root_netns
from tests.integration.clusters import etcd_get, etcd_put

_NO_NETNS = need_root_netns()
pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(_NO_NETNS is not None, reason=_NO_NETNS or "")]


def figure(name: str, text: str) -> None:
    print(f"\n[figure] {name}: {text}", flush=True)


# -- helpers -------------------------------------------------------------------------------

def inv(f: str, value) -> Op:
    return Op(time_ns=now_ns(), process="nemesis", type="invoke", f=f, value=value)


def ctx(cluster: LocalCluster, concurrency: int = 1, **options) -> NemesisContext:
    return NemesisContext(spec=TestSpec(concurrency=concurrency, options=options), cluster=cluster)


def eventually(fn, timeout: float = 20.0, step: float = 0.1):
    """fn()'s first truthy result that does not raise, retrying until timeout; then fail."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            v = fn()
            if v:
                return v
            err = None
        except Exception as e:  # noqa: BLE001 - retried, re-raised at the deadline
            err = e
        if time.monotonic() > deadline:
            if err is not None:
                raise err
            raise AssertionError(f"{getattr(fn, '__name__', fn)} stayed falsy for {timeout}s")
        time.sleep(step)


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
    states = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            states.add((task / "stat").read_text().rsplit(")", 1)[1].split()[0])
        except (OSError, IndexError):
            pass
    return states


def is_stopped(pid: int, timeout: float = 1.0) -> bool:
    """SIGSTOP is delivered asynchronously: wait (briefly) until a task shows state T."""
    deadline = time.monotonic() + timeout
    while "T" not in task_states(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
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


def bring_up(request, groups, clients: int = 1) -> LocalCluster:
    run_id = secrets.token_hex(3)
    cluster = LocalCluster(run_id, groups, clients=clients, netns=True)

    def finish():
        cluster.down()
        assert list(processes(run_id)) == [], f"processes of run {run_id} survived down()"
        assert namespaces(cluster) == [], f"namespaces of run {run_id} survived down()"
        assert not cluster.dir.exists()

    request.addfinalizer(finish)
    t = time.monotonic()
    cluster.up()
    kinds = "+".join(sorted({n.kind for n in cluster.nodes}))
    figure(f"{kinds} x{len(cluster.nodes)} up", f"{time.monotonic() - t:.2f} s")
    return cluster


def three_of(request, kind, names: tuple[str, ...]) -> LocalCluster:
    """A three-node cluster of one server kind, or a skip naming what is not installed."""
    try:
        kind.check_installed()
    except Exception as e:
        pytest.skip(str(e))
    return bring_up(request, [Group(kind=kind, names=names)])


def need_timewarp():
    from harness.cluster import timewarp

    reason = timewarp.supported()
    if reason:
        pytest.skip(reason)


def check_partition_client(cluster: LocalCluster, k: int, ping: bool, label: str) -> None:
    """c1 cut from k servers reaches exactly the others; heal gives all back."""
    nodes = lock_nodes(cluster)
    nem = PartitionClient()
    nem.setup(ctx(cluster, cut_servers=k))
    fault = nem.next_fault(random.Random(7))
    op = nem.invoke(inv(*fault.start))
    try:
        assert op.type == "ok", op.error
        assert op.value["client"] == "c1" and op.value["worker"] == 0
        cut = set(op.value["servers"])
        assert len(cut) == k
        ns = cluster.client_netns[0]
        targets = [(n.host, n.port, ping) for n in nodes]
        t = time.monotonic()
        seen = {n.name for n, ok in zip(nodes, reach(ns, targets)) if ok}
        assert seen == {n.name for n in nodes} - cut, (seen, cut)  # (a)+(b)
        assert chaoslock_rules(cluster)  # the rules are there
        # the servers still reach each other: only the client is cut
        a = cluster.node(sorted(cut)[0])
        others = [n for n in nodes if n.name != a.name]
        assert all(reach(a.netns, [(n.host, n.port, ping) for n in others]))
        figure(f"partition-client {label}", f"c1 cut from {sorted(cut)} reaches exactly {sorted(seen)} "
                                            f"(probe {time.monotonic() - t:.2f} s)")
    finally:
        healed = nem.invoke(inv("heal-client", None))
        nem.teardown()
    assert healed.type == "ok"
    assert all(reach(cluster.client_netns[0], [(n.host, n.port, ping) for n in nodes]))
    assert_clean(cluster)


# -- etcd x3 -------------------------------------------------------------------------------

def member_id(node) -> str:
    return etcd.status(node)["header"]["member_id"]


class TestEtcd:
    @pytest.fixture(scope="class")
    def cluster(self, request):
        return three_of(request, etcd.EtcdKind(), ("e1", "e2", "e3"))

    @pytest.mark.parametrize("shape", ["one", "halves"])
    def test_partition(self, cluster, shape):
        nodes = lock_nodes(cluster)
        lead = eventually(lambda: etcd.leader(nodes))
        nem = Partition()
        nem.setup(ctx(cluster, partition_shape=shape))
        fault = nem.next_fault(random.Random(3))
        if shape == "one":  # isolate the leader: the harder case (the majority must elect)
            g = {lead: [n.name for n in nodes if n.name != lead], **{n.name: [lead] for n in nodes if n.name != lead}}
            fault = replace(fault, start=("partition", {"shape": "one", "grudge": g,
                                                        "describe": grudge_mod.describe(g, [n.name for n in nodes])}))
        grudge = fault.start[1]["grudge"]
        minority = [cluster.node(n) for n, hated in grudge.items() if len(hated) == 2]
        assert len(minority) == 1, grudge
        lone = minority[0]
        majority = [n for n in nodes if n.name != lone.name]
        t0 = time.monotonic()
        op = nem.invoke(inv(*fault.start))
        try:
            assert op.type == "ok", op.error
            # (a) rules in the isolated namespace; its peers' ports do not answer, the majority's do
            assert len(chaoslock_rules(cluster).get(lone.netns, [])) == 4
            assert reach(lone.netns, [(n.host, n.peer_port, False) for n in majority]) == [False, False]
            assert reach(majority[0].netns, [(majority[1].host, majority[1].peer_port, False)]) == [True]
            # (b) the majority serves a quorum write (after electing, if it lost the leader);
            # the isolated member cannot
            eventually(lambda: etcd_put(majority[0], f"maj-{shape}", "majority", timeout=1.0) or True, step=0.05)
            wrote = time.monotonic() - t0
            with pytest.raises(Exception):
                etcd_put(lone, f"cut-{shape}", "lost", timeout=1.5)
            with pytest.raises(Exception):
                etcd_get(lone, f"maj-{shape}", timeout=1.0)
        finally:
            t1 = time.monotonic()
            healed = nem.invoke(inv("heal", None))
            nem.teardown()
        assert healed.type == "ok"
        assert eventually(lambda: etcd_get(lone, f"maj-{shape}", timeout=1.0) == "majority")
        caught = time.monotonic() - t1
        # The timed-out put is indeterminate (an info op): a follower had already forwarded
        # it over TCP, and the retransmission after heal may still commit it.
        late = etcd_get(majority[0], f"cut-{shape}")
        figure(f"partition {shape} etcd", f"{fault.start[1]['describe']} ({lone.name} {'was leader' if lone.name == lead else 'a follower'}): "
                                          f"its put times out, "
                                          f"majority put ok {wrote:.2f} s after the cut; "
                                          f"{lone.name} read the majority's write {caught:.2f} s after heal; the timed-out "
                                          f"put {'was applied later' if late else 'never applied'}")
        assert_clean(cluster)

    def test_partition_client(self, cluster):
        check_partition_client(cluster, 2, False, "etcd x3")

    def test_pause_leader(self, cluster):
        nodes = lock_nodes(cluster)
        before = eventually(lambda: etcd.leader(nodes))
        nem = Pause()
        nem.setup(ctx(cluster))
        op = nem.invoke(inv("pause", ["@leader"]))
        t0 = time.monotonic()
        try:
            # @leader is resolved when the op runs; an election may have happened since `before`
            # (pre-vote is off in 3.4: a healed member deposes the leader), so trust the op.
            assert op.type == "ok" and len(op.value) == 1 and op.value[0] in ("e1", "e2", "e3"), op
            old = cluster.node(op.value[0])
            others = [n for n in nodes if n.name != old.name]
            assert is_stopped(cluster.pids(old.name)[0])  # (a)
            assert etcd.status(old, timeout=0.5) is None
            # (b) the other two elect a new leader and serve
            new = eventually(lambda: (lambda l: l if l not in (None, old.name) else None)(etcd.leader(others, 0.5)),
                             timeout=15, step=0.05)
            elected = time.monotonic() - t0
            eventually(lambda: etcd_put(others[0], "during-pause", "yes", timeout=1.0) or True, timeout=10)
        finally:
            resumed = nem.invoke(inv("resume", None))
            nem.teardown()
        assert resumed.type == "ok" and resumed.value == [old.name]
        t1 = time.monotonic()
        eventually(lambda: (st := etcd.status(old)) and st["leader"] != member_id(old) and st["leader"] != "0",
                   timeout=15, step=0.05)
        rejoined = time.monotonic() - t1
        assert eventually(lambda: etcd_get(old, "during-pause", 1.0) == "yes")
        lead_now = etcd.leader(nodes)
        figure("pause leader etcd", f"paused leader {old.name}; new leader {new} in {elected:.2f} s; after resume "
                                    f"{old.name} follows {'the new leader' if lead_now == new else lead_now} "
                                    f"within {rejoined:.2f} s")
        assert_clean(cluster)

    def test_kill_follower(self, cluster):
        nodes = lock_nodes(cluster)
        lead = eventually(lambda: etcd.leader(nodes))
        victim = next(n for n in nodes if n.name != lead)
        nem = Kill()
        nem.setup(ctx(cluster))
        etcd_put(victim, "before-kill", "1")
        op = nem.invoke(inv("kill", [victim.name]))
        try:
            assert op.type == "ok"
            assert cluster.pids(victim.name) == []  # (a)
            assert not etcd.healthy(victim, 0.5)
            etcd_put(cluster.node(lead), "while-down", "2")  # (b) two of three serve
            t = time.monotonic()
        finally:
            restarted = nem.invoke(inv("restart", None))
            nem.teardown()
        took = time.monotonic() - t
        assert restarted.type == "ok" and restarted.value == [victim.name], restarted.error
        assert etcd_get(victim, "before-kill") == "1" and etcd_get(victim, "while-down") == "2"
        figure("kill etcd", f"follower {victim.name} SIGKILLed, restarted healthy with its data in {took:.2f} s")
        assert_clean(cluster)

    def test_clock_skew_timewarp(self, cluster):
        need_timewarp()
        nodes = lock_nodes(cluster)
        nem = ClockSkew()
        nem.setup(ctx(cluster))
        assert sorted(nem.targets) == ["e1", "e2", "e3"]
        op = nem.invoke(inv("clock-bump", {"e1": 5.0, "e2": 5.0}))
        try:
            assert op.type == "ok", op.error
            assert all(abs(v - 5.0) <= 1.5 for v in op.value.values()), op.value  # (a) Date header moved
            precise = etcd.read_clock_precise(cluster.node("e1")) - time.time()
            assert abs(precise - 5.0) < 0.3, precise
            # (b) etcd keeps serving puts (Raft runs on the monotonic clock)
            for n in nodes:
                etcd_put(n, f"skewed-{n.name}", "ok")
            assert etcd_get(cluster.node("e3"), "skewed-e1") == "ok"
        finally:
            reset = nem.invoke(inv("clock-reset", ["e1", "e2"]))
            nem.teardown()
        assert reset.type == "ok", reset.error
        after = etcd.read_clock_precise(cluster.node("e1")) - time.time()
        assert abs(after) < 0.3
        figure("clock-skew etcd (timewarp)", f"asked +5 s: Date header read back {op.value}, precise "
                                             f"{precise:+.3f} s; puts served on all 3; reset reads {after:+.3f} s")
        nem = ClockSkew()
        nem.setup(ctx(cluster))
        back = nem.invoke(inv("clock-bump", {"e2": -5.0}))
        try:
            assert back.type == "ok", back.error
            behind = etcd.read_clock_precise(cluster.node("e2")) - time.time()
            assert abs(behind + 5.0) < 0.3, behind
            etcd_put(cluster.node("e2"), "behind", "ok")
        finally:
            reset = nem.invoke(inv("clock-reset", ["e2"]))
            nem.teardown()
        assert reset.type == "ok", reset.error
        figure("clock-skew back etcd (timewarp)", f"asked -5 s: Date header {back.value}, precise {behind:+.3f} s; "
                                                  f"puts served; reset reads {reset.value}")
        assert_clean(cluster)

    def test_kill_keeps_clock_skew(self, cluster):
        """A restarted node gets its clock offset back (the vDSO patch dies with the process)."""
        need_timewarp()
        clock, kill = ClockSkew(), Kill()
        clock.setup(ctx(cluster))
        kill.setup(ctx(cluster))
        e3 = cluster.node("e3")
        try:
            assert clock.invoke(inv("clock-bump", {"e3": 5.0})).type == "ok"
            assert kill.invoke(inv("kill", ["e3"])).type == "ok"
            assert kill.invoke(inv("restart", None)).type == "ok"
            after = etcd.read_clock_precise(e3) - time.time()
            assert abs(after - 5.0) < 0.3, after
        finally:
            reset = clock.invoke(inv("clock-reset", ["e3"]))
            clock.teardown()
            kill.teardown()
        assert reset.type == "ok"
        figure("kill + clock-skew etcd", f"e3 at +5 s killed and restarted: its clock reads {after:+.3f} s again")
        assert_clean(cluster)


# -- valkey x5 -----------------------------------------------------------------------------

class TestValkey:
    @pytest.fixture(scope="class")
    def cluster(self, request):
        return bring_up(request, [Group(kind=ValkeyKind(), names=tuple(f"n{i}" for i in range(1, 6)),
                                        fake_clock=True)])

    def test_partition_halves(self, cluster):
        nodes = lock_nodes(cluster)
        nem = Partition()
        nem.setup(ctx(cluster, partition_shape="halves"))
        fault = nem.next_fault(random.Random(1))
        op = nem.invoke(inv(*fault.start))
        try:
            assert op.type == "ok", op.error
            assert fault.start[1]["describe"] == "n1 n2 n3 | n4 n5"
            n1 = cluster.node("n1")
            seen = reach(n1.netns, [(n.host, n.port, True) for n in nodes])
            assert seen == [True, True, True, False, False]
            seen4 = reach(cluster.node("n4").netns, [(n.host, n.port, True) for n in nodes])
            assert seen4 == [False, False, False, True, True]
            # the harness (root namespace) and the client still reach everyone
            assert all(reach(cluster.client_netns[0], [(n.host, n.port, True) for n in nodes]))
        finally:
            healed = nem.invoke(inv("heal", None))
            nem.teardown()
        assert healed.type == "ok"
        assert all(reach(cluster.node("n1").netns, [(n.host, n.port, True) for n in nodes]))
        figure("partition halves valkey", "n1 n2 n3 | n4 n5: n1 PINGs n1-n3 only, n4 PINGs n4-n5 only; all after heal")
        assert_clean(cluster)

    def test_partition_client(self, cluster):
        check_partition_client(cluster, 2, True, "valkey x5")

    def test_pause(self, cluster):
        nem = Pause()
        nem.setup(ctx(cluster))
        node = cluster.node("n2")
        op = nem.invoke(inv("pause", ["n2"]))
        try:
            assert op.type == "ok" and op.value == ["n2"]
            assert is_stopped(cluster.pids("n2")[0])
            with pytest.raises(Exception):
                connect(node, 0.5).ping()
        finally:
            resumed = nem.invoke(inv("resume", None))
            nem.teardown()
        t = time.monotonic()
        assert resumed.value == ["n2"]
        eventually(lambda: connect(node, 0.5).ping(), step=0.01)
        figure("pause valkey", f"n2 in state T, PING times out; PONG {1000 * (time.monotonic() - t):.0f} ms after resume")
        assert_clean(cluster)

    def test_pause_leader_has_no_leader(self, cluster):
        """valkey has no leader: the schedule never draws @leader; an explicit one is refused."""
        from nemesis.process import choose_targets

        nem = Pause()
        nem.setup(ctx(cluster))
        assert nem.leader_of is None
        shapes = {choose_targets(random.Random(s), nem.names, nem.leader_of)[0] for s in range(50)}
        assert "leader" not in shapes
        op = nem.invoke(inv("pause", ["@leader"]))
        nem.teardown()
        assert op.type == "fail" and op.error == "no leader to pause", op
        figure("pause leader valkey", f"refused: {op.type} {op.error!r}")
        assert_clean(cluster)

    def test_kill_without_persistence(self, cluster):
        node = cluster.node("n5")
        with connect(node) as r:
            r.set("k", "v")
        nem = Kill()
        nem.setup(ctx(cluster))
        op = nem.invoke(inv("kill", ["n5"]))
        try:
            assert op.type == "ok" and cluster.pids("n5") == []
            with pytest.raises(Exception):
                connect(node, 0.3).ping()
            t = time.monotonic()
        finally:
            restarted = nem.invoke(inv("restart", None))
            nem.teardown()
        took = time.monotonic() - t
        assert restarted.type == "ok", restarted.error
        with connect(node) as r:
            assert r.get("k") is None  # forgotten: no persistence
        figure("kill valkey (no persistence)", f"restarted in {took:.2f} s; the key written before the kill is gone")
        assert_clean(cluster)

    def test_clock_bump_and_back(self, cluster):
        nem = ClockSkew()
        nem.setup(ctx(cluster))
        assert sorted(nem.targets) == [f"n{i}" for i in range(1, 6)]
        n1, n2, n4 = cluster.node("n1"), cluster.node("n2"), cluster.node("n4")
        with connect(n1) as r:
            r.set("early", "x", px=4000)
        with connect(n4) as r:
            r.set("control", "x", px=4000)
        op = nem.invoke(inv("clock-bump", {"n1": 5.0, "n2": 5.0, "n3": 5.0}))
        try:
            assert op.type == "ok", op.error
            assert all(abs(v - 5.0) <= 0.5 for v in op.value.values())  # (a) TIME moved
            with connect(n1) as r:
                s, us = r.time()
                time_off = s + us / 1e6 - time.time()
                gone = r.get("early") is None  # (b) 4 s left, clock +5 s: expired at once
            with connect(n4) as r:
                control = r.pttl("control")
            assert abs(time_off - 5.0) < 0.5 and gone and control > 3000
        finally:
            reset = nem.invoke(inv("clock-reset", ["n1", "n2", "n3"]))
        assert reset.type == "ok" and all(abs(v) <= 0.5 for v in reset.value.values())
        figure("clock-skew bump valkey", f"asked +5 s, TIME read back {op.value} (direct {time_off:+.3f} s); "
                                         f"a key with 4 s left expired at once, control on n4 PTTL {control} ms; "
                                         f"reset reads {reset.value}")
        with connect(n2) as r:
            r.set("late", "x", px=3000)
        back = nem.invoke(inv("clock-bump", {"n2": -5.0}))
        try:
            assert back.type == "ok", back.error
            with connect(n2) as r:
                pttl = r.pttl("late")
            assert pttl > 7000  # lives ~5 s longer than its TTL
        finally:
            reset = nem.invoke(inv("clock-reset", ["n2"]))
            nem.teardown()
        assert reset.type == "ok"
        figure("clock-skew back valkey", f"asked -5 s, read back {back.value}; a 3 s key's PTTL became {pttl} ms; "
                                         f"reset reads {reset.value}")
        assert_clean(cluster)

    def test_clock_strobe(self, cluster):
        nem = ClockSkew()
        nem.setup(ctx(cluster))
        op = nem.invoke(inv("clock-strobe", {"nodes": ["n1", "n2", "n3"], "delta": 3.0, "period_s": 0.2}))
        samples = []
        try:
            assert op.type == "ok" and set(op.value["measured"]) == {"n1", "n2", "n3"}
            t = time.monotonic()
            while time.monotonic() - t < 1.5:
                samples.append(cluster.read_clock_offset("n1"))
                time.sleep(0.03)
        finally:
            reset = nem.invoke(inv("clock-reset", ["n1", "n2", "n3"]))
            nem.teardown()
        high = [s for s in samples if abs(s - 3.0) < 0.5]
        low = [s for s in samples if abs(s) < 0.5]
        assert high and low and len(high) + len(low) == len(samples), samples
        assert reset.type == "ok" and all(abs(v) <= 0.5 for v in reset.value.values())
        time.sleep(0.5)  # the strobe thread must be gone: the clock stays at 0
        assert abs(cluster.read_clock_offset("n1")) < 0.5
        figure("clock-skew strobe valkey", f"op measured {op.value['measured']}; n1 sampled {len(samples)}x in 1.5 s: "
                                           f"{len(high)} at ~+3 s, {len(low)} at ~0; reset reads {reset.value}")
        assert_clean(cluster)

    def test_clock_drift(self, cluster):
        nem = ClockSkew()
        nem.setup(ctx(cluster))
        t0 = time.monotonic()
        op = nem.invoke(inv("clock-drift", {"nodes": ["n1", "n2", "n3"], "rate": 1.5}))
        try:
            assert op.type == "ok", op.error
            assert all(0.05 < v < 0.5 for v in op.value["measured"].values()), op.value
            time.sleep(1.5)
            later = cluster.read_clock_offset("n1")
            elapsed = time.monotonic() - t0
            want = elapsed * 0.5
            assert abs(later - want) < 0.3, (later, want)
        finally:
            reset = nem.invoke(inv("clock-reset", ["n1", "n2", "n3"]))
            nem.teardown()
        assert reset.type == "ok" and all(abs(v) <= 0.5 for v in reset.value.values())
        figure("clock-skew drift valkey", f"rate 1.5: op measured {op.value['measured']}; "
                                          f"{later:+.3f} s after {elapsed:.2f} s (expected {want:+.3f}); "
                                          f"reset reads {reset.value}")
        assert_clean(cluster)


def test_kill_valkey_appendonly(request):
    cluster = bring_up(request, [Group(kind=ValkeyKind(appendonly=True), names=("n1",))], clients=0)
    node = cluster.node("n1")
    with connect(node) as r:
        r.set("k", "kept")
    nem = Kill()
    nem.setup(ctx(cluster))
    op = nem.invoke(inv("kill", ["n1"]))
    try:
        assert op.type == "ok" and cluster.pids("n1") == []
        t = time.monotonic()
    finally:
        restarted = nem.invoke(inv("restart", None))
        nem.teardown()
    took = time.monotonic() - t
    assert restarted.type == "ok", restarted.error
    with connect(node) as r:
        assert r.get("k") == "kept"
    figure("kill valkey (appendonly)", f"restarted in {took:.2f} s; the key survived the SIGKILL")
    assert_clean(cluster)


# -- ZooKeeper x3 --------------------------------------------------------------------------

def zk_client(node, timeout: float = 5.0):
    from kazoo.client import KazooClient

    c = KazooClient(hosts=node.endpoint, timeout=4.0)
    c.start(timeout=timeout)
    return c


def zk_write(node, path: str, value: bytes = b"x") -> None:
    c = zk_client(node)
    try:
        if c.exists(path):
            c.set(path, value)
        else:
            c.create(path, value, makepath=True)
    finally:
        c.stop()
        c.close()


def zk_read(node, path: str) -> bytes:
    c = zk_client(node)
    try:
        c.sync(path)
        return c.get(path)[0]
    finally:
        c.stop()
        c.close()


def synced_followers(node) -> int | None:
    out = zookeeper.four_letter(node, "mntr")
    for line in out.splitlines():
        if line.startswith("zk_synced_followers"):
            return int(line.split()[1])
    return None


class TestZooKeeper:
    @pytest.fixture(scope="class")
    def cluster(self, request):
        return three_of(request, zookeeper.ZooKeeperKind(), ("z1", "z2", "z3"))

    def roles(self, cluster):
        nodes = lock_nodes(cluster)
        lead = eventually(lambda: zookeeper.leader(nodes) if
                          zookeeper.ZooKeeperKind().cluster_ready(nodes) else None, timeout=30)
        return cluster.node(lead), [n for n in nodes if n.name != lead]

    def test_pause_follower(self, cluster):
        leader, followers = self.roles(cluster)
        victim = followers[0]
        assert synced_followers(leader) == 2
        nem = Pause()
        nem.setup(ctx(cluster))
        op = nem.invoke(inv("pause", [victim.name]))
        t0 = time.monotonic()
        try:
            assert op.type == "ok"
            assert is_stopped(cluster.pids(victim.name)[0]) and zookeeper.mode(victim, 0.5) == "down"
            zk_write(leader, "/paused", b"1")  # (b) the other two still make a quorum
            eventually(lambda: synced_followers(leader) == 1, timeout=15, step=0.05)
            dropped = time.monotonic() - t0
        finally:
            resumed = nem.invoke(inv("resume", None))
            nem.teardown()
        assert resumed.value == [victim.name]
        t1 = time.monotonic()
        eventually(lambda: zookeeper.mode(victim) == "follower" and synced_followers(leader) == 2,
                   timeout=30, step=0.05)
        rejoined = time.monotonic() - t1
        assert zk_read(victim, "/paused") == b"1"
        figure("pause follower zookeeper", f"{victim.name} paused: writes go on; leader dropped it after "
                                           f"{dropped:.2f} s; after resume follower again in {rejoined:.2f} s")
        assert_clean(cluster)

    def test_pause_leader(self, cluster):
        leader, followers = self.roles(cluster)
        nem = Pause()
        nem.setup(ctx(cluster))
        op = nem.invoke(inv("pause", ["@leader"]))
        t0 = time.monotonic()
        try:
            assert op.type == "ok" and op.value == [leader.name]
            new = eventually(lambda: zookeeper.leader(followers, 0.5), timeout=30, step=0.05)
            elected = time.monotonic() - t0
            zk_write(cluster.node(new), "/leader-paused", b"1")
        finally:
            resumed = nem.invoke(inv("resume", None))
            nem.teardown()
        assert resumed.value == [leader.name]
        t1 = time.monotonic()
        eventually(lambda: zookeeper.mode(leader) == "follower", timeout=30, step=0.05)
        rejoined = time.monotonic() - t1
        figure("pause leader zookeeper", f"paused leader {leader.name}; {new} leads after {elected:.2f} s; "
                                         f"old leader a follower {rejoined:.2f} s after resume")
        assert_clean(cluster)

    def test_partition_follower(self, cluster):
        leader, followers = self.roles(cluster)
        victim = followers[0]
        rest = [n.name for n in lock_nodes(cluster) if n.name != victim.name]
        nem = Partition()
        nem.setup(ctx(cluster, partition_shape="one"))
        grudge = {victim.name: rest, **{n: [victim.name] for n in rest}}
        op = nem.invoke(inv("partition", {"shape": "one", "grudge": grudge}))
        t0 = time.monotonic()
        try:
            assert op.type == "ok", op.error
            eventually(lambda: zookeeper.mode(victim) == "looking", timeout=20, step=0.05)
            lost = time.monotonic() - t0
            zk_write(leader, "/partitioned", b"1")
        finally:
            healed = nem.invoke(inv("heal", None))
            nem.teardown()
        assert healed.type == "ok"
        t1 = time.monotonic()
        eventually(lambda: zookeeper.mode(victim) == "follower", timeout=30, step=0.05)
        back = time.monotonic() - t1
        assert zk_read(victim, "/partitioned") == b"1"
        figure("partition one zookeeper", f"isolated follower {victim.name} stops serving ('looking') after "
                                          f"{lost:.2f} s, majority writes; follower again {back:.2f} s after heal")
        assert_clean(cluster)

    def test_partition_client(self, cluster):
        check_partition_client(cluster, 2, False, "zookeeper x3")

    def test_kill_follower(self, cluster):
        leader, followers = self.roles(cluster)
        victim = followers[-1]
        nem = Kill()
        nem.setup(ctx(cluster))
        op = nem.invoke(inv("kill", [victim.name]))
        try:
            assert op.type == "ok" and cluster.pids(victim.name) == []
            assert zookeeper.mode(victim, 0.5) == "down"
            zk_write(leader, "/killed", b"1")
            t = time.monotonic()
        finally:
            restarted = nem.invoke(inv("restart", None))
            nem.teardown()
        took = time.monotonic() - t
        assert restarted.type == "ok", restarted.error
        assert zookeeper.mode(victim) == "follower"
        assert zk_read(victim, "/killed") == b"1"
        figure("kill zookeeper", f"follower {victim.name} SIGKILLed; restart() returned with mode follower "
                                 f"in {took:.2f} s (JVM start included)")
        assert_clean(cluster)

    def test_clock_skew_timewarp(self, cluster):
        need_timewarp()
        leader, followers = self.roles(cluster)
        nem = ClockSkew()
        nem.setup(ctx(cluster))
        assert sorted(nem.targets) == ["z1", "z2", "z3"]
        want = {leader.name: 5.0, followers[0].name: 5.0}
        op = nem.invoke(inv("clock-bump", want))
        try:
            assert op.type == "ok", op.error
            assert all(abs(v - 5.0) <= 0.5 for v in op.value.values())  # (a) the JVM's own log stamps moved
            zk_write(leader, "/skewed", b"1")  # (b) the ensemble keeps serving
            assert zk_read(followers[1], "/skewed") == b"1"
            time.sleep(2.5)  # longer than syncLimit: nobody drops out over a wall-clock jump
            modes = sorted(zookeeper.mode(n) for n in lock_nodes(cluster))
            assert modes == ["follower", "follower", "leader"], modes
        finally:
            reset = nem.invoke(inv("clock-reset", list(want)))
            nem.teardown()
        assert reset.type == "ok" and all(abs(v) <= 0.5 for v in reset.value.values())
        figure("clock-skew zookeeper (timewarp)", f"asked +5 s on leader and a follower, read back {op.value}; "
                                                  f"writes and reads served, modes {modes}; reset reads {reset.value}")
        assert_clean(cluster)

    def test_clock_back_strobe_drift_timewarp(self, cluster):
        need_timewarp()
        leader, followers = self.roles(cluster)
        f = followers[0].name
        nem = ClockSkew()
        nem.setup(ctx(cluster))
        try:
            back = nem.invoke(inv("clock-bump", {leader.name: -5.0}))
            assert back.type == "ok" and abs(back.value[leader.name] + 5.0) <= 0.5, back
            zk_write(leader, "/behind", b"1")
            assert nem.invoke(inv("clock-reset", [leader.name])).type == "ok"
            strobe = nem.invoke(inv("clock-strobe", {"nodes": [f], "delta": 3.0, "period_s": 0.2}))
            assert strobe.type == "ok"
            samples, t = [], time.monotonic()
            while time.monotonic() - t < 1.5:
                samples.append(cluster.read_clock_offset(f))
                time.sleep(0.03)
            high = [x for x in samples if abs(x - 3.0) < 0.5]
            low = [x for x in samples if abs(x) < 0.5]
            assert high and low and len(high) + len(low) == len(samples), samples
            t0 = time.monotonic()
            drift = nem.invoke(inv("clock-drift", {"nodes": [f], "rate": 1.5}))
            assert drift.type == "ok", drift.error
            time.sleep(1.5)
            later, elapsed = cluster.read_clock_offset(f), time.monotonic() - t0
            assert abs(later - elapsed * 0.5) < 0.3, (later, elapsed)
            assert zookeeper.mode(cluster.node(f)) == "follower"
        finally:
            reset = nem.invoke(inv("clock-reset", [leader.name, f]))
            nem.teardown()
        assert reset.type == "ok" and all(abs(v) <= 0.5 for v in reset.value.values())
        figure("clock-skew back/strobe/drift zookeeper (timewarp)",
               f"back: leader read back {back.value}, writes served; strobe +3 s/200 ms on {f}: {len(samples)} samples, "
               f"{len(high)} at ~+3 s, {len(low)} at ~0; drift 1.5: {later:+.3f} s after {elapsed:.2f} s "
               f"(expected {elapsed * 0.5:+.3f}); reset reads {reset.value}")
        assert_clean(cluster)


# -- whole runs: pause-holder, client clocks, the seeded schedule --------------------------

def run_json(tmp_path: Path, *args: str, timeout: float = 120) -> tuple[dict, list[dict]]:
    r = chaos("run", *args, "--store", str(tmp_path), "--json", timeout=timeout)
    assert r.returncode in (0, 1, 2), f"exit {r.returncode}: {r.stderr[-2000:]}"
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    history = [json.loads(l) for l in (Path(summary["run_dir"]) / "history.jsonl").read_text().splitlines() if l]
    return summary, history


def nemesis_ops(history: list[dict], type_: str = "invoke") -> list[dict]:
    return [o for o in history if o["process"] == "nemesis" and o["type"] == type_]


def test_pause_holder_run(tmp_path):
    summary, history = run_json(tmp_path, "--backend", "redis", "--nemesis", "pause-holder",
                                "--time-limit", "12", "--seed", "3")
    oks = nemesis_ops(history, "ok")
    pauses = [o for o in oks if o["f"] == "pause-holder"]
    resumes = [o for o in oks if o["f"] == "resume-holder"]
    assert pauses and resumes, oks
    # Each planned resume names the worker its pause stopped; the final heal lists any left.
    assert all(isinstance(o["value"]["worker"], int) for o in pauses)
    planned = [o for o in resumes if "worker" in o["value"]]
    assert [o["value"]["worker"] for o in planned] == [o["value"]["worker"] for o in pauses]
    assert all(o["value"].get("workers", []) == [] for o in resumes if o not in planned)
    assert summary["violations"] >= 1, summary
    # Every pause that took effect stopped its process inside the critical section: the
    # process's last lock op before the stop is an ok acquire, not a release.
    for p in pauses:
        mine = [o for o in history if o["process"] == p["value"]["process"] and o["time_ns"] < p["time_ns"]
                and (o["f"], o["type"]) in (("acquire", "ok"), ("release", "invoke"))]
        assert mine and mine[-1]["f"] == "acquire", (p, mine[-3:])
    missed = [o for o in nemesis_ops(history, "fail") if o["f"] == "pause-holder"]
    assert all("missed" in o["error"] for o in missed), missed
    held = [(p["value"]["worker"], round((r["time_ns"] - p["time_ns"]) / 1e9, 2)) for p, r in zip(pauses, planned)]
    figure("pause-holder redis", f"{len(pauses)} pauses (worker, s paused) {held}; violations {summary['violations']}, "
                                 f"valid {summary['valid']}")


def test_client_clock_skew_run(tmp_path):
    summary, history = run_json(tmp_path, "--backend", "redlock", "--nemesis", "clock-skew",
                                "-o", "clock_target=clients", "-o", "validity_clock=wall",
                                "--time-limit", "8", "--concurrency", "3", "--seed", "4")
    assert summary.get("client_clock_reads"), summary
    bumps = [o for o in nemesis_ops(history, "ok") if o["f"] == "clock-bump"]
    assert bumps and all(k.startswith("c") for o in bumps for k in o["value"]), bumps
    assert all(abs(abs(v) - 5.0) < 2.6 for o in bumps for v in o["value"].values())
    resets = [o for o in nemesis_ops(history, "ok") if o["f"] == "clock-reset"]
    assert resets and all(v == 0.0 for v in resets[-1]["value"].values())
    figure("clock-skew clients", f"client_clock_reads {summary['client_clock_reads']}; offsets read back "
                                 f"{[o['value'] for o in bumps]}; violations {summary['violations']}")


def test_same_seed_same_nemesis_ops(tmp_path):
    args = ("--backend", "redlock", "--nemesis", "clock-skew,partition", "--time-limit", "12")
    runs = [run_json(tmp_path / str(i), *args, "--seed", seed) for i, seed in enumerate(("5", "5", "6"))]
    plans = [[(o["f"], o["value"]) for o in nemesis_ops(h)] for _, h in runs]
    assert len(plans[0]) >= 4
    assert plans[0] == plans[1]
    assert plans[0] != plans[2]
    figure("seeded schedule", f"seed 5 twice: {len(plans[0])} identical nemesis invokes "
                              f"{[f for f, _ in plans[0]]}; seed 6 differs ({[f for f, _ in plans[2]]})")
