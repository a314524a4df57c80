"""The swarm provider's network faults (NetworkControl, CutsOneWay, ShapesLinks) as a mixin of
SwarmCluster (harness/cluster/swarm.py).

Between servers: iptables rules in each engine's host namespace, matched by address AND the
servers' ports, so the swarm's own traffic between the engines is never cut; run by the run's
helper container on that engine through the engine's API. Of a client: rules in the client's own
namespace on this machine, by the server's address and ports, as are its slow links; with
`-o clients_on`, in its pod's namespace on its engine (harness/cluster/swarm_clients.py)."""

from __future__ import annotations

import subprocess
from typing import Any, Iterable, Mapping, Sequence

from harness.core.contracts.cluster import Shape
from harness.cluster.shaping import QUEUE, LinkShaping, _ns_run
from harness.core.errors import NemesisError
from harness.cluster.swarm_engines import SwarmNode
from harness.core.interrupts import quiet_group


class SwarmLinks(LinkShaping):
    """Uses SwarmCluster's nodes, placement (`placed`), engines' API (`api`), helpers
    (`_helpers`, `_start_helper`), client network (`network`) and run id."""

    network: Any
    _rules: dict

    # -- NetworkControl ---------------------------------------------------------------------------
    def _server_ports(self, name: str) -> str:
        n = self._nodes[name]
        return ",".join(str(p) for p in (n.port, n.peer_port, n.election_port) if p)

    def _is_client(self, name: str) -> bool:
        return name.startswith("c") and name[1:].isdigit() and 1 <= int(name[1:]) <= self.n_clients

    def _cut_rules(self, a: str, b: str) -> dict[tuple[str, str], set[str]]:
        """The rules that cut a from b both ways, where each can be placed."""
        tag = f"-m comment --comment {self.comment} -j DROP"
        if self._is_client(a) and self._is_client(b):
            return {}
        if self._is_client(a) or self._is_client(b):
            client, server = (a, b) if self._is_client(a) else (b, a)
            addr, ports = self._nodes[server].host, self._server_ports(server)
            return {self._client_where(client): {
                f"-A INPUT -s {addr}/32 -p tcp -m multiport --sports {ports} {tag}",
                f"-A OUTPUT -d {addr}/32 -p tcp -m multiport --dports {ports} {tag}"}}
        ea, eb = self.placed[a], self.placed[b]
        if ea.name == eb.name:
            raise NemesisError(f"{a} and {b} both run on engine {ea.name}, so no rule can cut them apart; give the swarm "
                               f"one engine per lock server")
        pa, pb, addr = self._server_ports(a), self._server_ports(b), eb.addr
        return {("engine", ea.name): {
            f"-A INPUT -s {addr}/32 -p tcp -m multiport --dports {pa} {tag}",
            f"-A INPUT -s {addr}/32 -p tcp -m multiport --sports {pb} {tag}",
            f"-A OUTPUT -d {addr}/32 -p tcp -m multiport --dports {pb} {tag}",
            f"-A OUTPUT -d {addr}/32 -p tcp -m multiport --sports {pa} {tag}"}}

    def partition(self, grudge: Mapping[str, Iterable[str]]) -> None:
        """Cut each (a, b in grudge[a]) pair both ways; replaces the last cut. Lock servers that
        share an engine must be cut alike (a rule on the engine cuts them all)."""
        pairs = set()
        for a, hated in grudge.items():
            for b in (a, *hated):
                if b not in self._nodes and not self._is_client(b):
                    raise NemesisError(f"grudge names unknown host {b!r}; hosts are {', '.join(self._nodes)} and c1..c{self.n_clients}")
            pairs |= {(a, b) for b in hated if b != a}
        lock = {n.name for n in self.lock_nodes()}
        for a, b in pairs:
            if a in lock and b in lock:
                for other in lock - {a, b}:
                    if self.placed[other].name == self.placed[a].name and (other, b) not in pairs and (b, other) not in pairs:
                        raise NemesisError(f"{a} and {other} share engine {self.placed[a].name}: a cut of {a} from {b} "
                                           f"would cut {other} too; give the swarm one engine per lock server")
        want: dict[tuple[str, str], set[str]] = {}
        for a, b in pairs:
            for where, rules in self._cut_rules(a, b).items():
                want.setdefault(where, set()).update(rules)
        self._apply(want)

    def cut_one_way(self, client: str, servers: Iterable[str], lose: str) -> None:
        if lose not in ("request", "reply"):
            raise NemesisError(f"cannot cut the {lose!r} direction; choose request or reply")
        where = self._client_where(client)
        rules = set()
        for s in servers:
            addr, ports = self._nodes[s].host, self._server_ports(s)
            if lose == "reply":
                rules.add(f"-A INPUT -s {addr}/32 -p tcp -m multiport --sports {ports} -m comment --comment {self.comment} -j DROP")
            else:
                rules.add(f"-A OUTPUT -d {addr}/32 -p tcp -m multiport --dports {ports} -m comment --comment {self.comment} "
                          f"-j REJECT --reject-with tcp-reset")
        self._apply({where: rules})

    def heal(self) -> None:
        self.partition({})

    def _apply(self, want: Mapping[tuple[str, str], set[str]]) -> None:
        for where in set(want) | set(self._rules):
            old, new = self._rules.get(where, frozenset()), frozenset(want.get(where, ()))
            if old == new:
                continue
            script = ("*filter\n" + "".join("-D" + r[2:] + "\n" for r in sorted(old - new))
                      + "".join(r + "\n" for r in sorted(new - old)) + "COMMIT\n")
            self._restore(where, script)
        self._rules = {w: frozenset(r) for w, r in want.items() if r}

    def _restore(self, where: tuple[str, str], script: str) -> None:
        kind, name = where
        if kind == "netns":
            r = subprocess.run(["ip", "netns", "exec", name, "iptables-restore", "-w", "--noflush"], input=script,
                               capture_output=True, text=True, **quiet_group())
            ok, err = r.returncode == 0, r.stderr
        elif kind == "pod":  # a client's network on the swarm (-o clients_on)
            ok, err = self._pod_exec(name, ["sh", "-c", 'printf %s "$1" | iptables-restore -w --noflush', "sh", script])
        else:
            engine = next(e for e in self.engines if e.name == name)
            api = self.api(engine)
            ex = api.exec_create(self._helpers[name], ["sh", "-c", 'printf %s "$1" | iptables-restore -w --noflush', "sh", script])
            out = api.exec_start(ex["Id"]).decode(errors="replace")
            ok, err = api.exec_inspect(ex["Id"]).get("ExitCode") == 0, out
        if not ok:
            raise NemesisError(f"iptables-restore on {kind} {name} failed: {err.strip()[-300:]}")

    def reaches(self, src: str, dst: str) -> bool:
        """Whether host src (a server or client c1..cN) opens a TCP connection to dst's client
        port now (1 s)."""
        target = self.node(dst)
        probe = f"exec 3<>/dev/tcp/{target.host}/{target.port}"
        if self._is_client(src) and self.clients_elsewhere():
            return self._pod_exec(src, ["timeout", "1", "bash", "-c", probe])[0]
        if self._is_client(src):
            if self.network is None:
                return True
            r = subprocess.run(["ip", "netns", "exec", self.network.host(src).netns, "timeout", "1", "bash", "-c", probe],
                               capture_output=True, **quiet_group())
            return r.returncode == 0
        engine = self.placed[self.node(src).name]
        api = self.api(engine)
        helper = self._helpers.get(engine.name) or self._start_helper_for(engine)
        ex = api.exec_create(helper, ["timeout", "1", "bash", "-c", probe])
        api.exec_start(ex["Id"])
        return api.exec_inspect(ex["Id"]).get("ExitCode") == 0

    # -- ShapesLinks: the clients' links, shaped in the clients' own namespaces ------------------
    def _shaping_rules(self, pairs: Sequence[tuple[str, str]], shape: Shape,
                       comment: str) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
        """(client, server) links only, all in the client's namespace and matched by the
        server's address and ports (so the store, which may share an engine, is never shaped):
        delay through the NFQUEUE delayer, loss as a random DROP of what the client sends; the
        bandwidth class covers those servers' ports (`_rate_to`)."""
        if self.network is None or not all(self._is_client(a) and b in self._nodes for a, b in pairs):
            raise NemesisError("the swarm provider shapes only the clients' links to the servers (-o between=clients), "
                               "in the clients' namespaces" + (f"; {self.fallback_reason}" if self.network is None else ""))
        rules: dict[str, list[str]] = {}
        by_src: dict[str, list[str]] = {}
        for src, dst in pairs:
            ns, d = self.network.host(src).netns, self._nodes[dst]
            match = f"-d {d.host}/32 -p tcp -m multiport --dports {self._server_ports(dst)} -m comment --comment {comment}"
            by_src.setdefault(ns, []).append(dst)
            if shape.delay_ms or shape.jitter_ms:
                rules.setdefault(ns, []).append(f"-I OUTPUT 1 {match} -j NFQUEUE --queue-num {QUEUE} --queue-bypass")
            if shape.loss:
                rules.setdefault(ns, []).append(f"-I OUTPUT 1 {match} -m statistic --mode random "
                                                f"--probability {shape.loss:.6f} -j DROP")
        return rules, by_src

    def _rate_to(self, ns: str, servers: list[str], kbit: int) -> None:
        cmds = [["tc", "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb", "default", "10", "r2q", "1000"],
                ["tc", "class", "add", "dev", "eth0", "parent", "1:", "classid", "1:10", "htb", "rate", "10gbit"],
                ["tc", "class", "add", "dev", "eth0", "parent", "1:", "classid", "1:20", "htb", "rate", f"{kbit}kbit"]]
        for name in sorted(set(servers)):
            n = self._nodes[name]
            for port in (n.port, n.peer_port, n.election_port):
                if port:
                    cmds.append(["tc", "filter", "add", "dev", "eth0", "parent", "1:", "protocol", "ip", "prio", "1", "u32",
                                 "match", "ip", "dst", f"{n.host}/32", "match", "ip", "dport", str(port), "0xffff",
                                 "flowid", "1:20"])
        for argv in cmds:
            r = _ns_run(ns, argv)
            if r.returncode != 0:
                raise NemesisError(f"`{' '.join(argv)}` in {ns} failed: {r.stderr.strip()[:200]}")

    def _start_helper_for(self, engine: SwarmNode) -> str:
        self._helpers[engine.name] = self._start_helper(engine)
        return self._helpers[engine.name]

