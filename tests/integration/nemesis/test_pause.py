"""pause (SIGSTOP a server, or the leader) and pause-holder (SIGSTOP the lock holder in its
critical section): stopped, the others go on, all back after resume."""

from __future__ import annotations

import random
import time

import pytest

from harness.cluster import etcd, zookeeper
from harness.cluster.valkey import connect
from nemesis.process import Pause
from tests.conftest import eventually
from tests.integration.clusters import etcd_get, etcd_put, zk_read, zk_write
from tests.integration.nemesis.probes import (MARKS, assert_clean, ctx, figure, inv, is_stopped, lock_nodes,
                                              member_id, nemesis_ops, on, run_json, synced_followers, zk_roles)

pytestmark = MARKS


@on("etcd")
class TestEtcd:
    def test_pause_leader(self, cluster):
        nodes = lock_nodes(cluster)
        eventually(lambda: etcd.leader(nodes))  # a leader to pause
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
            eventually(lambda: etcd_put(others[0], "during-pause", "yes", timeout=1.0), timeout=10, until=None)
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


@on("valkey")
class TestValkey:
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


@on("zookeeper")
class TestZooKeeper:
    def test_pause_follower(self, cluster):
        leader, followers = zk_roles(cluster)
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
        leader, followers = zk_roles(cluster)
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
    assert set(summary["violations_by_cause"]) == {"overran-paused"}, summary["violations_by_cause"]
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
