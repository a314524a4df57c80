"""The compose provider: the same clusters as containers on a Docker host, faulted from outside.

The containers, their networks and the toxiproxy proxies between them are described (and
compose/docker-compose.yml generated) in harness/cluster/compose_file.py; this module
brings them up and down and injects the faults.

Faults, each one action list that `plan(op)` prints without touching Docker:
  pause / resume   docker pause / unpause: the cgroup freezer stops every process in the
                   container at once, like SIGSTOP of the server
  kill / restart   docker kill (SIGKILL) / docker start; the container's filesystem keeps the
                   data, as the local provider keeps the data dir
  clock            libfaketime in the valkey image reads /faketime/clock on every call
                   (FAKETIME_NO_CACHE=1); set_clock writes it via docker exec (tmp + mv, atomic)
                   and the clock nemesis reads it back with TIME. Only valkey nodes: etcd is Go
                   (vDSO clock, libfaketime cannot reach it) and the ZooKeeper image has no
                   libfaketime.
  partition        a toxiproxy `timeout` toxic with timeout 0 on both streams of every cut
                   proxy: data is dropped and connections hang, as with the local provider's
                   iptables DROP (disabling a proxy would refuse connections instead, a
                   different, faster-failing fault). heal = POST /reset (every toxic removed).

Must not: start anything outside the compose project `chaoslock`, or leave containers
behind: down() removes the services it started, with their anonymous volumes.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from harness.cluster.base import ClientPlace, Node, node_named
from harness.cluster.kinds import faketime_moves, servers_of
from harness.cluster.compose_file import (
    CLOCK_FILE,
    COMPOSE_FILE,
    FAKETIME_LIB,
    GROUPS,
    PORTS,
    PROJECT,
    TOPOLOGY,
    TOXIPROXY_API,
    TOXIPROXY_IP,
    Server,
    client_proxy,
    group,
)
from harness.errors import BadArgument, ClusterError, MissingDependency, NemesisError
from nemesis.base import Compose

NO_ENGINE = "no Docker engine is reachable (docker info failed); the local provider (the default) needs none"

Action = tuple[str, Callable[[], Any]]


class ComposeCluster:
    """Implements Cluster, ProcessControl, ClockControl and NetworkControl on containers.

    `nodes` carry the servers' own addresses (for probes, clock read-back and the store);
    `client(i).nodes` carry worker i's proxied addresses, which its lock client must use.
    Workers run on the Docker host, in no namespace of their own.
    """

    def __init__(self, run_id: str, kind: str, count: int, *, clients: int, log_dir: str | os.PathLike | None = None,
                 fake_clock: bool = False, compose_file: str | os.PathLike | None = None):
        if kind not in GROUPS or not 1 <= count <= len(GROUPS[kind]):
            raise BadArgument(f"the compose file has {len(GROUPS.get(kind, ()))} {kind} servers; a backend asking for "
                              f"{count} needs the local provider")
        self.run_id, self.kind, self.n_clients, self.fake_clock = run_id, kind, clients, fake_clock and kind == "valkey"
        self.servers = group(kind)[:count]
        self.compose_file = Path(compose_file or os.environ.get("CHAOSLOCK_COMPOSE_FILE") or COMPOSE_FILE)
        self.log_dir = Path(log_dir) if log_dir else None
        self.fallback_reason: str | None = None
        self._docker = None
        self._kinds: dict[str, Any] = {}
        self._nodes = {s.name: self._node(s, s.ip, PORTS[s.kind], "lock") for s in self.servers}
        store = TOPOLOGY["store"]
        self._nodes["store"] = self._node(store, store.ip, 6379, "store")

    def _node(self, s: Server, host: str, port: int, role: str) -> Node:
        return Node(name=s.name, kind=s.kind, role=role, host=host, port=port, ordinal=s.ordinal,
                    clock_file=CLOCK_FILE if self.fake_clock and role == "lock" else None)

    # -- Cluster ----------------------------------------------------------------------------------
    @property
    def nodes(self) -> list[Node]:
        return list(self._nodes.values())

    def node(self, name: str) -> Node:
        return node_named(self._nodes, name)

    def client(self, index: int) -> ClientPlace:
        """Worker `index` (0-based) runs on the host and reaches the lock nodes through its
        own proxies."""
        return ClientPlace(netns=None, nodes=tuple(self.client_nodes(index)))

    def client_nodes(self, index: int) -> list[Node]:
        """The lock nodes as worker `index` (0-based) must reach them: through its proxies."""
        out = []
        for i, s in enumerate(self.servers):
            host, port = client_proxy(index + 1, s, i)["listen"].rsplit(":", 1)
            out.append(self._node(s, host, int(port), "lock"))
        return out

    def services(self) -> list[str]:
        return ["toxiproxy", "store"] + [s.name for s in self.servers]

    def _compose(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        env = dict(os.environ, CHAOSLOCK_RUN=self.run_id, CHAOSLOCK_FAKETIME=FAKETIME_LIB if self.fake_clock else "")
        argv = ["docker", "compose", "-p", PROJECT, "-f", str(self.compose_file), *args]
        try:
            return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
        except FileNotFoundError:
            raise MissingDependency("the docker CLI is not installed; install Docker with the compose plugin") from None

    def docker(self):
        if self._docker is None:
            try:
                import docker

                client = docker.from_env(timeout=10)
                client.ping()
            except Exception:
                raise MissingDependency(NO_ENGINE) from None
            self._docker = client
        return self._docker

    def up(self) -> None:
        """Start toxiproxy, the store and the lock servers fresh; create the client proxies."""
        self.docker()
        if not self.compose_file.is_file():
            raise MissingDependency(f"{self.compose_file} not found; run from a chaoslock checkout or set CHAOSLOCK_COMPOSE_FILE")
        try:
            r = self._compose("up", "-d", "--wait", "--force-recreate", "--renew-anon-volumes", *self.services())
            if r.returncode != 0:
                raise ClusterError(f"`docker compose up` failed: {r.stderr.strip()[-400:]}; see `docker compose -p {PROJECT} logs`")
            for _, do in self._client_proxy_actions():
                do()
        except BaseException:
            self.down()
            raise

    def down(self) -> None:
        """Heal, save the servers' logs, remove the services this run started. Never raises."""
        if self._docker is None:
            return
        steps: list[Callable[[], Any]] = [do for _, do in self._heal_actions() + self._client_proxy_actions(remove=True)]
        steps += [lambda n=s.name: self._unpause(n) for s in self.servers]
        if self.log_dir is not None:
            steps.append(lambda: self.log_dir.mkdir(parents=True, exist_ok=True))
            steps += [lambda svc=svc: self._save_log(svc) for svc in self.services()]
        steps.append(lambda: self._compose("rm", "--stop", "--force", "--volumes", *self.services(), timeout=120))
        for step in steps:
            try:
                step()
            except Exception:
                pass

    def _save_log(self, service: str) -> None:
        r = self._compose("logs", "--no-color", "--timestamps", service, timeout=60)
        (self.log_dir / f"{service}.log").write_text(r.stdout + r.stderr)

    # -- actions: (what it does, how) -----------------------------------------------------------
    def _container(self, name: str):
        return self.docker().containers.get(TOPOLOGY[self.node(name).name].container)

    def _toxiproxy(self):
        from toxiproxy import Toxiproxy

        t = Toxiproxy()
        t.update_api_consumer(TOXIPROXY_IP, TOXIPROXY_API)
        return t

    def _client_proxy_actions(self, remove: bool = False) -> list[Action]:
        out: list[Action] = []
        for c in range(1, self.n_clients + 1):
            for i, s in enumerate(self.servers):
                p = client_proxy(c, s, i)
                if remove:
                    out.append((f"toxiproxy: delete proxy {p['name']}",
                                lambda p=p: (lambda x: x and x.destroy())(self._toxiproxy().get_proxy(p["name"]))))
                else:
                    out.append((f"toxiproxy: create proxy {p['name']} listen {p['listen']} upstream {p['upstream']}",
                                lambda p=p: self._toxiproxy().populate([p])))
        return out

    def _pause_actions(self, name: str, pause: bool = True) -> list[Action]:
        c = TOPOLOGY[self.node(name).name].container
        verb = "pause" if pause else "unpause"
        return [(f"docker {verb} {c}", lambda: getattr(self._container(name), verb)())]

    def _kill_actions(self, name: str) -> list[Action]:
        c = TOPOLOGY[self.node(name).name].container
        # Docker refuses to kill a paused container; SIGKILL of a stopped process needs no such step.
        return [(f"docker kill --signal SIGKILL {c}", lambda: (self._unpause(name), self._container(name).kill("SIGKILL")))]

    def _unpause(self, name: str) -> None:
        c = self._container(name)
        if c.status == "paused":
            c.unpause()

    def _restart_actions(self, name: str) -> list[Action]:
        node = self.node(name)
        c = TOPOLOGY[node.name].container
        return [(f"docker start {c}", lambda: self._container(name).start()),
                (f"wait until {node.name} answers on {node.endpoint}", lambda: self._wait_ready(node))]

    def _clock_actions(self, name: str, offset_s: float, rate: float = 1.0) -> list[Action]:
        node = self.node(name)
        if not node.clock_file:
            raise BadArgument(f"{name} does not run under libfaketime in the compose cluster (only valkey nodes, and only "
                              f"with a clock nemesis), so its clock cannot be moved")
        spec = f"{offset_s:+.3f}" if rate == 1.0 else f"{offset_s:+.3f} x{rate:g}"
        script = f"printf '%s\\n' '{spec}' > {CLOCK_FILE}.tmp && mv -f {CLOCK_FILE}.tmp {CLOCK_FILE}"
        c = TOPOLOGY[node.name].container
        return [(f"docker exec {c} sh -c \"{script}\"", lambda: self._exec(name, script))]

    def _links(self, a: str, b: str) -> list[str]:
        """Proxies that carry traffic between hosts a and b (servers or clients c<i>), both ways."""
        if a.startswith("c") and b in self._nodes:
            return [f"{a}>{b}"]
        if b.startswith("c") and a in self._nodes:
            return [f"{b}>{a}"]
        sa, sb = TOPOLOGY.get(a), TOPOLOGY.get(b)
        if not (sa and sb and sa.peer_net and sb.peer_net):
            return []  # valkey servers never talk to each other: nothing to cut
        suffixes = (":quorum", ":election") if sa.kind == "zookeeper" else ("",)
        return [f"{x}>{y}{sfx}" for x, y in ((a, b), (b, a)) for sfx in suffixes]

    def _partition_actions(self, grudge: Mapping[str, Iterable[str]]) -> list[Action]:
        out: list[Action] = []
        seen: set[frozenset] = set()
        for a, hated in sorted(grudge.items()):
            for b in sorted(hated):
                pair = frozenset((a, b))
                if pair in seen:
                    continue
                seen.add(pair)
                links = self._links(a, b)
                if not links:
                    out.append((f"nothing to cut between {a} and {b}: valkey servers do not talk to each other", lambda: None))
                for name in links:
                    out.append((f"toxiproxy: add timeout toxic (timeout=0) on both streams of proxy {name}",
                                lambda name=name: self._cut(name)))
        return out

    def _heal_actions(self) -> list[Action]:
        from toxiproxy.api import APIConsumer

        def reset() -> None:
            self._toxiproxy()
            APIConsumer.post("/reset")

        return [("toxiproxy: POST /reset (enable every proxy, remove every toxic)", reset)]

    def _cut(self, proxy: str) -> None:
        p = self._toxiproxy().get_proxy(proxy)
        if p is None:
            raise NemesisError(f"toxiproxy has no proxy {proxy}; was the cluster brought up by this provider?")
        for stream in ("upstream", "downstream"):
            p.add_toxic(type="timeout", stream=stream, name=f"cut-{stream}", attributes={"timeout": 0})
        if not {"cut-upstream", "cut-downstream"} <= set(p.toxics()):  # read back: the cut is in place
            raise NemesisError(f"toxiproxy did not keep the cut on {proxy}")

    def _exec(self, name: str, script: str) -> None:
        r = self._container(name).exec_run(["sh", "-c", script])
        if r.exit_code != 0:
            raise NemesisError(f"`{script}` failed in {name}: {r.output.decode(errors='replace').strip()[:200]}")

    def _wait_ready(self, node: Node, timeout: float = 60.0) -> None:
        kind = self._kind(node.kind)
        deadline = time.monotonic() + timeout
        while not kind.node_ready(node):
            if time.monotonic() > deadline:
                raise ClusterError(f"{node.name} did not answer within {timeout:.0f}s after start; see `docker logs "
                                   f"{TOPOLOGY[node.name].container}`")
            time.sleep(0.2)

    def _kind(self, kind: str):
        if kind not in self._kinds:
            from harness.cluster.kinds import server_kind

            self._kinds[kind] = server_kind(kind)
        return self._kinds[kind]

    def plan(self, op: Any) -> list[str]:
        """What the cluster would do for a nemesis op ((f, value) or an Op), without doing it."""
        f, value = (op.f, op.value) if hasattr(op, "f") else op
        if isinstance(value, list) and "@leader" in value:
            return [f"{f} the leader, looked up with the {self.kind} probes when the op runs"]
        names = lambda v: list(v) if v else [s.name for s in self.servers]  # noqa: E731  (None: every lock node)
        table: dict[str, Callable[[], list[Action]]] = {
            "pause": lambda: [a for n in names(value) for a in self._pause_actions(n)],
            "resume": lambda: [a for n in names(value) for a in self._pause_actions(n, pause=False)],
            "kill": lambda: [a for n in names(value) for a in self._kill_actions(n)],
            "restart": lambda: [a for n in names(value) for a in self._restart_actions(n)],
            "clock-bump": lambda: [a for n, off in dict(value).items() for a in self._clock_actions(n, float(off))],
            "clock-reset": lambda: [a for n in names(value) for a in self._clock_actions(n, 0.0)],
            "partition": lambda: self._partition_actions((value or {}).get("grudge", value or {})),
            "partition-client": lambda: self._partition_actions(
                {value["client"]: value["servers"]} if isinstance(value, dict) and "client" in value else value),
            "heal": self._heal_actions, "heal-client": self._heal_actions,
        }
        if f not in table:
            raise BadArgument(f"the compose provider has no plan for {f!r}; known ops: {', '.join(table)}")
        return [text for text, _ in table[f]()]

    # -- ProcessControl / ClockControl / NetworkControl ---------------------------------------------
    @staticmethod
    def _do(actions: list[Action]) -> None:
        for _, do in actions:
            do()

    def pids(self, name: str) -> list[int]:
        state = self._container(name).attrs.get("State", {})
        return [state["Pid"]] if state.get("Running") and state.get("Pid") else []

    def pause(self, name: str) -> None:
        self._do(self._pause_actions(name))

    def resume(self, name: str) -> None:
        self._do(self._pause_actions(name, pause=False))

    def kill(self, name: str) -> None:
        self._do(self._kill_actions(name))

    def restart(self, name: str, *, wipe: bool = False) -> None:
        if wipe and self.node(name).kind != "valkey":
            raise BadArgument("the compose provider keeps a killed node's data; restarting with an empty data dir "
                              "needs the local provider")
        self._do(self._restart_actions(name))  # valkey runs without persistence: it comes back empty anyway

    def movable_clocks(self) -> list[str]:
        """The valkey nodes run under libfaketime (with a clock nemesis); no vDSO patch here:
        ptrace into containers is not attempted."""
        return [n.name for n in self.nodes if n.clock_file]

    def set_clock(self, name: str, offset_s: float, rate: float = 1.0) -> None:
        self._do(self._clock_actions(name, offset_s, rate))

    def read_clock_offset(self, name: str) -> float:
        node = self.node(name)
        before = time.time()
        server = self._kind(node.kind).read_clock(node)
        return server - (before + time.time()) / 2

    def partition(self, grudge: Mapping[str, Iterable[str]]) -> None:
        self._do(self._partition_actions(grudge))

    def heal(self) -> None:
        self._do(self._heal_actions())

    def reaches(self, src: str, dst: str) -> bool:
        """Read back from toxiproxy: traffic from src to dst flows unless every proxy that
        carries it holds our cut. Hosts with no proxy between them (valkey servers) have
        no link in this topology, so nothing reaches."""
        links = [name for name in self._links(src, dst) if name.startswith(f"{src}>")]
        t = self._toxiproxy()
        return any(p is None or not {"cut-upstream", "cut-downstream"} <= set(p.toxics())
                   for p in (t.get_proxy(name) for name in links))


def make_compose_cluster(spec: Any, run_id: str, log_dir: Path, nemeses: Sequence[Any] = ()) -> ComposeCluster:
    """The compose counterpart of cluster.assemble.make_cluster: the backend's lock servers plus the store."""

    kind, count = servers_of(spec.backend, spec.options)
    fake = Compose(list(nemeses)).moves_server_clocks(spec) and faketime_moves(kind, spec.options)
    return ComposeCluster(run_id, kind, count, clients=spec.concurrency, log_dir=log_dir, fake_clock=fake)
