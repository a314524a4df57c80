"""The compose cluster as data: its topology, and the compose files generated from it.

Pure: nothing here touches Docker. `TOPOLOGY` names every server with its address;
`document()` is a whole compose file as a dict and `render()` its YAML. The file on disk,
compose/docker-compose.yml (`python -m harness.cluster.compose_file > compose/docker-compose.yml`,
checked by tests/unit/cluster/test_compose.py), is the one for people: every server, healthchecks,
the harness service. A run writes its own, from the same function, into its state dir: only
its servers, configured by its options (harness/cluster/compose.py).

Every server runs the command line the local provider would give it (the ServerKind's
argv, with the container's own address, ports and paths), so the two providers run the
same servers the same way and their verdicts compare.

  network `chaos` 198.19.250.0/24 (bridge `chaoslock0`)  every server, with a fixed address
      in the lower half (Docker's own allocations stay there too: ip_range). The upper half
      is the harness's: each lock client gets a network namespace of its own, attached to
      this bridge (harness/cluster/netns.py), so one client can be cut from one server.
  /state  a bind mount of the node's dir in the run's state dir on the host: data dir,
      server log (server.log), libfaketime's clock file. The harness reads the log (the
      ZooKeeper clock read-back) and writes the clock file from the host, as it does for
      local processes.
Addresses come from 198.19.250.0/24 only, the top of the RFC 2544 benchmarking range
198.18.0.0/15, far from the /24s the local provider picks.
"""

from __future__ import annotations

import re

import ipaddress
import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from harness.core.contracts.cluster import Node, ServerKind
from harness.cluster.kinds import KINDS, kind_class, node_names, server_kind

PROJECT = "chaoslock"
COMPOSE_FILE = Path(__file__).resolve().parents[2] / "compose" / "docker-compose.yml"
NET = ipaddress.ip_network("198.19.250.0/24")
DOCKER_RANGE = "198.19.250.0/25"  # Docker's IPAM stays here; the clients' namespaces take the rest
CLIENT_OFFSET = 128  # client c<i> is NET[CLIENT_OFFSET + i]: netns.Network(first_host=CLIENT_OFFSET - 1)
BRIDGE = "chaoslock0"
GATEWAY = str(NET[1])
FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
STATE = "/state"  # inside each server container
CLOCK_FILE, LOG_FILE, DATA_DIR = f"{STATE}/clock", f"{STATE}/server.log", f"{STATE}/data"
MANUAL_STATE = "/dev/shm/chaoslock-compose"  # the people's file's default for ${CHAOSLOCK_STATE}
HARNESS_IMAGE = "chaoslock-harness:0.1.0"
# Views of the kinds' own attributes (harness/cluster/kinds.py), by kind name, for compose.py.
IMAGES = {**{k: kind_class(k).image for k in KINDS}, "harness": HARNESS_IMAGE}
BINARIES = {k: kind_class(k).binary for k in KINDS}  # on each image's PATH
PORTS = {k: kind_class(k).default_port for k in KINDS}
PEER_PORTS = {k: tuple(kind_class(k).peer_ports) for k in KINDS}
RUN_LABEL = "chaoslock.run"


def image(kind: str) -> str:
    """The image a kind's containers run: $CHAOSLOCK_IMAGE_<KIND> if set, else the project's."""
    return os.environ.get(f"CHAOSLOCK_IMAGE_{kind.upper()}") or (HARNESS_IMAGE if kind == "harness" else kind_class(kind).image)


@dataclass(frozen=True, slots=True, kw_only=True)
class Server:
    name: str
    kind: str
    ordinal: int
    ip: str

    @property
    def container(self) -> str:
        return f"{PROJECT}-{self.name}"


def _topology() -> dict[str, Server]:
    """The store, and each kind's servers at the host numbers it names (`compose_hosts`), in
    address order."""
    servers = [Server(name="store", kind="valkey", ordinal=1, ip=str(NET[10]))]
    for k in KINDS:
        hosts = kind_class(k).compose_hosts
        servers += [Server(name=name, kind=k, ordinal=i, ip=str(NET[h]))
                    for i, (name, h) in enumerate(zip(node_names(k, len(hosts)), hosts), 1)]
    return {s.name: s for s in sorted(servers, key=lambda s: ipaddress.ip_address(s.ip))}


TOPOLOGY = _topology()
GROUPS = {k: tuple(s.name for s in TOPOLOGY.values() if s.kind == k and s.name != "store") for k in KINDS}


def group(kind: str) -> list[Server]:
    """The servers a `kind` cluster may use, in order (a run takes the first `count`)."""
    return [TOPOLOGY[n] for n in GROUPS[kind]]


def container_node(s: Server, *, role: str = "lock", fake_clock: bool = False) -> Node:
    """The server as its own container sees it: its address, ports and paths under /state."""
    kind = kind_class(s.kind)
    peer, election = kind.peer_ports
    return Node(name=s.name, kind=s.kind, role=role, host=s.ip, port=kind.default_port, peer_port=peer,
                election_port=election, data_dir=DATA_DIR, log_path=LOG_FILE,
                clock_file=CLOCK_FILE if fake_clock else None, ordinal=s.ordinal)


def command(kind: ServerKind, s: Server, peers: Sequence[Server]) -> list[str]:
    """`sh -c` that prepares the node's config in /state and execs the local provider's argv,
    its output into /state/server.log (where the harness reads it)."""
    me, others = container_node(s), [container_node(p) for p in peers]
    argv = kind.argv(me, others, binary=kind.binary)
    if "--proc-title-template" in argv:  # names a host run dir, which a container has not
        i = argv.index("--proc-title-template")
        del argv[i:i + 2]
    prep = [f"mkdir -p {DATA_DIR}"]
    for name, text in kind.config_files(me, others).items():
        if "\n" in text.rstrip("\n") or not text.endswith("\n"):
            prep.append(f"printf %s {shlex.quote(text)} > {DATA_DIR}/{name}")
        else:  # one line, as the file's reader sees it in `docker inspect`
            prep.append(f"echo {shlex.quote(text[:-1])} > {DATA_DIR}/{name}")
    if kind.data_dir_mode is not None:
        prep.append(f"chmod {kind.data_dir_mode:o} {DATA_DIR}")
    return ["sh", "-c", " && ".join(prep) + f" && exec {shlex.join(argv)} >>{LOG_FILE} 2>&1"]


def _health(s: Server, kind: ServerKind) -> dict:
    test = ["CMD", *(a.format(host=s.ip, port=kind.default_port) for a in kind.health)]
    return {"test": test, "interval": "1s", "timeout": "3s", "retries": 60}


def _service(s: Server, kind: ServerKind, peers: Sequence[Server], *, run: str, state: str,
             faketime: str | None, healthcheck: bool) -> dict:
    svc: dict[str, Any] = {"image": image(s.kind), "container_name": s.container, "hostname": s.name,
                           "labels": {RUN_LABEL: run}, "networks": {"chaos": {"ipv4_address": s.ip}},
                           "volumes": [f"{state}/{s.name}:{STATE}"],
                           "command": [a.replace("$", "$$") for a in command(kind, s, peers)]}  # no interpolation
    if faketime is not None and s.name != "store":  # the store is never faulted
        svc["environment"] = {"LD_PRELOAD": faketime, "FAKETIME_TIMESTAMP_FILE": CLOCK_FILE, "FAKETIME_NO_CACHE": "1"}
    if healthcheck:
        svc["healthcheck"] = _health(s, kind)
    return svc


def _harness() -> dict:
    """The harness itself in a container. It faults the servers from the host's side, as
    the harness on the host does: host network (it attaches client namespaces to the
    chaos bridge), host pids (SIGSTOP, the vDSO patch), the capabilities for namespaces,
    iptables and ptrace, the engine's socket, and /dev/shm, where run state dirs (bind-mounted into the
    servers by their host path) live."""
    return {"image": image("harness"), "container_name": f"{PROJECT}-harness",
            "build": {"context": "..", "dockerfile": "compose/Dockerfile.harness"},
            "profiles": ["harness"], "labels": {RUN_LABEL: "harness"},
            # Every capability but CAP_SYS_RESOURCE, unconfined: `privileged` asks for all of
            # them, which a host that lacks one in its own bounding set (this project's) refuses.
            "network_mode": "host", "pid": "host", "cap_add": ["ALL"], "cap_drop": ["SYS_RESOURCE"],
            "security_opt": ["seccomp=unconfined", "apparmor=unconfined", "systempaths=unconfined"],
            "command": ["sleep", "infinity"], "working_dir": "/src",
            "volumes": ["/var/run/docker.sock:/var/run/docker.sock", "/dev/shm:/dev/shm", "../store:/src/store"],
            "healthcheck": {"test": ["CMD", "chaos", "list"], "interval": "2s", "timeout": "10s", "retries": 30}}


def document(servers: Sequence[tuple[Server, ServerKind]] | None = None, *, run: str = "${CHAOSLOCK_RUN:-manual}",
             state: str = f"${{CHAOSLOCK_STATE:-{MANUAL_STATE}}}", faketime: str | None = "${CHAOSLOCK_FAKETIME:-}",
             people: bool = True) -> dict:
    """A compose file: the given (server, kind) pairs, or every server with default kinds.

    people=True adds healthchecks and the harness service (the checked-in file); a run's
    own file has neither (the provider probes readiness itself, and faster). `faketime`
    is LD_PRELOAD for the lock servers (None: no libfaketime)."""
    if servers is None:
        servers = [(s, server_kind(s.kind)) for s in TOPOLOGY.values()]
    by_kind: dict[str, list[Server]] = {}
    for s, _ in servers:
        if s.name != "store":
            by_kind.setdefault(s.kind, []).append(s)
    services = {s.name: _service(s, kind, by_kind.get(s.kind, [s]) if s.name != "store" else [s], run=run, state=state,
                                 faketime=faketime, healthcheck=people)
                for s, kind in servers}
    if people:
        services["harness"] = _harness()
    net = {"driver": "bridge", "driver_opts": {"com.docker.network.bridge.name": BRIDGE}, "labels": {RUN_LABEL: run},
           "ipam": {"config": [{"subnet": str(NET), "ip_range": DOCKER_RANGE, "gateway": GATEWAY}]}}
    return {"name": PROJECT, "services": services, "networks": {"chaos": net}}


# What YAML 1.2's core schema reads as a number, a bool or null. PyYAML writes YAML 1.1, where
# "090630" (a run id started before 10:00) is no octal and so goes out bare; Compose reads it
# back as the integer 90630, and the run's containers then carry a label no one looks for.
_NOT_A_STRING_IN_YAML12 = re.compile(r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+|[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?"
                                     r"|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)|true|True|TRUE|false|False|FALSE|null|Null|NULL|~|")


def render(doc: dict | None = None, *, head: bool = True) -> str:
    import yaml

    text = ("# Generated by `python -m harness.cluster.compose_file > compose/docker-compose.yml`; edit\n"
            "# harness/cluster/compose_file.py, not this file (tests/unit/cluster/test_compose.py checks they agree).\n"
            "# Images: `make compose` builds them. Up by hand: docker compose -f compose/docker-compose.yml up -d --wait\n"
            "# (CHAOSLOCK_STATE picks the host dir bind-mounted as each server's /state).\n") if head else ""

    class Dumper(yaml.SafeDumper):
        pass

    def seq(d: yaml.SafeDumper, v: list):  # lists of scalars on one line, everything else as blocks
        flat = all(not isinstance(x, (dict, list)) for x in v) and sum(len(str(x)) for x in v) < 100
        return d.represent_sequence("tag:yaml.org,2002:seq", v, flow_style=flat)

    def string(d: yaml.SafeDumper, v: str):  # quoted wherever YAML 1.2 (Compose's parser) would not read a string
        style = '"' if _NOT_A_STRING_IN_YAML12.fullmatch(v) else None
        return d.represent_scalar("tag:yaml.org,2002:str", v, style=style)

    Dumper.add_representer(list, seq)
    Dumper.add_representer(str, string)
    return text + yaml.dump(doc or document(), Dumper=Dumper, sort_keys=False, width=120)


if __name__ == "__main__":
    print(render(), end="")
