"""kill: SIGKILL a server and restart it with its data dir; what survives is what the server
persists, and a restarted node gets its clock offset back."""

from __future__ import annotations

import time
from typing import Callable

import pytest

from harness.cluster import etcd, zookeeper
from harness.cluster.provider import Group
from harness.cluster.valkey import ValkeyKind, connect
from harness.core.history import Op
from nemesis.clock import ClockSkew
from nemesis.process import Kill
from tests.conftest import eventually
from tests.integration.clusters import etcd_get, etcd_put, start_cluster, zk_read, zk_write
from tests.integration.nemesis.probes import (MARKS, assert_clean, ctx, figure, inv, lock_nodes, need_timewarp, on,
                                              zk_roles)

pytestmark = MARKS


def kill_and_restart(cluster, name: str, while_down: Callable[[], None]) -> tuple[Op, float]:
    """SIGKILL `name` through the Kill nemesis, check in `while_down` what holds while it is
    down, then restart it whatever happened: the restart's completion and its seconds."""
    nem = Kill()
    nem.setup(ctx(cluster))
    op = nem.invoke(inv("kill", [name]))
    try:
        assert op.type == "ok" and cluster.pids(name) == [], op  # (a)
        while_down()
        t = time.monotonic()
    finally:
        restarted = nem.invoke(inv("restart", None))
        nem.teardown()
    return restarted, time.monotonic() - t


@on("etcd")
class TestEtcd:
    def test_kill_follower(self, cluster):
        nodes = lock_nodes(cluster)
        lead = eventually(lambda: etcd.leader(nodes))
        victim = next(n for n in nodes if n.name != lead)
        etcd_put(victim, "before-kill", "1")

        def while_down():
            assert not etcd.healthy(victim, 0.5)
            etcd_put(cluster.node(lead), "while-down", "2")  # (b) two of three serve

        restarted, took = kill_and_restart(cluster, victim.name, while_down)
        assert restarted.type == "ok" and restarted.value == [victim.name], restarted.error
        assert etcd_get(victim, "before-kill") == "1" and etcd_get(victim, "while-down") == "2"
        figure("kill etcd", f"follower {victim.name} SIGKILLed, restarted healthy with its data in {took:.2f} s")
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


@on("valkey")
class TestValkey:
    def test_kill_without_persistence(self, cluster):
        node = cluster.node("n5")
        with connect(node) as r:
            r.set("k", "v")

        def while_down():
            with pytest.raises(Exception):
                connect(node, 0.3).ping()

        restarted, took = kill_and_restart(cluster, "n5", while_down)
        assert restarted.type == "ok", restarted.error
        with connect(node) as r:
            assert r.get("k") is None  # forgotten: no persistence
        figure("kill valkey (no persistence)", f"restarted in {took:.2f} s; the key written before the kill is gone")
        assert_clean(cluster)


def test_kill_valkey_appendonly(request):
    cluster = start_cluster(request, None, Group(kind=ValkeyKind(appendonly=True), names=("n1",)), netns=True)
    node = cluster.node("n1")
    with connect(node) as r:
        r.set("k", "kept")
    restarted, took = kill_and_restart(cluster, "n1", lambda: None)
    assert restarted.type == "ok", restarted.error
    with connect(node) as r:
        assert r.get("k") == "kept"
    figure("kill valkey (appendonly)", f"restarted in {took:.2f} s; the key survived the SIGKILL")
    assert_clean(cluster)


@on("zookeeper")
class TestZooKeeper:
    def test_kill_follower(self, cluster):
        leader, followers = zk_roles(cluster)
        victim = followers[-1]

        def while_down():
            assert zookeeper.mode(victim, 0.5) == "down"
            zk_write(leader, "/killed", b"1")

        restarted, took = kill_and_restart(cluster, victim.name, while_down)
        assert restarted.type == "ok", restarted.error
        assert zookeeper.mode(victim) == "follower"
        assert zk_read(victim, "/killed") == b"1"
        figure("kill zookeeper", f"follower {victim.name} SIGKILLed; restart() returned with mode follower "
                                 f"in {took:.2f} s (JVM start included)")
        assert_clean(cluster)
