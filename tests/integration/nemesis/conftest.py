"""The clusters the nemesis tests share: one per server kind for the whole package, and only
one up at a time, as when these tests were one file of one class per kind.

A test class asks for its kind with `@on("etcd")` (probes.py), which parametrizes the
package-scoped `cluster` fixture indirectly. pytest keeps one instance of it and brings
the previous one down when a test needs another kind; the hook below runs the tests
grouped by kind, so each cluster comes up once, and runs the tests that need no shared
cluster (whole `chaos run`s, a cluster of their own) first, while none is up.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cluster import etcd, zookeeper
from harness.cluster.provider import Group
from harness.cluster.valkey import ValkeyKind
from tests.integration.clusters import start_cluster

HERE = Path(__file__).resolve().parent
KINDS = {
    "etcd": lambda: Group(kind=etcd.EtcdKind(), names=("e1", "e2", "e3")),
    "valkey": lambda: Group(kind=ValkeyKind(), names=tuple(f"n{i}" for i in range(1, 6)), fake_clock=True),
    "zookeeper": lambda: Group(kind=zookeeper.ZooKeeperKind(), names=("z1", "z2", "z3")),
}


@pytest.fixture(scope="package")
def cluster(request):
    """The shared cluster of the kind `@on(kind)` names, with one client namespace (c1);
    skipped, naming the package, where that server is not installed."""
    return start_cluster(request, None, KINDS[request.param](), netns=True, clients=1)


def _kind(item: pytest.Item) -> str | None:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("cluster") if callspec is not None else None


@pytest.hookimpl(trylast=True)  # after pytest's own reordering
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    order = [None, *KINDS]
    slots = [i for i, item in enumerate(items) if HERE in item.path.parents]
    grouped = sorted((items[i] for i in slots), key=lambda item: order.index(_kind(item)))
    for i, item in zip(slots, grouped):
        items[i] = item
