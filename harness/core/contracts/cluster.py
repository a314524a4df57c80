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
    from harness.core.errors import BadArgument

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
    from harness.core.errors import BadArgument

    try:
        return nodes[name]
    except KeyError:
        raise BadArgument(f"no node named {name!r}; nodes are: {', '.join(nodes)}") from None


MAX_CLIENT_HOSTS = 64  # client namespaces of a run; workers beyond share them, in turn


def client_hosts(clients: int) -> int:
    """How many client namespaces a run of `clients` workers gets."""
    return max(1, min(clients, MAX_CLIENT_HOSTS))


def client_host(index: int, clients: int) -> str:
    """The client host (namespace name) worker `index` runs in: c1..c64, shared beyond 64."""
    return f"c{index % client_hosts(clients) + 1}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientPlace:
    """Where client worker i runs and how it reaches the lock service."""

    netns: str | None  # network namespace the worker enters; None: the harness's own
    nodes: tuple[Node, ...]  # the lock servers as this client reaches them (its own proxies, on compose)


@runtime_checkable
class Cluster(Protocol):
    """Real servers: `up` starts and waits for them (and cleans up if it fails), `down`
    stops everything this cluster started and removes what it created, idempotent, never
    raising. `fallback_reason` says why it runs with less than it could (loopback instead
    of namespaces), None when it does not."""

    run_id: str
    fallback_reason: str | None

    def up(self) -> None: ...

    def down(self) -> None: ...

    @property
    def nodes(self) -> Sequence[Node]: ...

    def node(self, name: str) -> Node: ...

    def client(self, index: int) -> ClientPlace: ...


@runtime_checkable
class ProcessControl(Protocol):
    def pids(self, name: str) -> list[int]: ...

    def pause(self, name: str) -> None: ...

    def resume(self, name: str) -> None: ...

    def kill(self, name: str) -> None: ...

    def restart(self, name: str, *, wipe: bool = False) -> None: ...


@runtime_checkable
class ClockControl(Protocol):
    """Moving servers' wall clocks. Only the nodes `movable_clocks()` names can be moved;
    how (libfaketime, a vDSO patch, a bind-mounted timestamp file) is the provider's affair."""

    def movable_clocks(self) -> list[str]: ...

    def set_clock(self, name: str, offset_s: float, rate: float = 1.0) -> None: ...

    def read_clock_offset(self, name: str) -> float: ...


@runtime_checkable
class SetsClocksTogether(Protocol):
    """Optional ClockControl capability: move several clocks in one step (a provider whose
    each set_clock is a network round trip, so a jump lands on every target at once)."""

    def set_clocks(self, offsets: Mapping[str, float]) -> None: ...


@runtime_checkable
class NetworkControl(Protocol):
    """Cutting links between hosts (servers by node name, clients as c1..cN). Only a
    provider that really can cut them implements it."""

    def partition(self, grudge: Mapping[str, Iterable[str]]) -> None:
        """Cut each (a, b in grudge[a]) both ways; replaces the previous cut."""

    def heal(self) -> None: ...

    def reaches(self, src: str, dst: str) -> bool:
        """Whether host src can open a connection to node dst now (the cut's proof)."""


class ServerKind(Protocol):
    """How to run one kind of server. Pure configuration plus probes; no process handling."""

    name: str
    default_port: int
    fakes_clock: bool  # whether libfaketime reaches its clock reads

    def check_installed(self) -> None:
        """Raise MissingDependency naming the package to install."""

    def prepare(self, node: Node, peers: Sequence[Node]) -> None:
        """Create data dir and config files. Must be idempotent for a restart."""

    def argv(self, node: Node, peers: Sequence[Node], binary: str | None = None) -> list[str]:
        """The server's command line; `binary` is the program to run (its path on this host
        when None; the compose provider names the one inside its image)."""

    def env(self, node: Node) -> dict[str, str]:
        """Extra environment for the server process (the provider adds CHAOSLOCK_RUN)."""

    def node_ready(self, node: Node) -> bool:
        """True when this one server answers its client protocol."""

    def cluster_ready(self, nodes: Sequence[Node]) -> bool:
        """True when the group as a whole serves (e.g. a leader elected)."""

    def read_clock(self, node: Node) -> float:
        """The server's own idea of the wall-clock time, in seconds since the epoch."""


@runtime_checkable
class CountsRequests(Protocol):
    """Optional ServerKind capability: a server-side count of the requests it has served
    (the herd effect is measured as requests per grant)."""

    def requests_served(self, node: Node) -> int: ...


@runtime_checkable
class HasLeader(Protocol):
    """Optional ServerKind capability: the kind elects a leader, and can name it."""

    def leader(self, nodes: Sequence[Node]) -> str | None:
        """The leader's node name, or None while there is none a majority agrees on."""


@dataclass(slots=True)
class ProcState:
    """Mutable runtime state of one server process (provider-internal)."""

    pid: int = 0
    paused: bool = False
    alive: bool = False
    extra: dict = field(default_factory=dict)
