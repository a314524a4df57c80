"""The swarm provider's clients on the swarm (`-o clients_on=manager|spread`), a mixin of
SwarmCluster (harness/cluster/swarm.py).

Each client host cI gets a *pod*: a container of the run on its engine (the manager, or engine
I round robin with `spread`), on that engine's bridge network, with NET_ADMIN, doing nothing but
hold a network namespace, as cI's namespace does on this machine. Each worker's client process
runs in a container of its own that joins its pod's namespace (`--network container:POD`):
`docker -H ENGINE run -i --rm ... IMAGE CMD`, started by the worker on this machine, which
speaks the client protocol through the container's attached stdin and stdout and records every
op with this machine's clock (the history's). So:

  cuts       partition-client, partition-waiter and cut-in-flight put their rules in the pod's
             namespace (iptables through the pod, by the engine's API): the client's own network,
             whichever container of it runs now; slow-link too, with a delayer in the pod
             (harness/cluster/swarm_links.py).
  pause      the worker's SIGSTOP, and the client's container frozen by its engine (`docker pause`);
  kill       the worker's SIGKILL, and the client's container killed by its engine; a respawned
             worker starts a new container in the same pod.

The client command sees this machine's working directory and the chaoslock checkout mounted at
the same paths (on separate machines: a shared mount, as the servers' state dir needs).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from harness.cluster.compose_file import HARNESS_IMAGE, RUN_LABEL
from harness.core.contracts.cluster import ClientPlace
from harness.core.errors import ClusterError, NemesisError

CLIENT_LABEL = "chaoslock.client"  # the pod of client host cI
WORKER_LABEL = "chaoslock.worker"  # the client process container of worker i
CHECKOUT = Path(__file__).resolve().parents[2]


def _mounts() -> list[str]:
    """The working directory and the checkout, each once (one may hold the other)."""
    here, out = Path.cwd().resolve(), []
    for p in sorted({here, CHECKOUT}, key=lambda p: len(p.parts)):
        if not any(p.is_relative_to(q) for q in out):
            out.append(p)
    return [str(p) for p in out]


class SwarmClients:
    """Uses SwarmCluster's engines, api(), run id, n_clients and nodes; `clients_on` and
    `client_image` come from the run's options (make_cluster)."""

    clients_on: str = "control"
    client_image: str = ""
    _pods: dict  # client host name (c1..) -> (engine, pod container id)

    def clients_elsewhere(self) -> bool:
        return self.clients_on != "control"

    def client_engine(self, c: int):
        """The engine client host c (0-based) runs on."""
        return self.engines[0] if self.clients_on == "manager" else self.engines[c % len(self.engines)]

    def _client_pods(self) -> None:
        """One pod per client host on its engine, started."""
        for c in range(self.n_clients):
            name, engine = f"c{c + 1}", self.client_engine(c)
            api = self.api(engine)
            hc = api.create_host_config(network_mode="bridge", cap_add=["NET_ADMIN", "NET_RAW"])
            pod = api.create_container(HARNESS_IMAGE, command=["sleep", "infinity"], host_config=hc, hostname=name,
                                       labels={RUN_LABEL: self.run_id, CLIENT_LABEL: name},
                                       name=f"chaoslock-{self.run_id}-{name}")
            self._pods[name] = (engine, pod["Id"])
            api.start(pod["Id"])

    def _pod_lines(self) -> str:
        return "".join(f"{name} engine {engine.name} ({engine.url}) client host: container {pod[:12]}; each worker's "
                       f"client process runs in a container of its own in that container's network\n"
                       for name, (engine, pod) in self._pods.items())

    def client(self, index: int) -> ClientPlace:
        if not self.clients_elsewhere():
            return super().client(index)  # type: ignore[misc]
        engine, pod = self._pods[f"c{index % self.n_clients + 1}"]
        wrap = ["docker", "-H", engine.url, "run", "-i", "--rm", "--network", f"container:{pod}",
                "--label", f"{RUN_LABEL}={self.run_id}", "--label", f"{WORKER_LABEL}={index}",
                *[a for m in _mounts() for a in ("-v", f"{m}:{m}")], "-w", str(Path.cwd().resolve()),
                self.client_image or HARNESS_IMAGE]
        return ClientPlace(netns=None, nodes=tuple(self.lock_nodes()), wrap=tuple(wrap))

    # -- ControlsClients: worker i's client process where it runs ---------------------------------
    def _worker_containers(self, index: int, states: tuple[str, ...]) -> list[tuple[Any, str]]:
        engine, _ = self._pods[f"c{index % self.n_clients + 1}"]
        api = self.api(engine)
        rows = api.containers(all=True, filters={"label": [f"{RUN_LABEL}={self.run_id}", f"{WORKER_LABEL}={index}"]})
        return [(api, c["Id"]) for c in rows if c.get("State") in states]

    def pause_client(self, index: int) -> None:
        for api, cid in self._worker_containers(index, ("running",)):
            try:
                api.pause(cid)
            except Exception as e:  # it ended meanwhile
                if "is not running" not in str(e):
                    raise ClusterError(f"could not pause worker {index}'s client container {cid[:12]}: "
                                       f"{' '.join(str(e).split())[:200]}") from None

    def resume_client(self, index: int) -> None:
        for api, cid in self._worker_containers(index, ("paused",)):
            try:
                api.unpause(cid)
            except Exception as e:
                if "is not paused" not in str(e):
                    raise ClusterError(f"could not resume worker {index}'s client container {cid[:12]}: "
                                       f"{' '.join(str(e).split())[:200]}") from None

    def kill_client(self, index: int, wait_s: float = 5.0) -> dict:
        """SIGKILL worker i's client containers (a paused one too: the engine delivers the kill and
        thaws it) and wait until none runs: {"containers": those killed, "gone": none runs}."""
        found = self._worker_containers(index, ("running", "paused", "restarting"))
        for api, cid in found:
            try:
                api.kill(cid, signal="KILL")
            except Exception:
                pass  # gone meanwhile
        deadline = time.monotonic() + wait_s
        while (left := self._worker_containers(index, ("running", "paused", "restarting"))) and time.monotonic() < deadline:
            time.sleep(0.02)
        return {"containers": [cid[:12] for _, cid in found], "gone": not left}

    # -- the pods' network: where client rules run ------------------------------------------------
    def _client_where(self, client: str) -> tuple[str, str]:
        """Where rules cutting client host `client` go: its pod, or its namespace here."""
        if self.clients_elsewhere():
            return ("pod", client)
        if self.network is None:
            raise NemesisError(f"cannot cut client {client} alone: {self.fallback_reason}")
        return ("netns", self.network.host(client).netns)


__all__ = ["SwarmClients", "CLIENT_LABEL", "WORKER_LABEL"]
