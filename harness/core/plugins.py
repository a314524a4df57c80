"""Where backends and nemeses come from: the built-ins, plus entry points.

A user tests their own lock client without forking chaoslock by declaring, in their own
package's pyproject.toml:

    [project.entry-points."chaoslock.backends"]
    mylock = "mypkg.lock:MyLockClient"

The class must implement harness.core.contracts.client.LockClient, take `(options, clock)` and declare
`servers = (kind, count)` for the cluster it needs ("valkey", "etcd" or "zookeeper").
Nemeses register the same way under "chaoslock.nemeses".
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

from harness.core.errors import BadArgument

BACKENDS = {
    "redlock": "workloads.redlock:RedlockClient",
    "redis": "workloads.redis_single:RedisSingleClient",
    "redis-unsafe-release": "workloads.redis_misuse:UnsafeReleaseClient",
    "redis-setnx-expire": "workloads.redis_misuse:SetnxExpireClient",
    "zookeeper": "workloads.zookeeper:ZooKeeperClient",
    "zookeeper-recipe": "workloads.zookeeper:KazooRecipeClient",
    "etcd": "workloads.etcd:EtcdClient",
    "etcd-recipe": "workloads.etcd:EtcdRecipeClient",
    "pottery": "workloads.libraries:PotteryClient",
    "python-redis-lock": "workloads.libraries:PythonRedisLockClient",
    "external": "workloads.external:ExternalClient",  # any program speaking the client protocol (--client)
}

NEMESES = {
    "none": "nemesis.base:Noop",
    "clock-skew": "nemesis.clock:ClockSkew",
    "pause": "nemesis.process:Pause",
    "pause-holder": "nemesis.process:PauseHolder",
    "pause-waiter": "nemesis.client:PauseWaiter",
    "kill-holder": "nemesis.client:KillHolder",
    "cut-in-flight": "nemesis.inflight:CutInFlight",
    "partition-waiter": "nemesis.client:PartitionWaiter",
    "kill": "nemesis.process:Kill",
    "partition": "nemesis.partition:Partition",
    "partition-client": "nemesis.partition:PartitionClient",
    "slow-link": "nemesis.link:SlowLink",
}

# Cluster providers (`--cluster`): a module implementing harness.core.contracts.cluster.Provider
# (make_cluster, preflight, remove_run, leftover_runs). Named here, loaded only when used.
PROVIDERS = {
    "local": "harness.cluster.local",
    "compose": "harness.cluster.compose",
    "ssh": "harness.cluster.ssh",
    "swarm": "harness.cluster.swarm",
}


def _load(ref: str):
    mod, _, attr = ref.partition(":")
    return getattr(importlib.import_module(mod), attr)


def _registry(builtin: dict[str, str], group: str) -> dict[str, str]:
    found = dict(builtin)
    for ep in entry_points(group=group):
        found.setdefault(ep.name, ep.value)
    return found


def backend_names() -> list[str]:
    return sorted(_registry(BACKENDS, "chaoslock.backends"))


def nemesis_names() -> list[str]:
    return sorted(_registry(NEMESES, "chaoslock.nemeses"))


def backend_class(name: str):
    reg = _registry(BACKENDS, "chaoslock.backends")
    if name not in reg:
        raise BadArgument(f"unknown backend {name!r}; choose one of: {', '.join(sorted(reg))}")
    return _load(reg[name])


def servers_of(backend: str, options) -> tuple[str, int]:
    """(kind, count) of a backend's lock service: its `servers`, or what its options choose
    (a class with `servers_for(options)`, harness.core.contracts.client.ChoosesServers: an external client's
    --servers)."""
    cls = backend_class(backend)
    choose = getattr(cls, "servers_for", None)
    return choose(options) if callable(choose) else cls.servers


def provider_names() -> list[str]:
    return list(PROVIDERS)


def provider(name: str):
    """The provider module called `name` (a --cluster value)."""
    if name not in PROVIDERS:
        raise BadArgument(f"unknown cluster provider {name!r}; choose one of: {', '.join(PROVIDERS)}")
    return importlib.import_module(PROVIDERS[name])


def nemesis_class(name: str):
    reg = _registry(NEMESES, "chaoslock.nemeses")
    if name not in reg:
        raise BadArgument(f"unknown nemesis {name!r}; choose one of: {', '.join(sorted(reg))}")
    return _load(reg[name])
