"""partition and partition-client: cut exactly what was asked, the servers react as their
protocol says, heal gives everything back."""

from __future__ import annotations

import random
import time
from dataclasses import replace

import pytest

from harness.cluster import etcd, zookeeper
from harness.cluster import grudge as grudge_mod
from harness.cluster.local import LocalCluster
from nemesis.partition import Partition, PartitionClient
from tests.conftest import eventually
from tests.integration.clusters import etcd_get, etcd_put, zk_read, zk_write
from tests.integration.nemesis.probes import (MARKS, assert_clean, chaoslock_rules, ctx, figure, inv, lock_nodes, on,
                                              reach, zk_roles)

pytestmark = MARKS


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
        ns = cluster.client(0).netns
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
    assert all(reach(cluster.client(0).netns, [(n.host, n.port, ping) for n in nodes]))
    assert_clean(cluster)


@on("etcd")
class TestEtcd:
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
            eventually(lambda: etcd_put(majority[0], f"maj-{shape}", "majority", timeout=1.0), step=0.05, until=None)
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


@on("valkey")
class TestValkey:
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
            assert all(reach(cluster.client(0).netns, [(n.host, n.port, True) for n in nodes]))
        finally:
            healed = nem.invoke(inv("heal", None))
            nem.teardown()
        assert healed.type == "ok"
        assert all(reach(cluster.node("n1").netns, [(n.host, n.port, True) for n in nodes]))
        figure("partition halves valkey", "n1 n2 n3 | n4 n5: n1 PINGs n1-n3 only, n4 PINGs n4-n5 only; all after heal")
        assert_clean(cluster)

    def test_partition_client(self, cluster):
        check_partition_client(cluster, 2, True, "valkey x5")


@on("zookeeper")
class TestZooKeeper:
    def test_partition_follower(self, cluster):
        leader, followers = zk_roles(cluster)
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
