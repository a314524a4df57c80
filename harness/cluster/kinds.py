"""The server-kind registry: which ServerKind runs "valkey", "etcd" or "zookeeper".

A backend names the kind it needs in `servers = (kind, count)`; every provider asks here
for the object that knows that kind's argv, configs, readiness and clock read-back, so no
provider imports another's assembly code. Node names are the kind's prefix and an ordinal
(n1..n5, e1..e3, z1..z3).
"""

from __future__ import annotations

from typing import Any, Mapping

from harness.core.contracts.cluster import ServerKind
from harness.core import plugins
from harness.core.errors import BadArgument
from harness.core.facts import clock_expiry
from harness.core.options import cluster_option

KINDS = ("valkey", "etcd", "zookeeper")
PREFIX = {"valkey": "n", "etcd": "e", "zookeeper": "z"}


def server_kind(name: str, options: Mapping[str, Any] | None = None) -> ServerKind:
    """The ServerKind called `name`, configured by the run's cluster options (appendonly)."""
    if name == "valkey":
        from harness.cluster.valkey import ValkeyKind

        return ValkeyKind(appendonly=cluster_option(options or {}, "appendonly"))
    if name == "etcd":
        from harness.cluster.etcd import EtcdKind

        return EtcdKind()
    if name == "zookeeper":
        from harness.cluster.zookeeper import ZooKeeperKind

        return ZooKeeperKind()
    raise BadArgument(f"unknown server kind {name!r}; a backend's `servers` must name one of: {', '.join(KINDS)}")


def faketime_moves(kind: str, options: Mapping[str, Any] | None = None) -> bool:
    """Whether a kind's clock is moved through libfaketime (so its servers must start under
    it): valkey always; ZooKeeper only with zk_clock=faketime (else the vDSO patch moves
    the JVM's wall clock); etcd never (Go reads time through the vDSO). The same fact a
    checker reads as whether a clock move reaches expiry (harness/core/facts.py)."""
    return clock_expiry(kind, options)


def servers_of(backend: str, options: Mapping[str, Any]) -> tuple[str, int]:
    """(kind, count) of a backend's lock service (harness/core/plugins.py)."""
    return plugins.servers_of(backend, options)


def node_names(kind: str, count: int) -> tuple[str, ...]:
    return tuple(f"{PREFIX[kind]}{i}" for i in range(1, count + 1))
