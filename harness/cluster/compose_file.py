"""The compose cluster as data: its topology, and compose/docker-compose.yml generated from it.

Pure: nothing here touches Docker. `TOPOLOGY` names every server with its addresses;
`document()` is the whole compose file as a dict and `render()` its YAML
(`python -m harness.cluster.compose_file > compose/docker-compose.yml`); a unit test checks
that the file on disk still matches. The provider that drives these containers is
harness/cluster/compose.py. Addresses come from 198.19.250.0/23 only, the top of the
RFC 2544 benchmarking range 198.18.0.0/15, far from the /24s the local provider picks.

  network `chaos` 198.19.250.0/24  every service. Clients never reach a lock server directly:
      worker i talks to server s through its own toxiproxy proxy `c<i>>s` (`client_proxy`,
      created by the provider's up()), so cutting one client from one server is one proxy.
  network `peer-<x>` /28            one per etcd / ZooKeeper node x, holding x and toxiproxy.
      x's /etc/hosts maps every peer name `<y>.peer` to toxiproxy's address on peer-x, and
      each destination has its own port, so every directed server pair x>y has its own
      proxy (etcd: one, ZooKeeper: quorum and election; `peer_proxies`). A partition cuts
      exactly the pairs its grudge names, as the local provider's iptables rules do.
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROJECT = "chaoslock"
COMPOSE_FILE = Path(__file__).resolve().parents[2] / "compose" / "docker-compose.yml"
MAIN = ipaddress.ip_network("198.19.250.0/24")
PEERS = ipaddress.ip_network("198.19.251.0/24")
TOXIPROXY_IP, HARNESS_IP, TOXIPROXY_API = str(MAIN[2]), str(MAIN[3]), 8474
FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
CLOCK_FILE = "/faketime/clock"
IMAGES = {"valkey": "chaoslock-valkey:9.1.2", "zookeeper": "zookeeper:3.8.4", "etcd": "quay.io/coreos/etcd:v3.5.17",
          "toxiproxy": "ghcr.io/shopify/toxiproxy:2.9.0", "harness": "chaoslock-harness:0.1.0"}
PORTS = {"valkey": 6379, "zookeeper": 2181, "etcd": 2379}
ZK_QUORUM, ZK_ELECTION, ETCD_PEER = 2888, 3888, 2380


@dataclass(frozen=True, slots=True, kw_only=True)
class Server:
    name: str
    kind: str
    ordinal: int
    ip: str
    peer_net: str | None = None  # "peer-<name>" for kinds whose servers talk to each other
    peer_subnet: str | None = None
    toxiproxy_peer_ip: str | None = None  # toxiproxy's address on peer_net
    node_peer_ip: str | None = None

    @property
    def container(self) -> str:
        return f"{PROJECT}-{self.name}"


def _topology() -> dict[str, Server]:
    out: dict[str, Server] = {"store": Server(name="store", kind="valkey", ordinal=1, ip=str(MAIN[10]))}
    for i in range(1, 6):
        out[f"n{i}"] = Server(name=f"n{i}", kind="valkey", ordinal=i, ip=str(MAIN[10 + i]))
    peer_nets = iter(PEERS.subnets(new_prefix=28))
    for kind, prefix, base in (("zookeeper", "z", 20), ("etcd", "e", 30)):
        for i in range(1, 4):
            net = next(peer_nets)
            out[f"{prefix}{i}"] = Server(name=f"{prefix}{i}", kind=kind, ordinal=i, ip=str(MAIN[base + i]),
                                         peer_net=f"peer-{prefix}{i}", peer_subnet=str(net),
                                         node_peer_ip=str(net[2]), toxiproxy_peer_ip=str(net[3]))
    return out


TOPOLOGY = _topology()
GROUPS = {"valkey": ("n1", "n2", "n3", "n4", "n5"), "zookeeper": ("z1", "z2", "z3"), "etcd": ("e1", "e2", "e3")}


def group(kind: str) -> list[Server]:
    """The servers a `kind` cluster may use, in order (a provider takes the first `count`)."""
    return [TOPOLOGY[n] for n in GROUPS[kind]]


def peer_proxies() -> list[dict]:
    """The static server-to-server proxies (loaded by toxiproxy at start): name, listen, upstream."""
    out = []
    for kind, links in (("etcd", ((ETCD_PEER, 23800, ""),)),
                        ("zookeeper", ((ZK_QUORUM, 28880, ":quorum"), (ZK_ELECTION, 38880, ":election")))):
        for src in group(kind):
            for dst in group(kind):
                if src.name != dst.name:
                    for port, base, suffix in links:
                        out.append({"name": f"{src.name}>{dst.name}{suffix}", "listen": f"{src.toxiproxy_peer_ip}:{base + dst.ordinal}",
                                    "upstream": f"{dst.ip}:{port}", "enabled": True})
    return out


def client_proxy(client: int, server: Server, index: int) -> dict:
    """Worker `client` (1-based) -> `server`, the `index`-th (0-based) server of its group."""
    return {"name": f"c{client}>{server.name}", "listen": f"{TOXIPROXY_IP}:{30000 + 100 * client + index}",
            "upstream": f"{server.ip}:{PORTS[server.kind]}", "enabled": True}


def _health(test: list[str]) -> dict:
    return {"test": test, "interval": "2s", "timeout": "3s", "retries": 30, "start_period": "5s"}


def _service(s: Server) -> dict:
    svc: dict[str, Any] = {"image": IMAGES[s.kind], "container_name": s.container, "hostname": s.name,
                           "labels": {"chaoslock.run": "${CHAOSLOCK_RUN:-manual}"},
                           "networks": {"chaos": {"ipv4_address": s.ip}}}
    if s.kind == "valkey":
        svc["build"] = {"context": ".", "dockerfile": "Dockerfile.valkey"}
        svc["command"] = ["valkey-server", "--port", "6379", "--bind", "0.0.0.0", "--protected-mode", "no", "--save", "",
                          "--appendonly", "no", "--io-threads", "1"]
        if s.name != "store":  # the store is never faulted; the others get libfaketime only with a clock nemesis
            svc["environment"] = {"LD_PRELOAD": "${CHAOSLOCK_FAKETIME:-}", "FAKETIME_TIMESTAMP_FILE": CLOCK_FILE,
                                  "FAKETIME_NO_CACHE": "1"}
        svc["healthcheck"] = _health(["CMD", "python3", "-c", "import socket; s = socket.create_connection(('127.0.0.1', 6379), 1); "
                                      "s.sendall(b'PING\\r\\n'); assert s.recv(7) == b'+PONG\\r\\n'"])
        return svc
    peers = group(s.kind)
    svc["networks"][s.peer_net] = {"ipv4_address": s.node_peer_ip}
    svc["extra_hosts"] = [f"{p.name}.peer:{s.toxiproxy_peer_ip}" for p in peers]
    svc["depends_on"] = {"toxiproxy": {"condition": "service_healthy"}}
    if s.kind == "etcd":
        svc["command"] = ["/usr/local/bin/etcd", "--name", s.name, "--data-dir", "/var/lib/etcd/data",
                          "--listen-client-urls", "http://0.0.0.0:2379", "--advertise-client-urls", f"http://{s.ip}:2379",
                          "--listen-peer-urls", f"http://0.0.0.0:{ETCD_PEER}",
                          "--initial-advertise-peer-urls", f"http://{s.name}.peer:{23800 + s.ordinal}",
                          "--initial-cluster", ",".join(f"{p.name}=http://{p.name}.peer:{23800 + p.ordinal}" for p in peers),
                          "--initial-cluster-token", PROJECT, "--initial-cluster-state", "new",
                          # As the local provider: 100/1000 ms, pre-vote off (etcd 3.4's default).
                          "--heartbeat-interval", "100", "--election-timeout", "1000", "--pre-vote=false",
                          "--logger", "zap", "--log-outputs", "stderr"]
        svc["healthcheck"] = _health(["CMD", "/usr/local/bin/etcdctl", "--endpoints=http://127.0.0.1:2379", "endpoint", "health"])
    else:
        servers = " ".join(f"server.{p.ordinal}=" + ("0.0.0.0:2888:3888" if p.name == s.name else
                                                     f"{p.name}.peer:{28880 + p.ordinal}:{38880 + p.ordinal}") + ";2181"
                           for p in peers)
        # The local provider's timing (tickTime 500 ms, initLimit 20, syncLimit 4).
        svc["environment"] = {"ZOO_MY_ID": str(s.ordinal), "ZOO_SERVERS": servers, "ZOO_TICK_TIME": "500",
                              "ZOO_INIT_LIMIT": "20", "ZOO_SYNC_LIMIT": "4", "ZOO_4LW_COMMANDS_WHITELIST": "*",
                              "ZOO_MAX_CLIENT_CNXNS": "0", "ZOO_ADMINSERVER_ENABLED": "false", "ZOO_STANDALONE_ENABLED": "false",
                              "ZOO_CFG_EXTRA": "quorumListenOnAllIPs=true minSessionTimeout=1000 maxSessionTimeout=30000",
                              "JVMFLAGS": "-Xmx128m -Dzookeeper.fastleader.maxNotificationInterval=1000 -Dzookeeper.cnxTimeout=1000"}
        svc["healthcheck"] = _health(["CMD-SHELL", "zkServer.sh status"])
    return svc


def document() -> dict:
    """The whole compose file as a dict (what PyYAML writes to compose/docker-compose.yml)."""
    nets: dict[str, Any] = {"chaos": {"driver": "bridge", "ipam": {"config": [{"subnet": str(MAIN), "gateway": str(MAIN[1])}]}}}
    toxi_nets: dict[str, Any] = {"chaos": {"ipv4_address": TOXIPROXY_IP}}
    for s in TOPOLOGY.values():
        if s.peer_net:
            net = ipaddress.ip_network(s.peer_subnet)
            nets[s.peer_net] = {"driver": "bridge", "internal": True,
                                "ipam": {"config": [{"subnet": str(net), "gateway": str(net[1])}]}}
            toxi_nets[s.peer_net] = {"ipv4_address": s.toxiproxy_peer_ip}
    services: dict[str, Any] = {
        "toxiproxy": {"image": IMAGES["toxiproxy"], "container_name": f"{PROJECT}-toxiproxy",
                      "command": ["-host=0.0.0.0", "-config=/config/toxiproxy.json"],
                      "configs": [{"source": "toxiproxy_peers", "target": "/config/toxiproxy.json"}],
                      "labels": {"chaoslock.run": "${CHAOSLOCK_RUN:-manual}"},
                      "healthcheck": _health(["CMD", "/toxiproxy-cli", "list"]), "networks": toxi_nets}}
    services.update({name: _service(s) for name, s in TOPOLOGY.items()})
    services["harness"] = {
        "image": IMAGES["harness"], "container_name": f"{PROJECT}-harness",
        "build": {"context": "..", "dockerfile": "compose/Dockerfile.harness"},
        "command": ["sleep", "infinity"], "working_dir": "/src",
        "environment": {"CHAOSLOCK_COMPOSE_FILE": "/src/compose/docker-compose.yml"},
        "volumes": ["/var/run/docker.sock:/var/run/docker.sock", "../store:/src/store"],
        "healthcheck": _health(["CMD", "chaos", "list"]),
        "networks": {"chaos": {"ipv4_address": HARNESS_IP}}}
    return {"name": PROJECT, "services": services, "networks": nets,
            "configs": {"toxiproxy_peers": {"content": "[\n" + ",\n".join(json.dumps(p) for p in peer_proxies()) + "\n]\n"}}}


def render() -> str:
    import yaml

    head = ("# Generated by `python -m harness.cluster.compose_file > compose/docker-compose.yml`; edit\n"
            "# harness/cluster/compose_file.py, not this file (tests/unit/test_compose.py checks they agree).\n")
    class Dumper(yaml.SafeDumper):
        pass

    def seq(d: yaml.SafeDumper, v: list):  # lists of scalars on one line, everything else as blocks
        flat = all(not isinstance(x, (dict, list)) for x in v)
        return d.represent_sequence("tag:yaml.org,2002:seq", v, flow_style=flat)

    def text(d: yaml.SafeDumper, v: str):  # multi-line strings (the proxy list) as literal blocks
        return d.represent_scalar("tag:yaml.org,2002:str", v, style="|" if "\n" in v else None)

    Dumper.add_representer(list, seq)
    Dumper.add_representer(str, text)
    return head + yaml.dump(document(), Dumper=Dumper, sort_keys=False, width=120)


if __name__ == "__main__":
    print(render(), end="")
