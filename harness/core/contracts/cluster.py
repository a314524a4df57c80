"""Clusters: real servers, and the optional capabilities a provider may offer.

`Cluster` is only up/down/nodes. Pausing, clock control and partitions are separate
Protocols (ProcessControl, ClockControl, NetworkControl); a nemesis checks for them with
isinstance and refuses with a clear message when the provider lacks one.

A `ServerKind` is everything about one kind of server (valkey, etcd, zookeeper): its node
names, packages, image, argv, config files, readiness probes and how its clock moves and
reads back. It must not manage processes itself; the provider starts, stops and signals them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence, runtime_checkable

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
    wrap: tuple[str, ...] = ()  # an external client's command runs after this (a container elsewhere), else here


@runtime_checkable
class ControlsClients(Protocol):
    """A cluster whose client processes run elsewhere (the swarm's `-o clients_on`): the worker
    on this machine records the ops, and these pause, resume and kill worker i's client process
    where it runs, beside the worker's own SIGSTOP / SIGCONT / SIGKILL."""

    def clients_elsewhere(self) -> bool: ...

    def pause_client(self, index: int) -> None: ...

    def resume_client(self, index: int) -> None: ...

    def kill_client(self, index: int) -> dict: ...  # {"containers": [...], "gone": bool}


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


@runtime_checkable
class CutsOneWay(Protocol):
    """Optional NetworkControl capability: cut one direction of a client's links, so a request
    and its reply can be lost apart (cut-in-flight -o lose=request|reply)."""

    def cut_one_way(self, client: str, servers: Iterable[str], lose: str) -> None:
        """lose="reply": drop what `servers` send to `client` (its requests arrive and are acted
        on; the replies never come back). lose="request": refuse what `client` sends to
        `servers` with a TCP reset, so nothing it sends reaches them and its connections are
        reset (nothing is retransmitted after the heal). Replaces the previous cut; `heal()`
        removes it. Must not touch any other namespace than the client's."""


@runtime_checkable
class Provider(Protocol):
    """A cluster provider (`--cluster NAME`) is a module with these four functions, named in
    harness.core.plugins.PROVIDERS: adding one is that module plus that line."""

    def make_cluster(self, spec: Any, run_id: str, log_dir: Any, groups: Sequence[Any]) -> Cluster:
        """The run's Cluster (not up yet) for its groups: the lock servers, then the store."""

    def preflight(self, spec: Any, kind: str) -> None:
        """What the run needs (binaries, an engine, hosts), checked before its run dir exists:
        MissingDependency or BadArgument, one sentence."""

    def remove_run(self, run_id: str, state: Mapping[str, Any] | None) -> list[str]:
        """`chaos cluster down`: remove what only this provider can find of a run (its
        recorded state.json, or None when that is gone), saying what went. The reaper
        sweeps processes, cgroups, namespaces and the state dir for every provider."""

    def leftover_runs(self) -> set[str]:
        """Run ids this provider finds leftovers of without a state dir (containers)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Shape:
    """What a slow link does to the packets towards its target: held `delay_ms` +- `jitter_ms`,
    lost with probability `loss`, sent at most `rate_kbit` kbit/s (0: unlimited)."""

    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    loss: float = 0.0
    rate_kbit: int = 0

    def words(self) -> str:
        parts = []
        if self.delay_ms or self.jitter_ms:
            parts.append(f"+{self.delay_ms:g} ms" + (f" +-{self.jitter_ms:g}" if self.jitter_ms else ""))
        if self.loss:
            parts.append(f"{self.loss:.0%} loss")
        if self.rate_kbit:
            parts.append(f"{self.rate_kbit} kbit/s")
        return ", ".join(parts) or "no change"


@runtime_checkable
class ShapesLinks(Protocol):
    """Optional: a cluster that can slow chosen links down (harness/cluster/shaping.py).
    `shape_links` replaces the last shape and returns what it measured; `unshape_links`
    removes all of it and is safe to call twice."""

    def shape_links(self, pairs: Sequence[tuple[str, str]], shape: Shape, *, seed: int = 0,
                    probes: int = 5) -> dict: ...

    def unshape_links(self) -> None: ...


class ServerKind(Protocol):
    """Everything about one kind of server, in one class: how it is named, installed, packaged
    in an image, configured, started, probed and clock-moved. Every provider (local, compose,
    ssh) reads these attributes; none keeps a table of its own per kind, so a new kind is its
    module plus one line in harness/cluster/kinds.py (docs/extending.md).

    Pure configuration plus probes: it must not start, stop or signal a process (the provider
    does), and its attributes must not depend on the host it runs on."""

    name: str  # what a backend's `servers = (name, count)` says, and Node.kind
    prefix: str  # node names are prefix + ordinal: "e" -> e1, e2, e3
    default_port: int  # the client port (in a namespace, a container, on a host)
    peer_ports: tuple[int, int]  # peer and election ports in its container; 0: none (compose)
    binary: str  # the program, as named on the PATH of a host and of its image
    image: str  # the container image the compose provider runs (`make compose` builds it)
    compose_hosts: range  # its servers' host numbers in the compose network: how many it offers
    health: tuple[str, ...]  # the image's healthcheck command, with {host} and {port} to fill in
    debs: tuple[str, ...]  # Debian packages the ssh provider installs on a host that lacks it
    host_check: str  # sh that succeeds on a host that has it ("": nothing to install)
    strip_env: tuple[str, ...]  # prefixes of inherited variables it would read as configuration
    data_dir_mode: int | None  # the data dir's mode, when the server insists on one
    clock_methods: tuple[str, ...]  # how its clock can be moved: "faketime" (started under
    #   libfaketime: wall and monotonic clocks) and/or "timewarp" (vDSO patch: wall clock only)
    clock_method: str | None  # the one a clock nemesis uses in this run (the options may choose)
    clock_expiry: bool  # whether a clock move moves its lock expiry (recorded for checkers)
    clock_read_error_s: float  # how far off read_clock may be beyond the request itself
    persists: bool  # whether a server's data survives a kill
    sessions: bool  # whether its locks live as long as a client session or lease
    stops_together: bool  # whether teardown may SIGTERM all its servers at once (etcd's leader
    #   hands over leadership on SIGTERM and waits for a peer to take it, so etcd stops one by one)

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> ServerKind:
        """The kind as a run's options configure it (harness/core/options.py CLUSTER_OPTIONS:
        appendonly, zk_clock); how the registry makes one."""

    def check_installed(self) -> None:
        """Raise MissingDependency naming the package to install (the local provider)."""

    def config_files(self, node: Node, peers: Sequence[Node]) -> dict[str, str]:
        """The files, by name in its data dir, it reads at start (each provider writes them
        its own way). Rewritten before every start, so a wiped node starts as a new one."""

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


@runtime_checkable
class ShipsBinary(Protocol):
    """Optional ServerKind capability: a server no Debian package provides. The ssh provider
    runs the host's own binary when `host_binary` (sh) prints its path, else copies
    `local_binary()` from this machine to the host."""

    def host_binary(self, faked: bool) -> str:
        """sh that prints the path of a usable binary on a host, or nothing; `faked`: it
        will run under libfaketime."""

    def local_binary(self) -> str: ...


@runtime_checkable
class ClockInLog(Protocol):
    """Optional ServerKind capability: read_clock reads the server's own log at node.log_path.
    A provider whose logs are elsewhere (ssh: on the host) passes the log in instead."""

    def read_clock_from(self, node: Node, size: Callable[[], int], read_from: Callable[[int], str]) -> float:
        """read_clock with the log reached through `size()` (its length now) and
        `read_from(offset)` (its text from there)."""


@dataclass(slots=True)
class ProcState:
    """Mutable runtime state of one server process (provider-internal)."""

    pid: int = 0
    paused: bool = False
    alive: bool = False
    extra: dict = field(default_factory=dict)
