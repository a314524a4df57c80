"""Helpers shared by the cluster and nemesis tests: start a real cluster for one test (or
class) and prove on the way down that nothing of it survived; etcd reads and writes."""

from __future__ import annotations

import secrets
import subprocess
import time
from pathlib import Path
from typing import Callable

import pytest

from harness.cluster import etcd
from harness.cluster.local import Group, LocalCluster
from harness.cluster.reaper import processes


def netns_ok() -> bool:
    try:
        from harness.cluster.netns import netns_available
    except ImportError:
        return False
    return netns_available() is None


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def start_cluster(request, log_dir: Path, group: Group, *, netns: bool, clients: int = 0,
                  before_down: Callable[[], None] | None = None) -> LocalCluster:
    """Up a cluster of one group; its finalizer stops it and asserts no process, state dir or
    namespace of the run is left. Skips (naming the package) when the server is missing."""
    try:
        group.kind.check_installed()
    except Exception as e:  # MissingDependency: say so instead of failing obscurely
        pytest.skip(str(e))
    run_id = secrets.token_hex(3)
    cluster = LocalCluster(run_id, [group], netns=netns, clients=clients, log_dir=log_dir)
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
