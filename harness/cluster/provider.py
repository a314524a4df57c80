"""What every provider of real servers shares: the run's state dir, its groups of servers,
its cgroup, and `ServerCluster`, the base of the local, compose and ssh providers (their
nodes, where clients run, readiness, server logs and clock read-back).

A provider is one module that subclasses ServerCluster and implements the Protocols of
harness/core/contracts/cluster.py it really supports (docs/extending.md).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from harness.core.contracts.cluster import ClientPlace, CountsRequests, Node, ServerKind, check_run_id, client_hosts, node_named
from harness.cluster.containment import RunCgroup, existing as existing_cgroups
from harness.core.errors import BadArgument, ClusterError
from harness.core.outputcap import copy_capped
from harness.core.interrupts import deferred

RUN_ENV = "CHAOSLOCK_RUN"
FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"


def state_root() -> Path:
    """Where this user's state and data dirs live: tmpfs when there is one (etcd is
    fsync-bound). One root per user, so a root run never locks other users out."""
    base = Path("/dev/shm") if os.access("/dev/shm", os.W_OK) else Path(tempfile.gettempdir())
    return base / f"chaoslock-{os.geteuid()}"


def make_state_root() -> Path:
    """state_root(), created private (0700) if missing; refused if someone else owns it."""
    root = state_root()
    try:
        root.mkdir(mode=0o700, exist_ok=True)
        st = root.lstat()
    except OSError as e:
        raise BadArgument(f"cannot create the state dir {root} ({e.strerror}); make {root.parent} writable") from None
    if not root.is_dir() or root.is_symlink() or st.st_uid != os.geteuid():
        raise BadArgument(f"{root} is not a directory owned by you (uid {os.geteuid()}); remove it and run again")
    return root


@dataclass(frozen=True, slots=True, kw_only=True)
class Group:
    """Servers of one kind: `names` in order, all with `role`, clock faked or not."""

    kind: ServerKind
    names: tuple[str, ...]
    role: str = "lock"
    fake_clock: bool = False


class ServerCluster:
    """What both providers of real servers share: the run's groups and nodes, where its
    clients run, readiness, server logs and clock read-back. The provider fills `_nodes`
    and `_kinds` (the ServerKind of each node) and may override `_check_alive`, its hook to
    fail fast on a server that died while starting."""

    NOT_READY = "{names} did not become ready within {timeout:.0f}s; see the logs in {logs}"

    def __init__(self, run_id: str, groups: Sequence[Group], *, clients: int, log_dir: str | os.PathLike | None,
                 ready_timeout: float):
        self.run_id = check_run_id(run_id)
        self.groups = list(groups)
        self.n_clients = client_hosts(clients) if clients else 0  # client hosts; workers beyond share them
        self.dir = state_root() / run_id
        self.log_dir = Path(log_dir) if log_dir else self.dir / "logs"
        self.ready_timeout = ready_timeout
        self._created = False  # whether up() made self.dir (down() removes only what it made)
        self.contained: RunCgroup | None = None  # every process the run starts (harness/cluster/containment.py)
        self.strays: list[str] = []  # processes that were still in it when the cluster came down
        self._nodes: dict[str, Node] = {}
        self._kinds: dict[str, ServerKind] = {}
        self._clock_offsets: dict[str, float] = {}
        self.client_netns: list[str | None] = [None] * max(1, self.n_clients)

    # -- Cluster ---------------------------------------------------------------------------
    @property
    def nodes(self) -> list[Node]:
        return list(self._nodes.values())

    def node(self, name: str) -> Node:
        return node_named(self._nodes, name)

    def lock_nodes(self) -> list[Node]:
        return [n for n in self._nodes.values() if n.role == "lock"]

    def requests_served(self) -> int | None:
        """Requests the lock servers have served so far, summed; None when a kind cannot
        count them or a server does not answer."""
        total = 0
        for n in self.lock_nodes():
            kind = self._kinds[n.name]
            if not isinstance(kind, CountsRequests):
                return None
            try:
                total += kind.requests_served(n)
            except (OSError, ValueError, KeyError):
                return None
        return total

    def client(self, index: int) -> ClientPlace:
        return ClientPlace(netns=self.client_netns[index % len(self.client_netns)], nodes=tuple(self.lock_nodes()))

    def _check_alive(self, node: Node) -> None:
        pass

    def _make_state_dir(self) -> None:
        """The run's own state dir, with its state.json first (`chaos cluster down` removes
        only dirs that have one). A fresh run id: an existing dir is someone else's."""
        for _ in range(3):  # another run's down() may remove the empty root meanwhile
            make_state_root()
            try:
                self.dir.mkdir()
                break
            except FileNotFoundError:
                continue
        self._created = True
        with deferred():  # a Ctrl-C between its mkdir and this assignment would leave it unnamed
            self.contained = RunCgroup.create(self.run_id)
        self._write_state()

    def _remove_state_dir(self) -> None:
        """Kill whatever is still in the run's cgroup (a client's grandchild that hid with
        setsid and ignores SIGTERM), then remove the cgroup and the state dir, if up() made
        them. What had to be killed is kept in `strays` for the run's notes."""
        if self.contained is not None:
            self.strays += self.contained.remove()
        if self._created:
            for cg in existing_cgroups(self.run_id):  # made before a crash could name it (the run id is ours)
                self.strays += cg.remove()
            shutil.rmtree(self.dir, ignore_errors=True)
            try:
                self.dir.parent.rmdir()  # the per-user root, once no run uses it
            except OSError:
                pass
            self._created = False

    def _write_state(self) -> None:
        raise NotImplementedError

    def _keep_server_logs(self) -> None:
        """Copy each server's log from the state dir into the run's log dir, if up() made the
        state dir (a server in a container wrote it: copy_capped follows no link)."""
        if not self._created:
            return
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for n in self.nodes:
            if os.path.exists(n.log_path):
                copy_capped(n.log_path, self.log_dir / f"{n.name}.log")

    def _wait_restarted(self, node: Node, hint: str = "") -> None:
        """Until a restarted node answers again (failing fast if it died), or a ClusterError."""
        kind = self._kinds[node.name]
        deadline = time.monotonic() + self.ready_timeout
        while not kind.node_ready(node):
            self._check_alive(node)
            if time.monotonic() > deadline:
                raise ClusterError(f"{node.name} did not answer within {self.ready_timeout:.0f}s after restart{hint}")
            time.sleep(0.1)

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.ready_timeout
        # Keyed by position: two groups may share a kind (the valkey lock servers and the store).
        pending = dict(enumerate(self.groups))
        while pending:
            for key, g in list(pending.items()):
                members = [self._nodes[n] for n in g.names]
                for n in members:
                    self._check_alive(n)
                if all(g.kind.node_ready(n) for n in members) and g.kind.cluster_ready(members):
                    del pending[key]
            if pending and time.monotonic() > deadline:
                names = ", ".join(sorted({g.kind.name for g in pending.values()}))
                raise ClusterError(self.NOT_READY.format(names=names, timeout=self.ready_timeout, logs=self.log_dir))
            if pending:
                time.sleep(0.1)

    def log_tail(self, name: str, n: int = 2000) -> str:
        try:
            with open(self._nodes[name].log_path, "rb") as f:
                f.seek(0, 2)
                f.seek(max(0, f.tell() - n))
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    # -- ClockControl ----------------------------------------------------------------------
    def movable_clocks(self) -> list[str]:
        return [n.name for n in self.nodes if clock_method(n) is not None]

    def read_clock_offset(self, name: str) -> float:
        """The node's clock minus the host's real wall clock, read back from the server."""
        node = self.node(name)
        before = time.time()
        server = self._kinds[node.name].read_clock(node)
        after = time.time()
        return server - (before + after) / 2


def prepare_node(kind: ServerKind, node: Node, peers: Sequence[Node]) -> None:
    """The node's data dir on this machine, with its mode and the kind's config files.
    Idempotent (a restart), and keeps whatever else the data dir holds."""
    os.makedirs(node.data_dir, exist_ok=True)
    if kind.data_dir_mode is not None:
        os.chmod(node.data_dir, kind.data_dir_mode)
    for name, text in kind.config_files(node, peers).items():
        Path(node.data_dir, name).write_text(text)


def clock_method(node: Node) -> str | None:
    """How a node's clock can be moved: "faketime" (libfaketime file: wall and monotonic
    clocks), "timewarp" (vDSO patch: wall clock only, when the kind's clock_methods allow
    it), or None."""
    from harness.cluster.kinds import kind_class

    if node.clock_file:
        return "faketime"
    if "timewarp" in kind_class(node.kind).clock_methods:
        from harness.cluster import timewarp

        return "timewarp" if timewarp.supported() is None else None
    return None


def set_node_clock(node: Node, pid: int, offset_s: float) -> None:
    """Move the wall clock of `node`, whose server is host process `pid`, to real + offset_s:
    rewrite its libfaketime file (atomically) or patch its vDSO."""
    method = clock_method(node)
    if method is None:
        raise BadArgument(f"{node.name} ({node.kind}) runs neither under libfaketime nor with a patchable vDSO, "
                          "so its clock cannot be moved")
    if method == "faketime":
        tmp = node.clock_file + ".tmp"
        Path(tmp).write_text(f"{offset_s:+.3f}\n")
        os.replace(tmp, node.clock_file)
    else:
        from harness.cluster import timewarp

        timewarp.set_offset(pid, offset_s)
