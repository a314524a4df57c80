"""The embedded default provider: real servers as local processes, one namespace per node.

With root and netns support each server and each client worker gets its own network
namespace on a bridge (see netns.py), so a partition is a real cut between hosts. Without
them it falls back to loopback with one port per server, and says which nemeses are then
unavailable. Everything created carries the run id: processes have CHAOSLOCK_RUN in their
environment, namespaces and the bridge have it in their names, the state dir is
STATE_ROOT/<run_id>. `down()` removes all of it, also after a failed `up()`.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from harness.core.contracts.cluster import Node, ProcState, check_run_id
from harness.cluster.shaping import LinkShaping
from harness.cluster.provider import (FAKETIME_LIB, RUN_ENV, Group, ServerCluster, clock_method, prepare_node,
                                      set_node_clock)
from harness.core.errors import BadArgument, ClusterError, MissingDependency, PortInUse
from harness.core.interrupts import deferred, quiet_group, shielded
from harness.core.outputcap import cap_file


def faketime_files(pid: int) -> list[Path]:
    """The shared memory libfaketime 0.9.10 creates for a process it was preloaded into
    first (its `FAKETIME_SHARED` segment and semaphore), named by that process's pid."""
    return [Path(f"/dev/shm/faketime_shm_{pid}"), Path(f"/dev/shm/sem.faketime_sem_{pid}")]


def remove_faketime_files(pid: int) -> list[str]:
    """Remove them once the process is gone (libfaketime does not, on SIGTERM or SIGKILL)."""
    gone = []
    for f in faketime_files(pid):
        try:
            if f.lstat().st_uid == os.geteuid():
                f.unlink()
                gone.append(str(f))
        except OSError:
            pass
    return gone


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def _choose_network(run_id: str, netns: bool | None, base_port: int | None):
    """(Network, None) when the run gets namespaces, else (None, why not). netns=True
    requires them (MissingDependency if unavailable); an explicit --base-port wins."""
    if netns is False:
        return None, None
    from harness.cluster import netns as _netns

    reason = _netns.netns_available()
    if reason is None and base_port is not None:
        if netns is True:
            raise BadArgument("--base-port sets loopback ports, which a run in network namespaces does not use; "
                              "drop --base-port or use --no-netns")
        reason = "--base-port asks for loopback ports"  # the explicit setting wins, and the run says so
    if reason is None:
        return _netns.Network(run_id), None
    if netns is True:
        raise MissingDependency(f"network namespaces are unavailable: {reason}")
    return None, reason


def make_cluster(spec: Any, run_id: str, log_dir: Path, groups: Sequence[Group]) -> LocalCluster:
    """The provider's cluster for a run (harness.core.contracts.cluster.Provider)."""
    return local_cluster(run_id, groups, clients=spec.concurrency, netns=spec.netns, log_dir=log_dir,
                         base_port=spec.base_port)


def preflight(spec: Any, kind: str) -> None:
    """The servers' binaries, checked before the run dir exists: one sentence when one is missing."""
    from harness.cluster.kinds import server_kind
    from harness.cluster.valkey import ValkeyKind

    server_kind(kind, spec.options).check_installed()
    ValkeyKind().check_installed()  # the store


def remove_run(run_id: str, state: Mapping[str, Any] | None) -> list[str]:
    """Nothing of its own: a local run leaves processes, a cgroup, namespaces and a state dir,
    which the reaper sweeps for every provider."""
    return []


def leftover_runs() -> set[str]:
    return set()


def local_cluster(run_id: str, groups: Sequence[Group], *, netns: bool | None = None,
                  base_port: int | None = None, **kw) -> LocalCluster:
    """The local provider's cluster for a run: a NamespacedCluster (which adds
    NetworkControl) where namespaces work and were not refused (netns=False, an explicit
    --base-port), else a LocalCluster on loopback that says why (`fallback_reason`).
    netns=True requires namespaces (MissingDependency if unavailable)."""
    network, reason = _choose_network(check_run_id(run_id), netns, base_port)
    cls = NamespacedCluster if network is not None else LocalCluster
    return cls(run_id, groups, network=network, fallback_reason=reason, base_port=base_port, **kw)


class LocalCluster(ServerCluster):
    """Cluster, ProcessControl and ClockControl on local processes, on loopback. Only a
    NamespacedCluster, which can really cut links, claims NetworkControl; `local_cluster`
    picks the one the machine allows."""

    def __init__(self, run_id: str, groups: Sequence[Group], *, clients: int = 0, network: Any = None,
                 fallback_reason: str | None = None, log_dir: str | os.PathLike | None = None,
                 base_port: int | None = None, ready_timeout: float = 40.0):
        super().__init__(run_id, groups, clients=clients, log_dir=log_dir, ready_timeout=ready_timeout)
        self.base_port = base_port
        self.network, self.fallback_reason = network, fallback_reason
        self._state: dict[str, ProcState] = {}
        self._logs: dict[str, object] = {}
        self.client_addrs: list[str] = ["127.0.0.1"] * max(1, self.n_clients)

    def up(self) -> None:
        """Start every server and wait until each group serves. On failure, clean up and raise."""
        for g in self.groups:
            g.kind.check_installed()
            if g.fake_clock and not os.path.exists(FAKETIME_LIB):
                raise MissingDependency(f"{FAKETIME_LIB} not found; run `make install` (apt package libfaketime)")
        try:
            self._make_state_dir()
            self.log_dir.mkdir(parents=True, exist_ok=True)
            self._plan()
            self._write_state()
            for g in self.groups:
                peers = [self._nodes[n] for n in g.names]
                for node in peers:
                    self._kinds[node.name] = g.kind
                    prepare_node(g.kind, node, peers)
                    self._spawn(node)
            self._wait_ready()
            self._write_state()
        except BaseException:
            self.down()
            raise

    def _plan(self) -> None:
        used: set[int] = set()

        def pick() -> int:
            while True:
                p = free_port()
                if p not in used:
                    used.add(p)
                    return p

        if self.network is not None:
            self.network.up()
        next_port = self.base_port
        for g in self.groups:
            for i, name in enumerate(g.names, 1):
                if self.network is not None:
                    host = self.network.add_host(name)
                    addr, ns = host.addr, host.netns
                    port, peer, elect = g.kind.default_port, 2380, 3888
                else:
                    addr, ns = "127.0.0.1", None
                    if next_port is not None:
                        port = next_port
                        next_port += 1
                        if not port_free(port):
                            raise PortInUse(f"port {port} (for {name}) is in use; free it or pass another --base-port")
                    else:
                        port = pick()
                    peer, elect = pick(), pick()
                clock_file = None
                data = self.dir / name
                if g.fake_clock:
                    clock_file = str(self.dir / f"{name}.faketime")
                    Path(clock_file).write_text("+0\n")
                self._nodes[name] = Node(name=name, kind=g.kind.name, role=g.role, host=addr, port=port,
                                         peer_port=peer, election_port=elect, netns=ns, data_dir=str(data),
                                         log_path=str(self.log_dir / f"{name}.log"), clock_file=clock_file,
                                         ordinal=i)
        for c in range(self.n_clients):
            if self.network is not None:
                h = self.network.add_host(f"c{c + 1}")
                self.client_netns[c], self.client_addrs[c] = h.netns, h.addr

    def _spawn(self, node: Node) -> None:
        kind = self._kinds[node.name]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("FAKETIME", "LD_PRELOAD", *kind.strip_env))}
        env[RUN_ENV] = self.run_id
        env.update(kind.env(node))
        argv = kind.argv(node, [n for n in self.nodes if n.kind == node.kind])
        if node.clock_file:
            # Preloaded into the server alone, through `env`, not into `ip netns exec`:
            # libfaketime makes shared memory named by the pid of the first process that
            # loads it, and the exec chain keeps one pid, so the files to remove are known.
            argv = ["env", f"LD_PRELOAD={FAKETIME_LIB}", f"FAKETIME_TIMESTAMP_FILE={node.clock_file}",
                    "FAKETIME_NO_CACHE=1"] + argv
        if node.netns:
            argv = ["ip", "netns", "exec", node.netns] + argv
        log = open(node.log_path, "ab")
        self._logs[node.name] = log
        try:
            # deferred: with a preexec_fn Python runs its at-fork hooks here, and a press raised in one
            # is printed as "Exception ignored" and lost; and a server started must be recorded
            with deferred():
                p = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True, preexec_fn=self.contained.preexec("servers"),
                                     cwd=node.data_dir if os.path.isdir(node.data_dir) else None)
                self._state[node.name] = ProcState(pid=p.pid, alive=True,
                                                   extra={"popen": p, "faketime": bool(node.clock_file)})
        except FileNotFoundError as e:
            raise MissingDependency(f"cannot start {node.name}: {e.filename} not found; run `make install`") from None

    def _check_alive(self, node: Node) -> None:
        p = self._state[node.name].extra["popen"]
        if p.poll() is None:
            return
        tail = self.log_tail(node.name)
        if "in use" in tail.lower():
            raise PortInUse(f"{node.name} could not bind {node.endpoint}: address in use; stop what holds it or pick another port")
        raise ClusterError(f"{node.name} ({node.kind}) exited with code {p.returncode} during start; its log {node.log_path} ends: {tail[-300:].strip()}")

    def down(self) -> None:
        """Stop everything this run started and remove its state dir. Idempotent, never raises.
        Ctrl-C cannot cut it short (harness/core/interrupts.py)."""
        with shielded("stopping the servers and removing the run's namespaces"):
            self._down()

    def _down(self) -> None:
        self._stop_all()
        for log in self._logs.values():
            try:
                log.close()
            except Exception:
                pass
        for node in self._nodes.values():  # what is kept of each server's own log is capped too
            cap_file(node.log_path)
        if self.network is not None:
            try:
                self.network.down()
            except Exception:
                pass
        self._remove_state_dir()
        for stray in self.strays:  # a server a Ctrl-C caught between its start and its record
            pid = stray.split(" ", 1)[0]
            if pid.isdigit():
                remove_faketime_files(int(pid))

    def _stop_all(self, sig_timeout: float = 5.0) -> None:
        """Stop every live server: SIGTERM (resumed first, a paused one cannot exit), then
        wait, SIGKILL after sig_timeout. Kinds that stop together (ServerKind.stops_together)
        get their SIGTERMs at once and shut down side by side (a ZooKeeper JVM takes ~0.4 s);
        the others one after another."""
        live = [(name, st) for name, st in self._state.items() if st.alive]
        together = [st for name, st in live if self._kinds[name].stops_together]
        self._stop_group(together, sig_timeout)
        for name, st in live:
            if not self._kinds[name].stops_together:
                self._stop_group([st], sig_timeout)

    def _stop_group(self, live: list[ProcState], sig_timeout: float) -> None:
        for st in live:
            for sig in (signal.SIGCONT, signal.SIGTERM):
                try:
                    os.killpg(st.pid, sig)
                except ProcessLookupError:
                    break
        deadline = time.monotonic() + sig_timeout
        for st in live:
            try:
                st.extra["popen"].wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self._sigkill(st)
                continue
            st.alive = st.paused = False
            self._forget_pid(st)

    def _sigkill(self, st: ProcState) -> None:
        """SIGKILL the server's group, reap it, forget its pid."""
        p = st.extra["popen"]
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait(5)
        st.alive = st.paused = False
        self._forget_pid(st)

    def _forget_pid(self, st: ProcState) -> None:
        if st.extra.get("faketime"):
            remove_faketime_files(st.pid)

    # -- ProcessControl --------------------------------------------------------------------
    def pids(self, name: str) -> list[int]:
        st = self._state.get(name)
        return [st.pid] if st and st.alive else []

    def pause(self, name: str) -> None:
        st = self._state[self.node(name).name]
        os.killpg(st.pid, signal.SIGSTOP)
        st.paused = True

    def resume(self, name: str) -> None:
        st = self._state[self.node(name).name]
        os.killpg(st.pid, signal.SIGCONT)
        st.paused = False

    def kill(self, name: str) -> None:
        self._sigkill(self._state[self.node(name).name])

    def restart(self, name: str, *, wipe: bool = False) -> None:
        """Start a killed node again with its data dir (or an empty one with wipe=True)."""
        node = self.node(name)
        if self._state[name].alive:
            self.kill(name)
        if wipe:
            shutil.rmtree(node.data_dir, ignore_errors=True)
        prepare_node(self._kinds[name], node, [n for n in self.nodes if n.kind == node.kind])
        self._spawn(node)
        self._wait_restarted(node, f"; see {node.log_path}")
        if self._clock_offsets.get(name) and clock_method(node) == "timewarp":
            # A vDSO patch dies with the process. Re-apply it only once the server answers:
            # right after Popen the pid is still `ip netns exec`, whose exec drops the patch.
            self.set_clock(name, self._clock_offsets[name])

    # -- ClockControl ----------------------------------------------------------------------
    def set_clock(self, name: str, offset_s: float, rate: float = 1.0) -> None:
        """Set a node's wall-clock offset in seconds relative to the real clock."""
        self._clock_offsets[name] = offset_s
        set_node_clock(self.node(name), self._state[name].pid, offset_s)

    # -- state for `chaos cluster status/down` ---------------------------------------------
    def _write_state(self) -> None:
        state = {"run_id": self.run_id, "created": time.time(), "dir": str(self.dir),
                 "owner": os.environ.get("CHAOSLOCK_OWNER"), "owner_pid": os.getpid(),
                 "nodes": [n.to_dict() for n in self.nodes],
                 "pids": {k: v.pid for k, v in self._state.items()},
                 "cgroup": None if self.contained is None else self.contained.describe(),
                 "clients": {"netns": self.client_netns, "addrs": self.client_addrs},
                 "network": None if self.network is None else {"subnet": self.network.subnet,
                                                                "bridge_addr": self.network.bridge_addr}}
        (self.dir / "state.json").write_text(json.dumps(state, indent=1))


class NetnsLinks(LinkShaping):
    """NetworkControl for a cluster whose hosts (servers and clients c1..cN) are hosts of
    its netns.Network `self.network`: partitions are that network's iptables rules, slow
    links (ShapesLinks) its queue, statistic and htb rules (harness/cluster/shaping.py)."""

    network: Any

    def partition(self, grudge: Mapping[str, Iterable[str]]) -> None:
        self.network.partition(grudge)

    def heal(self) -> None:
        self.network.heal()

    def cut_one_way(self, client: str, servers: Iterable[str], lose: str) -> None:
        """CutsOneWay: one direction of a client's links (netns.Network.cut_one_way)."""
        self.network.cut_one_way(client, servers, lose)

    def reaches(self, src: str, dst: str) -> bool:
        """Whether host `src` (a server, or client c1..cN) opens a TCP connection to node
        `dst`'s client port now (300 ms)."""
        target = self.node(dst)
        ns = self.network.host(src).netns
        probe = f"import socket;socket.create_connection(({target.host!r},{target.port}),timeout=0.3)"
        r = subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", probe], capture_output=True, timeout=5,
                           **quiet_group())
        return r.returncode == 0


class NamespacedCluster(NetnsLinks, LocalCluster):
    """A LocalCluster whose servers and clients each have a network namespace: it can cut
    links (NetworkControl). Made by local_cluster(...) when namespaces are available."""
