"""Helpers shared by the cluster and nemesis tests: start a real cluster for one test (or
class, or package) and prove on the way down that nothing of it survived; etcd and
ZooKeeper reads and writes; the clock jumps of a run's history."""

from __future__ import annotations

import secrets
import subprocess
import time
from pathlib import Path
from typing import Callable


from harness.cluster import etcd
from harness.cluster.provider import Group
from harness.cluster.local import LocalCluster, local_cluster
from harness.cluster.reaper import processes
from harness.core.errors import MissingDependency
from tests.conftest import installed


def netns_ok() -> bool:
    from harness.cluster.netns import netns_available

    return netns_available() is None


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def start_cluster(request, log_dir: Path | None, group: Group, *, netns: bool, clients: int = 0,
                  before_down: Callable[[], None] | None = None) -> LocalCluster:
    """Up a cluster of one group; its finalizer stops it and asserts no process, state dir or
    namespace of the run is left. Fails (naming the package) when the server is missing.
    Without a log_dir the node logs live in the state dir and go with it."""
    try:
        group.kind.check_installed()
    except MissingDependency as e:  # `make install` installs every server: missing is a failure, named
        installed(False, str(e))
    run_id = secrets.token_hex(3)
    cluster = local_cluster(run_id, [group], netns=netns, clients=clients, log_dir=log_dir)
    label = group.kind.name

    def finish() -> None:
        if before_down is not None:
            before_down()
        t = time.monotonic()
        cluster.down()
        print(f"\n{label} {run_id} down() took {time.monotonic() - t:.2f}s")
        assert list(processes(run_id)) == [], f"processes of run {run_id} survived down()"
        assert not cluster.dir.exists(), f"state dir {cluster.dir} survived down()"
        if netns:
            spaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
            assert run_id not in spaces, f"namespaces of run {run_id} survived down()"

    request.addfinalizer(finish)
    t = time.monotonic()
    cluster.up()
    rss = {n.name: rss_mb(cluster.pids(n.name)[0]) for n in cluster.nodes}
    print(f"\n{label} {run_id} up() took {time.monotonic() - t:.2f}s; RSS MB {rss}")
    return cluster


def etcd_put(node, key: str, value: str, timeout: float = 2.0) -> None:
    c = etcd.client(node, timeout)
    try:
        c.put(key, value)
    finally:
        c.close()


def etcd_get(node, key: str, timeout: float = 2.0) -> str | None:
    """A linearizable read (etcd's default) through this one member."""
    c = etcd.client(node, timeout)
    try:
        value, _ = c.get(key)
        return None if value is None else value.decode()
    finally:
        c.close()


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
    """Reads are served locally by ZooKeeper; sync() first makes this one up to date."""
    c = zk_client(node)
    try:
        c.sync(path)
        return c.get(path)[0]
    finally:
        c.stop()
        c.close()


def clock_bumps(ops: list[dict]) -> list[tuple[dict, dict]]:
    """(offsets asked, offsets read back) of each clock-bump that ended ok in a run's history.
    The nemesis runs one op at a time, so an op's invoke and its end are consecutive among the
    nemesis's clock-bumps. With the default --clock-jump (2.5 x the 2 s TTL) and jitter, what
    is asked is drawn in 5-7.5 s, to the ms (nemesis/clock.py, next_fault)."""
    nem = [o for o in ops if o["process"] == "nemesis" and o["f"] == "clock-bump"]
    return [(a["value"], d["value"]) for a, d in zip(nem, nem[1:]) if a["type"] == "invoke" and d["type"] == "ok"]
