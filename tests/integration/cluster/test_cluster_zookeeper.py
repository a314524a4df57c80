"""Three real ZooKeeper 3.8 servers under LocalCluster: serve, elect, rejoin, partition, clock.

Each test gets its own ensemble and run id; the finalizer stops it and checks that no
process carrying the run id survives and that the state dir is gone.
"""

from __future__ import annotations

import os
import time

import pytest

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NodeExistsError
from kazoo.handlers.threading import KazooTimeoutError

from harness.cluster import zookeeper as zk
from harness.cluster.provider import FAKETIME_LIB, Group
from harness.cluster.local import LocalCluster
from tests.conftest import eventually, installed
from tests.integration.clusters import netns_ok, start_cluster

pytestmark = pytest.mark.integration

NAMES = ("z1", "z2", "z3")
SESSION_S = 4.0  # within the 1..30 s our zoo.cfg allows



def make_cluster(request, tmp_path, *, netns: bool = False, fake_clock: bool = False) -> LocalCluster:
    clients: list[KazooClient] = []

    def close_clients() -> None:  # before down(), so no kazoo thread outlives the servers
        for c in clients:
            try:
                c.stop()
                c.close()
            except Exception:
                pass

    group = Group(kind=zk.ZooKeeperKind(), names=NAMES, fake_clock=fake_clock)
    cluster = start_cluster(request, tmp_path / "logs", group, netns=netns, before_down=close_clients)
    cluster.test_clients = clients
    return cluster


def connect(cluster, *nodes, timeout: float = 5.0) -> KazooClient:
    """A started kazoo client that may talk only to `nodes`; closed by the finalizer."""
    c = KazooClient(hosts=",".join(n.endpoint for n in nodes), timeout=SESSION_S)
    cluster.test_clients.append(c)
    c.start(timeout=timeout)
    return c


def read(c: KazooClient, path: str) -> bytes:
    """Reads are served locally by ZooKeeper; sync() first makes this one up to date."""
    c.sync(path)
    return c.get(path)[0]


def create_once(c: KazooClient, path: str, value: bytes) -> None:
    """Create, tolerating that an earlier attempt whose answer was lost succeeded."""
    try:
        c.create(path, value)
    except NodeExistsError:
        assert c.get(path)[0] == value


@pytest.fixture
def cluster(request, tmp_path):
    return make_cluster(request, tmp_path)


def test_every_server_writes_and_reads_and_one_leads(cluster):
    nodes = cluster.nodes
    clients = {n.name: connect(cluster, n) for n in nodes}
    for name, c in clients.items():
        c.create(f"/k-{name}", f"from-{name}".encode())
    for c in clients.values():
        for name in NAMES:
            assert read(c, f"/k-{name}") == f"from-{name}".encode()

    modes = {n.name: zk.mode(n) for n in nodes}
    lead = zk.leader(nodes)
    assert lead in NAMES and modes[lead] == "leader"
    assert sorted(modes.values()) == ["follower", "follower", "leader"]

    kind = zk.ZooKeeperKind()
    for n in nodes:
        assert abs(kind.read_clock(n) - time.time()) < 0.5  # ms resolution
        assert abs(cluster.read_clock_offset(n.name)) < 0.5


def test_killed_follower_restarts_with_its_data_and_serves(cluster):
    nodes = cluster.nodes
    lead = zk.leader(nodes)
    follower = next(n for n in nodes if n.name != lead)
    others = [n for n in nodes if n.name != follower.name]
    connect(cluster, *nodes).create("/before", b"1")

    cluster.kill(follower.name)
    assert zk.mode(follower) == "down"
    connect(cluster, *others).create("/while-down", b"2")  # two of three still make a quorum

    t = time.monotonic()
    cluster.restart(follower.name)
    print(f"\nzookeeper follower restart took {time.monotonic() - t:.2f}s")
    assert zk.mode(follower) == "follower"
    c = connect(cluster, follower)
    assert read(c, "/before") == b"1"
    assert read(c, "/while-down") == b"2"
    c.create("/after", b"3")
    assert read(connect(cluster, others[0]), "/after") == b"3"
    assert zk.leader(nodes) == lead  # a follower's return does not force an election


def test_read_clock_sees_a_libfaketime_skew(request, tmp_path):
    installed(os.path.exists(FAKETIME_LIB), f"{FAKETIME_LIB} (apt package libfaketime)")
    cluster = make_cluster(request, tmp_path, fake_clock=True)
    victim = cluster.nodes[0]
    assert abs(cluster.read_clock_offset(victim.name)) < 0.5
    cluster.set_clock(victim.name, 30.0)
    assert abs(cluster.read_clock_offset(victim.name) - 30.0) < 0.5
    assert abs(cluster.read_clock_offset(cluster.nodes[1].name)) < 0.5  # only that node moved
    cluster.set_clock(victim.name, 0.0)


@pytest.mark.skipif(not netns_ok(), reason="network namespaces unavailable here")
def test_isolated_leader_cannot_write_until_healed(request, tmp_path):
    cluster = make_cluster(request, tmp_path, netns=True)
    nodes = cluster.nodes
    assert all(n.host.startswith("198.1") for n in nodes)
    victim = cluster.node(zk.leader(nodes))
    majority = [n for n in nodes if n.name != victim.name]
    on_victim = connect(cluster, victim)
    on_majority = connect(cluster, *majority)

    t0 = time.monotonic()
    cluster.partition({victim.name: [n.name for n in majority],
                       **{n.name: [victim.name] for n in majority}})
    # Proposed but never acknowledged by a quorum: when the leader steps down it drops
    # the connection, so the client sees ConnectionLoss (an "info" op for a lock client).
    with pytest.raises((KazooException, KazooTimeoutError)):
        on_victim.create_async("/cut", b"lost").get(timeout=15)
    eventually(lambda: zk.mode(victim) == "looking", step=0.2)
    stepped_down = time.monotonic() - t0
    with pytest.raises(KazooTimeoutError):
        KazooClient(hosts=victim.endpoint, timeout=SESSION_S).start(timeout=3)
    # The harness still reaches the cut-off server, so its clock can still be read.
    assert abs(cluster.read_clock_offset(victim.name)) < 0.5

    eventually(lambda: create_once(on_majority, "/cut", b"majority"), step=0.2, until=None)
    majority_wrote = time.monotonic() - t0
    assert zk.leader(nodes) in {n.name for n in majority}

    t1 = time.monotonic()
    cluster.heal()
    eventually(lambda: zk.mode(victim) == "follower", step=0.2)
    assert eventually(lambda: read(connect(cluster, victim), "/cut"), step=0.2, until=None) == b"majority"
    print(f"\nzookeeper partition: old leader stepped down after {stepped_down:.2f}s, majority "
          f"wrote after {majority_wrote:.2f}s, victim served again {time.monotonic() - t1:.2f}s after heal")
