"""The server-kind registry: one line per kind, its name and the class that knows it.

A backend names the kind it needs in `servers = (kind, count)`; every provider asks here for
the ServerKind of that name and reads all it needs from it (node names, packages, image,
ports, argv, configs, readiness, how its clock moves), so no provider keeps a table per kind
and a new kind is its own module plus one line in `KINDS` (docs/extending.md). Classes are
named as "module:Class" strings and imported on first use, as the backends are
(harness/core/plugins.py): a run loads only the kinds it runs.
"""

from __future__ import annotations

import importlib
from typing import Any, Mapping

from harness.core.contracts.cluster import ServerKind
from harness.core import plugins
from harness.core.errors import BadArgument

KINDS: dict[str, str] = {
    "valkey": "harness.cluster.valkey:ValkeyKind",
    "etcd": "harness.cluster.etcd:EtcdKind",
    "zookeeper": "harness.cluster.zookeeper:ZooKeeperKind",
}


def kind_class(name: str) -> type:
    """The ServerKind class registered as `name`, for its class attributes (prefix, image...)."""
    try:
        module, _, cls = KINDS[name].partition(":")
    except (KeyError, TypeError):
        raise BadArgument(f"unknown server kind {name!r}; a backend's `servers` must name one of: "
                          f"{', '.join(KINDS)}") from None
    return getattr(importlib.import_module(module), cls)


def server_kind(name: str, options: Mapping[str, Any] | None = None) -> ServerKind:
    """The ServerKind called `name`, configured by the run's cluster options (appendonly, zk_clock)."""
    return kind_class(name).from_options(options or {})


def servers_of(backend: str, options: Mapping[str, Any]) -> tuple[str, int]:
    """(kind, count) of a backend's lock service (harness/core/plugins.py)."""
    return plugins.servers_of(backend, options)


def node_names(kind: str, count: int) -> tuple[str, ...]:
    """n1..n5, e1..e3, z1..z3: the kind's prefix and an ordinal."""
    return tuple(f"{kind_class(kind).prefix}{i}" for i in range(1, count + 1))


def recorded_facts(kind: ServerKind) -> dict:
    """What the kind itself says of the facts a run records for its checkers
    (harness/core/facts.py), so a kind facts.py has never heard of is recorded right too."""
    return {"clock_expiry": kind.clock_expiry, "persists": kind.persists, "sessions": kind.sessions}
