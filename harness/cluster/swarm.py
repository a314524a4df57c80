"""The swarm provider: the run's servers as a Docker Swarm stack across several engines.

The engines come from a nodes file (`--swarm-nodes FILE`, default /run/chaoslock-swarm/nodes,
which `make swarm` writes): one line per engine, `NAME ENGINE-URL ADDRESS`, the manager first.
ADDRESS is where the engine's host is reached (its host-network services listen there).

  servers    one service each in the stack `chaoslock-<run id>` (`docker stack deploy` on the
             manager), placed by the node label `chaoslock.node=NAME` round robin over the
             engines (one per engine where there are enough; the store goes to the manager),
             on the engine's host network: server j listens at its engine's address on ports
             21000 + 10 j (client), + 1 (peer), + 2 (election), so several share an engine.
             Restart policy none: a killed server stays down until the nemesis starts it.
  state      each server's data dir, log and clock file sit in the run's state dir, bind-mounted
             at the same path into every server: every engine must see this machine's files
             (true of `make swarm`'s engines, which share it; on separate machines, a shared mount).
  partition  iptables DROP rules in each engine's host namespace, matched by address AND the
             servers' ports (the swarm's own traffic between the engines is never cut), run by
             a helper container of the run on that engine (the harness image, host network,
             NET_ADMIN) through the engine's API. Two lock servers on one engine cannot be cut
             apart: such a grudge is refused in one sentence.
  clients    a network namespace each on this machine, on the bridge that reaches the engines
             (`chswarm0` of `make swarm`); cut from a server by rules in their own namespace.
             With -o clients_on=manager|spread, in containers on the engines instead
             (harness/cluster/swarm_clients.py).
  pause/kill the server's container paused (freezer) / killed and started again through its
             engine's API (Docker SDK).
  clock      libfaketime's clock file (valkey; ZooKeeper with zk_clock=faketime), or the vDSO
             patch of the server's host process where the engine shares this machine's pids.
  slow link  the clients' links, shaped in their own namespaces by the server's address and
             ports: the NFQUEUE delayer, a random DROP, an htb class (harness/cluster/shaping.py);
             links from a server or a client on the swarm: the same rules in its engine's host
             namespace or its pod, with a delayer started there (swarm_links.py); no bandwidth.

Everything carries the run id: the stack's services and containers the label `chaoslock.run`,
helper containers too, client namespaces their names. `down`, and `chaos cluster down` from the
run's state.json, remove the stack, then every labelled container on every engine.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any, Sequence

from harness.core.contracts.cluster import Node
from harness.cluster.compose_file import FAKETIME_LIB, HARNESS_IMAGE, RUN_LABEL, image, render
from harness.cluster.provider import Group, ServerCluster, clock_method, prepare_node, set_node_clock
from harness.cluster.swarm_engines import (NODES_FILE, SETUP, SwarmNode, engine_client, leftover_runs, read_nodes,
                                           remove_run, start_helper)
from harness.cluster.swarm_clients import SwarmClients
from harness.cluster.swarm_links import SwarmLinks
from harness.core.errors import BadArgument, ClusterError, MissingDependency
from harness.core.interrupts import quiet_group, shielded

__all__ = ["SwarmCluster", "make_cluster", "preflight", "remove_run", "leftover_runs", "read_nodes", "NODES_FILE"]

PORT_BASE = 21000
LABEL = "chaoslock.node"
LAB_BRIDGE = "chswarm0"
LAB_NET = "198.19.249.0/24"
CLIENT_FIRST = 127  # client namespaces on the lab bridge take .128 up


def _ports(j: int) -> tuple[int, int, int]:
    base = PORT_BASE + 10 * j
    return base, base + 1, base + 2


def stack_name(run_id: str) -> str:
    return f"chaoslock-{run_id}"



class SwarmCluster(SwarmClients, SwarmLinks, ServerCluster):
    """Cluster, ProcessControl, ClockControl, NetworkControl, CutsOneWay, ShapesLinks (client
    links only) and ControlsClients (-o clients_on) on a swarm stack."""

    NOT_READY = "{names} did not become ready within {timeout:.0f}s on the swarm; see the server logs in {logs}"

    def __init__(self, run_id: str, groups: Sequence[Group], engines: Sequence[SwarmNode], *, clients: int,
                 log_dir: str | os.PathLike | None = None, ready_timeout: float = 90.0, clients_on: str = "control",
                 client_image: str = ""):
        super().__init__(run_id, groups, clients=clients, log_dir=log_dir, ready_timeout=ready_timeout)
        self.clients_on, self.client_image = clients_on, client_image
        self._pods: dict[str, tuple[SwarmNode, str]] = {}
        self.fallback_reason: str | None = None
        self.engines = list(engines)
        self.stack = stack_name(run_id)
        self.file = self.dir / "stack.yml"
        self.placed: dict[str, SwarmNode] = {}  # server -> its engine
        self._apis: dict[str, Any] = {}
        self._containers: dict[str, str] = {}  # server -> container id
        self._pids: dict[str, int] = {}
        self._paused: set[str] = set()
        self._helpers: dict[str, str] = {}  # engine -> helper container id
        self._rules: dict[tuple[str, str], frozenset[str]] = {}  # ("engine"|"netns", name) -> rules
        self._deployed = False
        self.network = None
        self.comment = f"chaoslock-{run_id}"
        j, lock_i = 0, 0
        for g in self.groups:
            for name in g.names:
                if g.role == "store":
                    where = self.engines[0]
                else:
                    where = self.engines[lock_i % len(self.engines)]
                    lock_i += 1
                port, peer, election = _ports(j)
                j += 1
                here = self.dir / name
                self.placed[name], self._kinds[name] = where, g.kind
                self._nodes[name] = Node(name=name, kind=g.kind.name, role=g.role, host=where.addr, port=port,
                                         peer_port=peer if g.kind.peer_ports[0] else 0,
                                         election_port=election if g.kind.peer_ports[1] else 0,
                                         # etcd's cluster token is its data dir's parent's name: the run id
                                         data_dir=str(self.dir / run_id / name), log_path=str(here / "server.log"),
                                         clock_file=str(here / "clock") if g.fake_clock else None,
                                         ordinal=g.names.index(name) + 1)

    # -- engines ----------------------------------------------------------------------------------
    def api(self, engine: SwarmNode):
        if engine.name not in self._apis:
            self._apis[engine.name] = engine_client(engine.url)
        return self._apis[engine.name]

    def _cli(self, *args: str, timeout: float = 180, check: bool = True) -> subprocess.CompletedProcess:
        env = {**os.environ, "DOCKER_HOST": self.engines[0].url}
        try:
            r = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, env=env, **quiet_group())
        except FileNotFoundError:
            raise MissingDependency(f"the docker CLI is not installed; {SETUP}") from None
        except subprocess.TimeoutExpired:
            raise ClusterError(f"`docker {' '.join(args[:3])}` did not finish within {timeout:.0f} s on the manager") from None
        if check and r.returncode != 0:
            raise ClusterError(f"`docker {' '.join(args[:3])}` failed on the manager: {r.stderr.strip()[-400:]}")
        return r

    # -- the stack ----------------------------------------------------------------------------------
    def _service(self, name: str) -> dict:
        node, kind = self._nodes[name], self._kinds[name]
        peers = [self._nodes[n] for g in self.groups if name in g.names for n in g.names]
        argv = kind.argv(node, peers, binary=kind.binary)
        if "--proc-title-template" in argv:  # names this machine's run dir
            i = argv.index("--proc-title-template")
            del argv[i:i + 2]
        import shlex

        svc: dict[str, Any] = {
            "image": image(node.kind), "hostname": name, "networks": ["hostnet"], "volumes": [f"{self.dir}:{self.dir}"],
            "command": ["sh", "-c", f"exec {shlex.join(argv)} >>{node.log_path} 2>&1".replace("$", "$$")],
            "labels": {RUN_LABEL: self.run_id},
            "deploy": {"labels": {RUN_LABEL: self.run_id}, "endpoint_mode": "dnsrr",
                       "restart_policy": {"condition": "none"},
                       "placement": {"constraints": [f"node.labels.{LABEL} == {self.placed[name].name}"]}}}
        if node.clock_file:
            svc["environment"] = {"LD_PRELOAD": FAKETIME_LIB, "FAKETIME_TIMESTAMP_FILE": node.clock_file, "FAKETIME_NO_CACHE": "1"}
        return svc

    def document(self) -> dict:
        return {"version": "3.8", "services": {n: self._service(n) for n in self._nodes},
                "networks": {"hostnet": {"external": True, "name": "host"}}}

    def up(self) -> None:
        """Deploy the stack, start a helper on each engine, add the client namespaces, wait
        until every group serves. On failure, clean up and raise."""
        try:
            self._make_state_dir()
            for n in self.nodes:
                Path(n.log_path).parent.mkdir(parents=True, exist_ok=True)
                prepare_node(self._kinds[n.name], n, [self._nodes[p] for g in self.groups if n.name in g.names for p in g.names])
                if n.clock_file:
                    Path(n.clock_file).write_text("+0\n")
            for e in self.engines:
                self.api(e)  # every engine answers, before anything starts
            self.file.write_text(render(self.document(), head=False))
            self._deployed = True
            self._write_state()
            self._cli("stack", "deploy", "--resolve-image", "never", "--prune", "-c", str(self.file), self.stack)
            for e in {self.placed[n.name].name: self.placed[n.name] for n in self.lock_nodes()}.values():
                self._helpers[e.name] = self._start_helper(e)
            self._write_state()
            self._wait_containers()
            self._clients()
            self._record_placement()
            self._wait_ready()
            self._write_state()
        except BaseException:
            self.down()
            raise

    def _start_helper(self, engine: SwarmNode) -> str:
        return start_helper(self.api(engine), self.run_id, ["sleep", "infinity"], name=f"chaoslock-{self.run_id}-helper")

    def _wait_containers(self) -> None:
        deadline = time.monotonic() + self.ready_timeout
        for name in self._nodes:
            api = self.api(self.placed[name])
            flt = {"label": f"com.docker.swarm.service.name={self.stack}_{name}"}
            while True:
                rows = [c for c in api.containers(all=True, filters=flt)]
                running = [c for c in rows if c.get("State") == "running"]
                if running:
                    cid = running[0]["Id"]
                    self._containers[name] = cid
                    self._pids[name] = int(api.inspect_container(cid)["State"].get("Pid") or 0)
                    break
                if time.monotonic() > deadline:
                    tasks = self._cli("service", "ps", "--no-trunc", "--format", "{{.CurrentState}} {{.Error}}",
                                      f"{self.stack}_{name}", check=False).stdout.strip()
                    raise ClusterError(f"{name}'s task did not start on engine {self.placed[name].name} within "
                                       f"{self.ready_timeout:.0f}s: {tasks[-300:] or 'no task'}; its log {self.node(name).log_path} "
                                       f"ends: {self.log_tail(name)[-300:].strip()}")
                time.sleep(0.2)

    def _record_placement(self) -> None:
        """nodes/placement.txt in the run dir: each server's engine, address and container."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        (self.log_dir / "placement.txt").write_text("".join(
            f"{n.name} engine {self.placed[n.name].name} ({self.placed[n.name].url}) at {n.host}:{n.port} "
            f"container {self._containers[n.name][:12]}\n" for n in self.nodes) + self._pod_lines())

    def _clients(self) -> None:
        """Client namespaces on the bridge that reaches the engines, when this machine has it
        (`make swarm`'s); otherwise the clients share the harness's namespace. With -o clients_on,
        a pod per client host on its engine instead (harness/cluster/swarm_clients.py)."""
        from harness.cluster import netns

        if self.clients_elsewhere():
            self._client_pods()
            self._write_state()
            return
        if LAB_BRIDGE not in netns._links():
            self.fallback_reason = (f"no bridge {LAB_BRIDGE} here: the clients share the harness's network namespace, "
                                    "so no client can be cut alone")
            return
        self.network = netns.Network(self.run_id, bridge=LAB_BRIDGE, subnet=LAB_NET, first_host=CLIENT_FIRST)
        self.network.up()
        for c in range(self.n_clients):
            self.client_netns[c] = self.network.add_host(f"c{c + 1}").netns

    def down(self) -> None:
        """Resume, save the logs, remove the stack, the helpers, every container of the run on
        every engine, the client namespaces and the state dir. Idempotent, never raises."""
        with shielded("removing the run's stack and containers"):
            self._down()

    def _down(self) -> None:
        try:
            self._apply({})  # the cuts live in the engines' host namespaces, beyond the containers
        except Exception:
            self._rules.clear()  # remove_run sweeps them below
        try:
            self.unshape_links()  # slow links: in the engines' host namespaces too (and their delayers)
        except Exception:
            pass
        for name in list(self._paused):
            try:
                self.resume(name)
            except Exception:
                pass
        self._paused.clear()
        if self.network is not None:
            try:
                self.network.down()
            except Exception:
                pass
            self.network = None
        if self._deployed:
            try:
                self._cli("stack", "rm", self.stack, timeout=120, check=False)
            except Exception:
                pass
            try:
                remove_run(self.run_id, {"provider": "swarm", "engines": [[e.name, e.url, e.addr] for e in self.engines]})
            except Exception:
                pass
            self._deployed = False
        for api in self._apis.values():
            try:
                api.close()
            except Exception:
                pass
        self._apis.clear()
        self._keep_server_logs()
        self._remove_state_dir()

    # -- ProcessControl ---------------------------------------------------------------------------
    def pids(self, name: str) -> list[int]:
        pid = self._pids.get(self.node(name).name)
        return [pid] if pid else []

    def _engine_of(self, name: str):
        return self.api(self.placed[name])

    def pause(self, name: str) -> None:
        name = self.node(name).name
        self._engine_of(name).pause(self._containers[name])
        self._paused.add(name)

    def resume(self, name: str) -> None:
        name = self.node(name).name
        try:
            self._engine_of(name).unpause(self._containers[name])
        except Exception as e:
            if "is not paused" not in str(e):
                raise ClusterError(f"could not resume {name}: {' '.join(str(e).split())[:200]}") from None
        self._paused.discard(name)

    def _running(self, name: str) -> bool:
        info = self._engine_of(name).inspect_container(self._containers[name])
        return bool((info.get("State") or {}).get("Running"))

    def kill(self, name: str) -> None:
        name = self.node(name).name
        api = self._engine_of(name)
        try:
            api.kill(self._containers[name], signal="KILL")
        except Exception:
            pass  # not running
        deadline = time.monotonic() + 10
        while self._running(name) and time.monotonic() < deadline:
            time.sleep(0.05)
        self._pids.pop(name, None)
        self._paused.discard(name)

    def restart(self, name: str, *, wipe: bool = False) -> None:
        """Start a killed server's container again (its task stays failed; restart policy
        none), with its data or an empty data dir."""
        node = self.node(name)
        if self._running(node.name):
            self.kill(node.name)
        if wipe:
            shutil.rmtree(node.data_dir, ignore_errors=True)
            prepare_node(self._kinds[node.name], node, [n for n in self.nodes if n.kind == node.kind and n.role == node.role])
        api = self._engine_of(node.name)
        api.start(self._containers[node.name])
        self._pids[node.name] = int(api.inspect_container(self._containers[node.name])["State"].get("Pid") or 0)
        self._wait_restarted(node, f"; its log {node.log_path} ends: {self.log_tail(node.name)[-300:].strip()}")
        if self._clock_offsets.get(node.name) and clock_method(node) == "timewarp":
            self.set_clock(node.name, self._clock_offsets[node.name])

    def _check_alive(self, node: Node) -> None:
        if node.name in self._containers and not self._running(node.name):
            raise ClusterError(f"{node.name} exited while starting on engine {self.placed[node.name].name}; its log "
                               f"{node.log_path} ends: {self.log_tail(node.name)[-300:].strip()}")

    # -- ClockControl -----------------------------------------------------------------------------
    def set_clock(self, name: str, offset_s: float, rate: float = 1.0) -> None:
        node = self.node(name)
        self._clock_offsets[node.name] = offset_s
        set_node_clock(node, self._pids.get(node.name, 0), offset_s)

    # -- state for `chaos cluster status/down` ----------------------------------------------------
    def _write_state(self) -> None:
        state = {"run_id": self.run_id, "provider": "swarm", "created": time.time(), "dir": str(self.dir),
                 "owner": os.environ.get("CHAOSLOCK_OWNER"), "owner_pid": os.getpid(),
                 "nodes": [n.to_dict() for n in self.nodes], "pids": dict(self._pids), "stack": self.stack,
                 "engines": [[e.name, e.url, e.addr] for e in self.engines],
                 "placed": {n: e.name for n, e in self.placed.items()},
                 "clients": {"netns": self.client_netns, "on": self.clients_on,
                             "pods": {c: [e.name, pod] for c, (e, pod) in self._pods.items()}}}
        (self.dir / "state.json").write_text(json.dumps(state, indent=1))



def nodes_file(spec: Any) -> str:
    """--swarm-nodes FILE (in spec.ssh, where the servers run: never taken from a run dir)."""
    return (spec.ssh or {}).get("nodes_file") or NODES_FILE


def preflight(spec: Any, kind: str) -> None:
    """What a swarm run needs, checked before its run dir exists: settings it can honour, the
    nodes file, every engine answering, the manager in swarm mode, the images on every engine."""
    if spec.netns is False or spec.base_port is not None:
        raise BadArgument("--no-netns and --base-port are local-provider settings; the swarm provider places each server "
                          "on an engine's host network")
    if shutil.which("docker") is None:
        raise MissingDependency(f"the docker CLI is not installed (it deploys the stack); {SETUP}")
    engines = read_nodes(nodes_file(spec))
    from harness.core.options import cluster_option

    images = [image(k) for k in sorted({kind, "valkey"})] + [HARNESS_IMAGE]
    if cluster_option(spec.options, "client_image"):  # the clients' own image (-o clients_on)
        images.append(cluster_option(spec.options, "client_image"))
    lacking: list[tuple[SwarmNode, str]] = []
    for i, e in enumerate(engines):
        api = engine_client(e.url, timeout=20)
        try:
            info = api.info()
            swarm = info.get("Swarm") or {}
            if swarm.get("LocalNodeState") != "active":
                raise MissingDependency(f"engine {e.name} ({e.url}) is not in a swarm; {SETUP}")
            if i == 0 and not swarm.get("ControlAvailable"):
                raise BadArgument(f"the first engine of {nodes_file(spec)}, {e.name}, is not a swarm manager; list a manager first")
            lacking += [(e, img) for img in images if not _has_image(api, img)]
        finally:
            api.close()
    for e, img in lacking:
        _load_image(img, e, engines)


HOST_ENGINE = "unix:///var/run/docker.sock"


def _has_image(api: Any, img: str) -> bool:
    try:
        api.inspect_image(img)
        return True
    except Exception:
        return False


def _load_image(img: str, into: SwarmNode, engines: Sequence[SwarmNode]) -> None:
    """Copy an image an engine lacks from one that has it (this machine's engine first, then the
    swarm's), engine to engine through their APIs (`docker save | docker load`): no registry."""
    import sys

    sources = [SwarmNode("this machine", HOST_ENGINE, "")] + [e for e in engines if e.name != into.name]
    for src in sources:
        try:
            sapi = engine_client(src.url, timeout=600)
        except MissingDependency:
            continue
        try:
            if not _has_image(sapi, img):
                continue
            print(f"chaos: loading the image {img} into engine {into.name} from {src.name} (once)", file=sys.stderr, flush=True)
            dapi = engine_client(into.url, timeout=600)
            try:
                dapi.load_image(sapi.get_image(img))
                if not _has_image(dapi, img):
                    raise MissingDependency(f"engine {into.name} did not keep the image {img} loaded from {src.name}")
            finally:
                dapi.close()
            return
        finally:
            sapi.close()
    raise MissingDependency(f"engine {into.name} lacks the image {img} and no engine here has it; `make compose` builds it, "
                            f"then `docker save {img} | docker -H {into.url} load`")


def make_cluster(spec: Any, run_id: str, log_dir: Path, groups: Sequence[Group]) -> SwarmCluster:
    from harness.core.options import cluster_option

    return SwarmCluster(run_id, groups, read_nodes(nodes_file(spec)), clients=spec.concurrency, log_dir=log_dir,
                        clients_on=cluster_option(spec.options, "clients_on"),
                        client_image=cluster_option(spec.options, "client_image"))

