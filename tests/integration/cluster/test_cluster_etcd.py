"""Three real etcd 3.4 members under LocalCluster: serve, elect, rejoin, partition.

Each test gets its own cluster and run id; the finalizer stops it and checks that no process
carrying the run id survives and that the state dir is gone.
"""

from __future__ import annotations

import time

import grpc
import pytest

from pyetcd.exceptions import ConnectionFailedError, ConnectionTimeoutError

from harness.cluster import etcd
from harness.cluster.provider import Group
from harness.cluster.local import LocalCluster
from tests.conftest import eventually
from tests.integration.clusters import etcd_get, etcd_put, netns_ok, start_cluster

pytestmark = pytest.mark.integration

NAMES = ("e1", "e2", "e3")
CUT_OFF = (ConnectionTimeoutError, ConnectionFailedError, grpc.RpcError)  # what a cut-off member answers



def make_cluster(request, tmp_path, netns: bool) -> LocalCluster:
    return start_cluster(request, tmp_path / "logs", Group(kind=etcd.EtcdKind(), names=NAMES), netns=netns)


put, get = etcd_put, etcd_get


@pytest.fixture
def cluster(request, tmp_path):
    return make_cluster(request, tmp_path, netns=False)


def test_every_member_writes_and_reads_and_one_leads(cluster):
    nodes = cluster.nodes
    for n in nodes:
        put(n, f"k-{n.name}", f"from-{n.name}")
    for reader in nodes:
        for writer in nodes:
            assert get(reader, f"k-{writer.name}") == f"from-{writer.name}"

    lead = etcd.leader(nodes)
    assert lead in NAMES
    ids = {n.name: etcd.status(n)["header"]["member_id"] for n in nodes}
    assert all(etcd.status(n)["leader"] == ids[lead] for n in nodes)

    kind = etcd.EtcdKind()
    for n in nodes:
        assert abs(kind.read_clock(n) - time.time()) < 2.0  # 1 s resolution, midpoint
        assert abs(cluster.read_clock_offset(n.name)) < 2.0
    assert abs(etcd.read_clock_precise(nodes[0]) - time.time()) < 0.2


def test_killed_follower_restarts_with_its_data_and_serves(cluster):
    nodes = cluster.nodes
    put(nodes[0], "before", "1")
    lead = etcd.leader(nodes)
    follower = next(n for n in nodes if n.name != lead)
    others = [n for n in nodes if n.name != follower.name]

    cluster.kill(follower.name)
    assert cluster.pids(follower.name) == []
    put(others[0], "while-down", "2")  # two of three still make a quorum

    t = time.monotonic()
    cluster.restart(follower.name)
    print(f"\netcd follower restart took {time.monotonic() - t:.2f}s")
    assert get(follower, "before") == "1"  # kept its data dir
    assert get(follower, "while-down") == "2"  # caught up from the leader
    put(follower, "after", "3")
    assert get(others[0], "after") == "3"
    assert etcd.leader(nodes) in NAMES


@pytest.mark.skipif(not netns_ok(), reason="network namespaces unavailable here")
def test_isolated_leader_cannot_write_until_healed(request, tmp_path):
    cluster = make_cluster(request, tmp_path, netns=True)
    nodes = cluster.nodes
    assert all(n.host.startswith("198.1") for n in nodes)
    victim = cluster.node(etcd.leader(nodes))
    majority = [n for n in nodes if n.name != victim.name]

    t0 = time.monotonic()
    cluster.partition({victim.name: [n.name for n in majority],
                       **{n.name: [victim.name] for n in majority}})
    # A timeout (an "info" op for a lock client: the write may yet happen), not an error.
    # grpc sometimes reports the deadline as a bare UNKNOWN "context deadline exceeded".
    with pytest.raises(CUT_OFF):
        put(victim, "cut", "lost", timeout=1.5)
    # The majority elects a new leader and writes; the old leader cannot.
    eventually(lambda: put(majority[0], "cut", "majority", timeout=1.0), timeout=15, step=0.2, until=None)
    majority_wrote = time.monotonic() - t0
    assert etcd.leader(nodes) in {n.name for n in majority}
    with pytest.raises(CUT_OFF):
        get(victim, "cut", timeout=1.5)  # a linearizable read needs a quorum too
    # The harness still reaches the cut-off member, so its clock can still be read.
    assert abs(cluster.read_clock_offset(victim.name)) < 2.0

    t1 = time.monotonic()
    cluster.heal()
    assert eventually(lambda: get(victim, "cut", timeout=1.0), timeout=15, step=0.2, until=None) == "majority"
    caught_up = time.monotonic() - t1
    eventually(lambda: put(victim, "healed", "yes", timeout=1.0), timeout=15, step=0.2, until=None)
    assert get(majority[1], "healed") == "yes"
    print(f"\netcd partition: majority wrote {majority_wrote:.2f}s after the cut, "
          f"old leader read the write {caught_up:.2f}s after heal")
