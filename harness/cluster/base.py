"""Clusters: real servers, and the optional capabilities a provider may offer.

`Cluster` is only up/down/nodes. Pausing, clock control and partitions are separate
Protocols (ProcessControl, ClockControl, NetworkControl); a nemesis checks for them with
isinstance and refuses with a clear message when the provider lacks one.

A `ServerKind` knows how to run one kind of server (valkey, etcd, zookeeper): its argv,
config files, readiness probes and clock read-back. It must not manage processes itself;
the provider starts, stops and signals them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Protocol, Sequence, runtime_checkable

# A run id names paths, processes, namespaces and iptables comments, so nothing else may
# pass for one: six lowercase hex characters (results.store.new_run_id makes them).
RUN_ID = re.compile(r"[0-9a-f]{6}")


def check_run_id(run_id: object) -> str:
    """The run id itself, or a BadArgument if it is anything but six lowercase hex digits."""
    from harness.errors import BadArgument

    if not isinstance(run_id, str) or not RUN_ID.fullmatch(run_id):
        shown = repr(run_id) if len(repr(run_id)) <= 40 else repr(run_id)[:37] + "..."
        raise BadArgument(f"{shown} is not a run id (six lowercase hex characters, like 3f9a0c); "
                          f"`chaos cluster status` lists the runs there are")
    return run_id


@dataclass(frozen=True, slots=True, kw_only=True)
class Node:
    """One server as clients see it. Runtime state (pid, paused) lives in the provider."""

    name: str  # "n1" .. ; "store" for the never-faulted resource server
    kind: str  # "valkey" | "etcd" | "zookeeper"
    role: str = "lock"  # "lock" (part of the lock service) | "store" (the fenced resource)
    host: str  # address clients connect to
    port: int  # client port
    peer_port: int = 0  # etcd peer / zookeeper quorum port
    election_port: int = 0  # zookeeper leader election port
    netns: str | None = None
    data_dir: str = ""
    log_path: str = ""
    clock_file: str | None = None  # libfaketime FAKETIME_TIMESTAMP_FILE, when faked
    ordinal: int = 1  # 1-based position within its kind (zookeeper myid)

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.port}"

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__slots__}


def node_named(nodes: Mapping[str, Node], name: str) -> Node:
    """One node by name, or a BadArgument listing the names there are."""
    from harness.errors import BadArgument

    try:
        return nodes[name]
    except KeyError:
        raise BadArgument(f"no node named {name!r}; nodes are: {', '.join(nodes)}") from None


@runtime_checkable
class Cluster(Protocol):
    run_id: str

    def up(self) -> None: ...

    def down(self) -> None: ...

    @property
    def nodes(self) -> Sequence[Node]: ...

    def node(self, name: str) -> Node: ...


@runtime_checkable
class ProcessControl(Protocol):
    def pids(self, name: str) -> list[int]: ...

    def pause(self, name: str) -> None: ...

    def resume(self, name: str) -> None: ...

    def kill(self, name: str) -> None: ...

    def restart(self, name: str, *, wipe: bool = False) -> None: ...


@runtime_checkable
class ClockControl(Protocol):
    def set_clock(self, name: str, offset_s: float, rate: float = 1.0) -> None: ...

    def read_clock_offset(self, name: str) -> float: ...


@runtime_checkable
class NetworkControl(Protocol):
    def partition(self, grudge: Mapping[str, Iterable[str]]) -> None: ...

    def heal(self) -> None: ...


class ServerKind(Protocol):
    """How to run one kind of server. Pure configuration plus probes; no process handling."""

    name: str
    default_port: int
    fakes_clock: bool  # whether libfaketime reaches its clock reads

    def check_installed(self) -> None:
        """Raise MissingDependency naming the package to install."""

    def prepare(self, node: Node, peers: Sequence[Node]) -> None:
        """Create data dir and config files. Must be idempotent for a restart."""

    def argv(self, node: Node, peers: Sequence[Node]) -> list[str]: ...

    def env(self, node: Node) -> dict[str, str]:
        """Extra environment for the server process (the provider adds CHAOSLOCK_RUN)."""

    def node_ready(self, node: Node) -> bool:
        """True when this one server answers its client protocol."""

    def cluster_ready(self, nodes: Sequence[Node]) -> bool:
        """True when the group as a whole serves (e.g. a leader elected)."""

    def read_clock(self, node: Node) -> float:
        """The server's own idea of the wall-clock time, in seconds since the epoch."""


@dataclass(slots=True)
class ProcState:
    """Mutable runtime state of one server process (provider-internal)."""

    pid: int = 0
    paused: bool = False
    alive: bool = False
    extra: dict = field(default_factory=dict)
