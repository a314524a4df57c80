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
  kill / restart    SIGKILL through the engine / start again; data lives in the node's /state,
                    a bind mount of the run's state dir, so it survives (wipe=True empties it).
  clock             libfaketime's clock file in /state (valkey; ZooKeeper with
                    zk_clock=faketime), written from the host; or the vDSO patch of the
                    container's server process (etcd, ZooKeeper), re-applied after a restart.

The engine is asked through the Docker SDK for Python (`Engine`): inspect, kill, start, the
label-filtered listings and removals, images. Only Compose itself is the docker CLI
(`docker compose -p chaoslock up/down`): it has no Python API.

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
from typing import Any, Mapping, Sequence

from harness.core.contracts.cluster import Node, check_run_id
from harness.cluster.compose_file import (
    BRIDGE, CLIENT_OFFSET, FAKETIME_LIB, GROUPS, NET, PEER_PORTS, PORTS, PROJECT, RUN_LABEL, TOPOLOGY,
    Server, document, group, image, render)
from harness.cluster.provider import Group, ServerCluster, clock_method, set_node_clock
from harness.cluster.local import NetnsLinks
from harness.core.errors import BadArgument, ClusterError, MissingDependency
from harness.core.interrupts import quiet_group, shielded

SETUP = "run `make compose` (scripts/compose/engine.sh and images.sh) to install and start it"


def compose_cli(*args: str, timeout: float = 180, check: bool = True) -> subprocess.CompletedProcess:
    """`docker compose ARGS`, quietly; on failure a ClusterError quoting its stderr. Compose is
    the one thing asked of the CLI: it has no Python API (everything else is `Engine`)."""
    try:
        r = subprocess.run(["docker", "compose", *args], capture_output=True, text=True, timeout=timeout, **quiet_group())
    except FileNotFoundError:
        raise MissingDependency(f"the docker CLI is not installed; {SETUP}") from None
    except subprocess.TimeoutExpired:
        raise ClusterError(f"`docker compose {' '.join(args[:4])}` did not finish within {timeout:.0f} s; "
                           f"is dockerd healthy?") from None
    if check and r.returncode != 0:
        raise ClusterError(f"`docker compose {' '.join(args[:5])}` failed: {r.stderr.strip()[-400:] or r.returncode}")
    return r


def _why(e: BaseException, timeout: float) -> str:
    """The root cause of an SDK error in a few words: the OS's reason, a timeout, or the message."""
    root: BaseException | None = e
    while root is not None:
        if isinstance(root, TimeoutError):  # at the bottom of requests' and urllib3's timeouts
            return f"no answer within {timeout:g} s"
        if isinstance(root, OSError) and root.strerror:
            return root.strerror
        root = root.__cause__ or root.__context__
    return " ".join(str(e).split())[:300]


_RAISE = object()


class Engine:
    """The Docker engine through the Docker SDK for Python (PyPI's `docker`): what the provider
    asks of containers, networks and images.

    The engine is found as the docker CLI finds it without a context: DOCKER_HOST (with
    DOCKER_TLS_VERIFY and DOCKER_CERT_PATH), else /var/run/docker.sock, which is also the socket
    the harness image has mounted. Every request ends within `timeout` seconds. An engine that
    is missing or does not answer is a MissingDependency, one that errs or stops answering a
    ClusterError naming the call: one sentence each, never a traceback. Callers must not use the
    SDK's high-level objects: a listing that inspects each container races with their removal.
    """

    def __init__(self, timeout: float = 120):
        try:
            import docker
            import requests
        except ImportError:
            raise MissingDependency("the Docker SDK for Python is not installed (`pip install -e .` installs it, "
                                    "or `pip install 'docker>=7'`)") from None
        self.timeout = timeout
        self.where = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
        self._errors, self._unanswered = docker.errors, (requests.RequestException, docker.errors.DockerException)
        try:
            self._client = docker.from_env(timeout=timeout)  # asks the engine's API version: an engine must answer
        except (*self._unanswered, OSError) as e:  # the SDK wraps requests' and the OS's errors; a bad DOCKER_HOST
            raise MissingDependency(f"no Docker engine answers at {self.where} ({_why(e, timeout)}); {SETUP}") from None
        self.api = self._client.api

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, what: str, fn: Any, *args: Any, missing: Any = None, refused: Any = _RAISE, **kw: Any) -> Any:
        """fn(*args, **kw), whose NotFound is `missing` and other refusal `refused` (unless _RAISE);
        an engine that does not answer is a ClusterError."""
        try:
            return fn(*args, **kw)
        except self._errors.NotFound:
            return missing
        except self._errors.APIError as e:  # before _unanswered: APIError is a requests HTTPError
            if refused is not _RAISE:
                return refused
            raise ClusterError(f"`docker {what}` failed: {' '.join(str(e.explanation or e).split())[:400]}") from None
        except self._unanswered as e:
            raise ClusterError(f"`docker {what}` got no answer from the engine at {self.where} "
                               f"({_why(e, self.timeout)}); is dockerd healthy?") from None

    def running_pid(self, container: str) -> int:
        """The host pid of a running container's init; 0 if it is stopped or does not exist."""
        info = self._call(f"inspect {container}", self.api.inspect_container, container, missing={})
        state = info.get("State") or {}
        return int(state.get("Pid") or 0) if state.get("Running") else 0

    def kill(self, container: str) -> None:
        """SIGKILL; a container that is already stopped or gone is no error (the caller waits for the stop)."""
        self._call(f"kill {container}", self.api.kill, container, signal="KILL", refused=None)  # 409: not running

    def start(self, container: str) -> None:
        if self._call(f"start {container}", self.api.start, container, missing=False) is False:
            raise ClusterError(f"`docker start {container}` failed: no such container; did the run's compose project go away?")

    def names(self) -> dict[str, str]:
        """Every container's name, with its run label ("?" without one)."""
        listing = self._call("ps -a", self.api.containers, all=True) or []
        return {n.lstrip("/"): (c.get("Labels") or {}).get(RUN_LABEL) or "?" for c in listing for n in c.get("Names") or []}

    def labelled(self, run_id: str | None = None) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
        """(id, run id) of every container and every network carrying our run label (with
        `run_id`, that value): the engine filters, and every row is checked again here."""
        flt = {"label": RUN_LABEL + (f"={run_id}" if run_id else "")}
        containers = self._call("ps -a", self.api.containers, all=True, filters=flt) or []
        networks = self._call("network ls", self.api.networks, filters=flt) or []

        def ours(rows: list[dict], key: str) -> list[tuple[str, str]]:
            runs = [(r[key], (r.get("Labels") or {}).get(RUN_LABEL)) for r in rows]
            return [(i, rid) for i, rid in runs if isinstance(rid, str) and (run_id is None or rid == run_id)]
        return ours(containers, "Id"), ours(networks, "Id")

    def remove_container(self, cid: str) -> None:
        """`rm --force --volumes`: the container and its anonymous volumes."""
        self._call(f"rm --force --volumes {cid[:12]}", self.api.remove_container, cid, v=True, force=True)

    def remove_network(self, nid: str) -> None:
        self._call(f"network rm {nid[:12]}", self.api.remove_network, nid)

    def has_image(self, name: str) -> bool:
        return self._call(f"image inspect {name}", self.api.inspect_image, name) is not None


def engine_problem() -> str | None:
    """None when a Docker engine (through the SDK) and a Compose v2 CLI answer; else one
    sentence what to do."""
    try:
        Engine(timeout=20).close()
        if compose_cli("version", "--short", timeout=20, check=False).returncode != 0:
            return f"the docker CLI has no Compose v2 plugin (`docker compose version` failed); {SETUP}"
    except (MissingDependency, ClusterError) as e:
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
        self._engine: Engine | None = None
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

    @property
    def engine(self) -> Engine:
        """The SDK's client, made on first use and closed by down()."""
        if self._engine is None:
            self._engine = Engine()
        return self._engine

    def _compose(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
        return compose_cli("-p", PROJECT, "-f", str(self.file), *args, timeout=timeout)

    def _check_free(self) -> None:
        """No container of another run (or of `docker compose up`) holds a name this run needs."""
        names = [s.container for s in self._servers.values()]
        taken = self.engine.names()
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
        return self.engine.running_pid(self._servers[name].container)

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
            try:
                remove_run(self.run_id, engine=self._engine)  # whatever `compose down` left (it never should)
            except Exception:
                pass
            self._started = False
        if self._engine is not None:
            self._engine.close()
            self._engine = None
        self._keep_server_logs()
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
        self.engine.kill(self._servers[name].container)
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
        self.engine.start(self._servers[name].container)
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


def _engine_or_none(timeout: float = 20) -> Engine | None:
    """The engine, None when none answers (then no container or network of ours can exist)."""
    try:
        return Engine(timeout=timeout)
    except MissingDependency:
        return None


def remove_run(run_id: str, state: Mapping[str, Any] | None = None, *, engine: Engine | None = None) -> list[str]:
    """Remove the containers (with their anonymous volumes) and networks labelled with one
    run id; say what went. Nothing if no engine answers, or when not root (only root runs
    compose here). Removes nothing else: the engine selects by the label and each row is
    checked again (Engine.labelled). Asked also with no state: a run whose state dir is gone."""
    check_run_id(run_id)
    if engine is None and os.geteuid() != 0:
        return []
    eng = engine or _engine_or_none()
    if eng is None:
        return []
    try:
        containers, networks = eng.labelled(run_id)
        done = []
        for what, items, remove in (("container", containers, eng.remove_container), ("network", networks, eng.remove_network)):
            for iid, _ in items:
                try:
                    remove(iid)
                    done.append(f"{what} {iid[:12]} (run {run_id})")
                except ClusterError as e:
                    done.append(f"{what} {iid[:12]} (run {run_id}) was not removed: {e}")
        return done
    finally:
        if engine is None:
            eng.close()


def leftover_runs() -> set[str]:
    """Run ids that label a container or network (for `chaos cluster down --all`)."""
    from harness.core.contracts.cluster import RUN_ID

    eng = _engine_or_none() if os.geteuid() == 0 else None
    if eng is None:
        return set()
    with eng:
        containers, networks = eng.labelled()
    return {rid for _, rid in containers + networks if RUN_ID.fullmatch(rid)}


def preflight(spec: Any, kind: str) -> None:
    """What a compose run needs, checked before its run dir exists: settings it can honour,
    an engine with Compose v2, the images. One sentence each."""
    if spec.netns is False or spec.base_port is not None:
        raise BadArgument("--no-netns and --base-port are local-provider settings; the compose provider always gives "
                          "each server and client its own network namespace")
    problem = engine_problem()
    if problem:
        raise MissingDependency(problem)
    try:
        with Engine(timeout=20) as eng:
            missing = [k for k in sorted({kind, "valkey"}) if not eng.has_image(image(k))]
    except ClusterError as e:
        raise MissingDependency(str(e)) from None
    if missing:
        k = missing[0]
        raise MissingDependency(f"the image {image(k)} is missing; run `make compose` to build it "
                                f"(or set CHAOSLOCK_IMAGE_{k.upper()} to one you have)")


def make_cluster(spec: Any, run_id: str, log_dir: Path, groups: Sequence[Group]) -> ComposeCluster:
    """The compose counterpart of LocalCluster: the same groups, in containers (the runner
    has called preflight)."""
    return ComposeCluster(run_id, groups, clients=spec.concurrency, log_dir=log_dir)
