"""Assembling a run's cluster: the lock service the backend declares, plus the store.

The backend's `servers = (kind, count)` names the lock service; one more valkey server,
`store`, holds the protected counter and is never faulted. The provider (`--cluster`)
decides how they run: local processes (namespaces when possible), Docker Compose, or the
user's own hosts over ssh.
"""

from __future__ import annotations

from pathlib import Path

from harness.cluster.kinds import node_names, server_kind, servers_of
from harness.cluster.provider import Group
from harness.cluster.valkey import ValkeyKind
from harness.core import plugins
from harness.core.contracts.cluster import Cluster
from harness.core.spec import TestSpec


def make_cluster(spec: TestSpec, run_id: str, log_dir: Path, nemeses: list) -> Cluster:
    """The lock service the backend declares, plus one never-faulted store server."""
    kind_name, count = servers_of(spec.backend, spec.options)
    # nemeses that move server clocks say so (nemesis.base.MovesServerClocks); asked by duck
    # typing, since a cluster never imports nemesis code
    moves = any(callable(getattr(n, "moves_server_clocks", None)) and n.moves_server_clocks(spec) for n in nemeses)
    kind = server_kind(kind_name, spec.options)
    # servers whose clock moves through libfaketime must start under it
    fake = moves and kind.clock_method == "faketime"
    lock = Group(kind=kind, names=node_names(kind_name, count), role="lock", fake_clock=fake)
    res = Group(kind=ValkeyKind(), names=("store",), role="store")
    return plugins.provider(spec.cluster).make_cluster(spec, run_id, log_dir, [lock, res])


def preflight(spec: TestSpec) -> None:
    """What the run's servers need installed, checked before its run dir exists: a missing
    binary is one sentence, and leaves no empty run dir behind."""
    plugins.provider(spec.cluster).preflight(spec, servers_of(spec.backend, spec.options)[0])
