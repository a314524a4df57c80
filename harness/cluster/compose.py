"""The compose provider: the same servers as the local provider, in containers, faulted from the host.

A run writes its own compose file (harness/cluster/compose_file.py: only its servers, its
options, its state dir) and brings it up as project `chaoslock`. Every fault is the local
provider's, applied to the container's processes and namespaces from the host:

  partition / heal  iptables DROP rules inside each container's network namespace, which
                    the run names (`ip netns attach`), so netns.Network cuts containers and
                    the client namespaces exactly as it cuts its own hosts; read back by
                    connecting (`reaches`). A restarted container has a new namespace: its
                    side of the current cut is put back before the restart returns.
  clients           one network namespace per worker, attached to the compose network's
                    bridge, so one client can be cut from one server.
  pause / resume    SIGSTOP / SIGCONT of every process of the container (its pid namespace).
  kill / restart    docker kill (SIGKILL) / docker start; data lives in the node's /state,
                    a bind mount of the run's state dir, so it survives (wipe=True empties it).
  clock             libfaketime's clock file in /state (valkey; ZooKeeper with
                    zk_clock=faketime), written from the host; or the vDSO patch of the
                    container's server process (etcd, ZooKeeper), re-applied after a restart.

Must not touch a container, network or namespace it did not create: everything carries
the run id (label `chaoslock.run`, namespace names), and `remove_run` / `leftover_runs`
(for `chaos cluster down`) select by it. Images stay, as a cache.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Sequence

from harness.core.outputcap import copy_capped
from harness.core.contracts.cluster import Node, check_run_id
from harness.cluster.compose_file import (
    BRIDGE, CLIENT_OFFSET, FAKETIME_LIB, GROUPS, NET, PEER_PORTS, PORTS, PROJECT, RUN_LABEL, TOPOLOGY,
    Server, document, group, image, render)
from harness.cluster.provider import Group, ServerCluster, clock_method, set_node_clock
from harness.cluster.local import NetnsLinks
from harness.core.errors import BadArgument, ClusterError, MissingDependency
from harness.core.interrupts import quiet_group, shielded

SETUP = "run `make compose` (scripts/compose/engine.sh and images.sh) to install and start it"


def docker(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    """The docker CLI, quietly; on failure a ClusterError quoting its stderr."""
    try:
        r = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, **quiet_group())
    except FileNotFoundError:
        raise MissingDependency(f"the docker CLI is not installed; {SETUP}") from None
    except subprocess.TimeoutExpired:
        raise ClusterError(f"`docker {' '.join(args[:3])}` did not finish within {timeout:.0f} s; is dockerd healthy?") from None
    if check and r.returncode != 0:
        raise ClusterError(f"`docker {' '.join(args[:4])}` failed: {r.stderr.strip()[-400:] or r.returncode}")
    return r


def engine_problem() -> str | None:
    """None when a Docker engine and a Compose v2 CLI answer; else one sentence what to do."""
    try:
        if docker("info", "--format", "{{.ServerVersion}}", timeout=20, check=False).returncode != 0:
            return f"no Docker engine answers (`docker info` failed); {SETUP}"
        if docker("compose", "version", "--short", timeout=20, check=False).returncode != 0:
            return f"the docker CLI has no Compose v2 plugin (`docker compose version` failed); {SETUP}"
    except MissingDependency as e:
        return str(e)
    return None


def _pid_namespace_members(pid: int) -> list[int]:
    """Every process sharing `pid`'s pid namespace (a container's processes), `pid` first."""
    try:
        ns = os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return []
    out = [pid]
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) != pid:
            try:
                if os.readlink(f"/proc/{d}/ns/pid") == ns:
                    out.append(int(d))
            except OSError:
                pass
    return out


class ComposeCluster(NetnsLinks, ServerCluster):
    """Cluster, ProcessControl, ClockControl and NetworkControl on containers.

    `nodes` carry the containers' addresses on the compose network; the harness (root
    namespace, through the bridge) and every worker (its own namespace on the bridge)
    reach them there. Paths in `nodes` (data, log, clock file) are the host's side of
    each container's /state.
    """

    NOT_READY = ("{names} did not become ready within {timeout:.0f}s in containers; see the server logs in {logs} "
                 "(`docker logs` is empty: they log to /state)")

    def __init__(self, run_id: str, groups: Sequence[Group], *, clients: int, log_dir: str | os.PathLike | None = None,
                 ready_timeout: float = 60.0):
        from harness.cluster import netns

        super().__init__(run_id, groups, clients=clients, log_dir=log_dir, ready_timeout=ready_timeout)
        self.fallback_reason: str | None = None
        self.file = self.dir / "docker-compose.yml"
        self.network = netns.Network(run_id, bridge=BRIDGE, subnet=str(NET), first_host=CLIENT_OFFSET - 1)
        self._started = False
        self._servers: dict[str, Server] = {}
        self._pids: dict[str, int] = {}
        self._paused: set[str] = set()
        for g in self.groups:
            pool = [TOPOLOGY["store"]] if g.role == "store" else group(g.kind.name)
            if len(g.names) > len(pool):
                raise BadArgument(f"the compose cluster has {len(GROUPS[g.kind.name])} {g.kind.name} servers; a backend "
                                  f"asking for {len(g.names)} needs the local provider (--cluster local)")
            for name, s in zip(g.names, pool):
                peer, election = PEER_PORTS[s.kind]
                here = self.dir / s.name
                self._servers[name], self._kinds[name] = s, g.kind
                self._nodes[name] = Node(name=name, kind=s.kind, role=g.role, host=s.ip, port=PORTS[s.kind], peer_port=peer,
                                         election_port=election, netns=f"cl-{run_id}-{name}", data_dir=str(here / "data"),
                                         log_path=str(here / "server.log"),
                                         clock_file=str(here / "clock") if g.fake_clock else None, ordinal=s.ordinal)

    def _compose(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
        return docker("compose", "-p", PROJECT, "-f", str(self.file), *args, timeout=timeout)

    def _check_free(self) -> None:
        """No container of another run (or of `docker compose up`) holds a name this run needs."""
        names = [s.container for s in self._servers.values()]
        r = docker("ps", "-a", "--format", "{{.Names}} {{.Label \"" + RUN_LABEL + "\"}}")
        taken = {line.split()[0]: (line.split() + ["?"])[1] for line in r.stdout.splitlines() if line.strip()}
        clash = sorted((n, taken[n]) for n in names if n in taken)
        if clash:
            who = ", ".join(f"{n} (run {r})" for n, r in clash)
            raise ClusterError(f"containers this run needs already exist: {who}; another compose run is using them, or "
                               f"one was left behind: `chaos cluster down --all` removes a dead run's, "
                               f"`docker compose -f compose/docker-compose.yml down` those of `docker compose up`")

    def up(self) -> None:
        """Write the run's compose file, start its containers, name their namespaces, add
        the client namespaces, wait until every group serves. On failure, clean up and raise."""
        problem = engine_problem()
        if problem:
            raise MissingDependency(problem)
        self._check_free()
        try:
            self._make_state_dir()
            for n in self.nodes:
                Path(n.data_dir).mkdir(parents=True)
                if n.clock_file:
                    Path(n.clock_file).write_text("+0\n")
            fake = any(g.fake_clock for g in self.groups)
            doc = document([(self._servers[n], self._kinds[n]) for n in self._nodes], run=self.run_id, state=str(self.dir),
                           faketime=FAKETIME_LIB if fake else None, people=False)
            self.file.write_text(render(doc, head=False))
            self._started = True
            self._compose("up", "-d", "--no-build", "--pull", "never", "--quiet-pull")
            self.network.up()
            for name in self._nodes:
                self._attach(name)
            for c in range(self.n_clients):
                self.client_netns[c] = self.network.add_host(f"c{c + 1}").netns
            self._wait_ready()
            self._write_state()
        except BaseException:
            self.down()
            raise

    def _attach(self, name: str) -> None:
        pid = self._container_pid(name)
        if not pid:
            raise ClusterError(f"container {self._servers[name].container} is not running; its log {self.node(name).log_path} "
                               f"ends: {self.log_tail(name)[-300:].strip()}")
        self._pids[name] = pid
        self.network.attach_host(name, pid, self._servers[name].ip)

    def _container_pid(self, name: str) -> int:
        r = docker("inspect", "-f", "{{.State.Running}} {{.State.Pid}}", self._servers[name].container, check=False)
        running, _, pid = r.stdout.strip().partition(" ")
        return int(pid) if r.returncode == 0 and running == "true" and pid.isdigit() else 0

    def down(self) -> None:
        """Resume, save the logs, remove the run's namespaces, containers, network and state
        dir. Idempotent, never raises; Ctrl-C cannot cut it short."""
        with shielded("removing the run's containers and namespaces"):
            self._down()

    def _down(self) -> None:
        for name in list(self._paused):
            self._signal(name, signal.SIGCONT)
        self._paused.clear()
        try:
            self.network.down()
        except Exception:
            pass
        if self._started:
            try:
                self._compose("down", "--volumes", "--timeout", "1", timeout=120)
            except Exception:
                pass
            remove_run(self.run_id)  # whatever `compose down` left (it never should)
            self._started = False
        if self._created:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            for n in self.nodes:
                if os.path.exists(n.log_path):
                    copy_capped(n.log_path, self.log_dir / f"{n.name}.log")  # the container wrote it: no link followed
        self._remove_state_dir()

    # -- ProcessControl ---------------------------------------------------------------------------
    def pids(self, name: str) -> list[int]:
        pid = self._pids.get(self.node(name).name)
        return [pid] if pid else []

    def _signal(self, name: str, sig: int) -> None:
        """Signal every process of the container (a server may have forked helpers)."""
        init = self._pids.get(name)
        for pid in _pid_namespace_members(init) if init else []:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass

    def pause(self, name: str) -> None:
        self._signal(self.node(name).name, signal.SIGSTOP)
        self._paused.add(name)

    def resume(self, name: str) -> None:
        self._signal(self.node(name).name, signal.SIGCONT)
        self._paused.discard(name)

    def kill(self, name: str) -> None:
        name = self.node(name).name
        docker("kill", "--signal", "KILL", self._servers[name].container, check=False)
        deadline = time.monotonic() + 10
        while self._container_pid(name) and time.monotonic() < deadline:
            time.sleep(0.05)
        self._pids.pop(name, None)
        self._paused.discard(name)

    def restart(self, name: str, *, wipe: bool = False) -> None:
        """Start a killed node's container again, with its data (or an empty data dir)."""
        node = self.node(name)
        if self._container_pid(name):
            self.kill(name)
        if wipe:
            shutil.rmtree(node.data_dir, ignore_errors=True)
            Path(node.data_dir).mkdir()
        docker("start", self._servers[name].container)
        self._attach(name)
        deadline = time.monotonic() + self.ready_timeout
        while not self._kinds[name].node_ready(node):
            if time.monotonic() > deadline or not self._container_pid(name):
                raise ClusterError(f"{name} did not answer within {self.ready_timeout:.0f}s after restart; its log "
                                   f"{node.log_path} ends: {self.log_tail(name)[-300:].strip()}")
            time.sleep(0.1)
        if self._clock_offsets.get(name) and clock_method(node) == "timewarp":
            self.set_clock(name, self._clock_offsets[name])  # the patch died with the process

    # -- ClockControl -----------------------------------------------------------------------------
    def set_clock(self, name: str, offset_s: float, rate: float = 1.0) -> None:
        node = self.node(name)
        self._clock_offsets[node.name] = offset_s
        set_node_clock(node, self._pids.get(node.name, 0), offset_s)

    # -- state for `chaos cluster status/down` ----------------------------------------------------
    def _write_state(self) -> None:
        state = {"run_id": self.run_id, "provider": "compose", "created": time.time(), "dir": str(self.dir),
                 "owner": os.environ.get("CHAOSLOCK_OWNER"), "owner_pid": os.getpid(),
                 "nodes": [n.to_dict() for n in self.nodes], "pids": dict(self._pids),
                 "clients": {"netns": self.client_netns}, "compose_file": str(self.file)}
        (self.dir / "state.json").write_text(json.dumps(state, indent=1))


def _engine_answers() -> bool:
    """Whether a docker CLI is installed and an engine answers it (without one, no container
    or network of ours can exist)."""
    return shutil.which("docker") is not None and docker("info", "-f", "{{.ID}}", timeout=20, check=False).returncode == 0


def _labelled(what: str, run_id: str | None = None) -> list[tuple[str, str]]:
    """(id, run id) of every container ("ps") or network ("network") carrying our run label."""
    flt = f"label={RUN_LABEL}" + (f"={run_id}" if run_id else "")
    args = ["ps", "-a"] if what == "ps" else ["network", "ls"]
    r = docker(*args, "--filter", flt, "--format", "{{.ID}} {{.Label \"" + RUN_LABEL + "\"}}", check=False)
    return [tuple(line.split()[:2]) for line in r.stdout.splitlines() if len(line.split()) >= 2]


def remove_run(run_id: str) -> list[str]:
    """Remove the containers (with their anonymous volumes) and networks labelled with one
    run id; say what went. Nothing if no engine answers."""
    check_run_id(run_id)
    if not _engine_answers():
        return []
    done = []
    containers = [cid for cid, _ in _labelled("ps", run_id)]
    if containers:
        docker("rm", "--force", "--volumes", *containers, check=False)
        done += [f"container {cid} (run {run_id})" for cid in containers]
    networks = [nid for nid, _ in _labelled("network", run_id)]
    if networks:
        docker("network", "rm", *networks, check=False)
        done += [f"network {nid} (run {run_id})" for nid in networks]
    return done


def leftover_runs() -> set[str]:
    """Run ids that label a container or network (for `chaos cluster down --all`)."""
    from harness.core.contracts.cluster import RUN_ID

    if not _engine_answers():
        return set()
    return {rid for what in ("ps", "network") for _, rid in _labelled(what) if RUN_ID.fullmatch(rid)}


def preflight(spec: Any, kind: str) -> None:
    """What a compose run needs, checked before its run dir exists: settings it can honour,
    an engine with Compose v2, the images. One sentence each."""
    if spec.netns is False or spec.base_port is not None:
        raise BadArgument("--no-netns and --base-port are local-provider settings; the compose provider always gives "
                          "each server and client its own network namespace")
    problem = engine_problem()
    if problem:
        raise MissingDependency(problem)
    for k in sorted({kind, "valkey"}):
        if docker("image", "inspect", image(k), check=False).returncode != 0:
            raise MissingDependency(f"the image {image(k)} is missing; run `make compose` to build it "
                                    f"(or set CHAOSLOCK_IMAGE_{k.upper()} to one you have)")


def make_compose_cluster(spec: Any, run_id: str, log_dir: Path, groups: Sequence[Group]) -> ComposeCluster:
    """The compose counterpart of LocalCluster: the same groups, in containers (the runner
    has called preflight)."""
    return ComposeCluster(run_id, groups, clients=spec.concurrency, log_dir=log_dir)
