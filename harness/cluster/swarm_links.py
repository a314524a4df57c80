"""The swarm provider's network faults (NetworkControl, CutsOneWay, ShapesLinks) as a mixin of
SwarmCluster (harness/cluster/swarm.py).

Between servers: iptables rules in each engine's host namespace, matched by address AND the
servers' ports, so the swarm's own traffic between the engines is never cut; run by the run's
helper container on that engine through the engine's API. Of a client: rules in the client's own
namespace on this machine, by the server's address and ports, as are its slow links; with
`-o clients_on`, in its pod's namespace on its engine (harness/cluster/swarm_clients.py)."""

from __future__ import annotations

import json
import subprocess
import time
from typing import Any, Iterable, Mapping, Sequence

from harness.core.contracts.cluster import Shape
from harness.cluster.shaping import _PROBE, QUEUE, LinkShaping
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
        else:  # an engine's host namespace (its helper), or a client's pod on the swarm (-o clients_on)
            ok, err = self._exec_in(where, ["sh", "-c", 'printf %s "$1" | iptables-restore -w --noflush', "sh", script])
        if not ok:
            raise NemesisError(f"iptables-restore on {kind} {name} failed: {err.strip()[-300:]}")

    def reaches(self, src: str, dst: str) -> bool:
        """Whether host src (a server or client c1..cN) opens a TCP connection to dst's client
        port now (1 s)."""
        target = self.node(dst)
        probe = f"exec 3<>/dev/tcp/{target.host}/{target.port}"
        if self._is_client(src) and self.clients_elsewhere():
            return self._exec_in(("pod", src), ["timeout", "1", "bash", "-c", probe])[0]
        if self._is_client(src):
            if self.network is None:
                return True
            r = subprocess.run(["ip", "netns", "exec", self.network.host(src).netns, "timeout", "1", "bash", "-c", probe],
                               capture_output=True, **quiet_group())
            return r.returncode == 0
        return self._exec_in(("engine", self.placed[self.node(src).name].name), ["timeout", "1", "bash", "-c", probe])[0]

    # -- ShapesLinks: LinkShaping's walk, over places of the swarm ------------------------------
    # A client on this machine is shaped in its namespace here (a place named by the namespace,
    # LinkShaping's own); a server's links in its engine's host namespace (by its helper), a
    # client on the swarm's in its pod: places ("engine", NAME) and ("pod", cI), each with a
    # delayer of its own, whose rules carry the run's comment so `chaos cluster down` sweeps them.
    def _shaping_place(self, src: str) -> tuple[str, str]:
        if self._is_client(src):
            return self._client_where(src)
        if src not in self._nodes or self._nodes[src].role != "lock":
            raise NemesisError(f"slow-link shapes links from a client or a lock server, not {src!r}")
        engine = self.placed[src].name
        shared = [n.name for n in self.lock_nodes() if n.name != src and self.placed[n.name].name == engine]
        if shared:
            raise NemesisError(f"{src} and {shared[0]} both run on engine {engine}, so a rule there would shape both; "
                               f"give the swarm one engine per lock server")
        return ("engine", engine)

    def _shaped_here(self, src: str) -> bool:
        """src's links are shaped in its namespace on this machine."""
        return self._is_client(src) and not self.clients_elsewhere()

    def _shaping_rules(self, pairs: Sequence[tuple[str, str]], shape: Shape,
                       comment: str) -> tuple[dict[Any, list[str]], dict[Any, list[str]]]:
        """Every link matched by the server's address and ports (so the store, which may share
        an engine, is never shaped), in the source's place: delay through the NFQUEUE delayer,
        loss as a random DROP of what the source sends. Clients here: their namespaces, the
        bandwidth class covering those servers' ports (`_rate_to`)."""
        here = [self._shaped_here(a) for a, _ in pairs]
        if any(here) and not all(here):
            raise NemesisError("slow-link on the swarm shapes either the clients' links or the servers', not both at once")
        if all(here) and (self.network is None or not all(b in self._nodes for _, b in pairs)):
            raise NemesisError("the swarm provider shapes only the clients' links to the servers (-o between=clients), "
                               "in the clients' namespaces" + (f"; {self.fallback_reason}" if self.network is None else ""))
        if not all(here):
            if shape.rate_kbit:
                raise NemesisError("slow-link -o rate_kbit on the swarm shapes only the links of clients on this machine")
            comment = self.comment  # the run's: `chaos cluster down` sweeps the engines' rules by it
        rules: dict[Any, list[str]] = {}
        by_src: dict[Any, list[str]] = {}
        for src, dst in pairs:
            where = self.network.host(src).netns if self._shaped_here(src) else self._shaping_place(src)
            d = self._nodes[dst]
            by_src.setdefault(where, []).append(dst)
            matches = [f"-d {d.host}/32 -p tcp -m multiport --dports {self._server_ports(dst)}"]
            if not self._is_client(src):  # what src answers dst's own connections goes that way too
                matches.append(f"-d {d.host}/32 -p tcp -m multiport --sports {self._server_ports(src)}")
            for m in matches:  # each -I 1: the DROP ends up above the queue (a queued packet accepted skips it)
                if shape.delay_ms or shape.jitter_ms:
                    rules.setdefault(where, []).append(f"-I OUTPUT 1 {m} -m comment --comment {comment} "
                                                       f"-j NFQUEUE --queue-num {QUEUE} --queue-bypass")
                if shape.loss:
                    rules.setdefault(where, []).append(f"-I OUTPUT 1 {m} -m statistic --mode random --probability "
                                                       f"{shape.loss:.6f} -m comment --comment {comment} -j DROP")
        return rules, by_src

    def _shape_restore(self, place: Any, lines: list[str]) -> str | None:
        if not isinstance(place, tuple):
            return super()._shape_restore(place, lines)
        try:
            self._restore(place, "*filter\n" + "\n".join(lines) + "\nCOMMIT\n")
        except NemesisError as e:
            return str(e)
        return None

    def _shape_gone(self, place: Any) -> bool:
        return not isinstance(place, tuple) and super()._shape_gone(place)

    def _shaping_mechanism(self, rules: dict) -> str:
        return super()._shaping_mechanism(rules) + (", in containers" if any(isinstance(p, tuple) for p in rules) else "")

    def _start_delayers(self, places: list, shape: Shape, seed: int, started: list) -> None:
        here = [p for p in places if not isinstance(p, tuple)]
        if here:
            super()._start_delayers(here, shape, seed, started)
        for where in places:
            if isinstance(where, tuple):
                started.append(where)  # stopped by name even if it never came up
                self._start_delayer_in(where, shape, seed)

    def _stop_delayer(self, handle: Any) -> str | None:
        if not isinstance(handle, tuple):
            return super()._stop_delayer(handle)
        try:
            self._exec_in(handle, ["pkill", "-TERM", "-f", "harness.cluster.delayer"])
        except Exception as e:  # the container is gone: so is its delayer
            return f"{handle[0]} {handle[1]}: {' '.join(str(e).split())[:200]}"
        return None

    def _probe_from(self, src: str, target, n: int, *, timeout: float) -> list:
        if self._shaped_here(src):
            return super()._probe_from(src, target, n, timeout=timeout)
        return self._probe_in(self._shaping_place(src), ["python3", "-c", _PROBE, target.host, str(target.port),
                                                         str(n), str(timeout)])

    def _exec_in(self, where: tuple[str, str], argv: list[str], *, detach: bool = False) -> tuple[bool, str]:
        """Run argv in a client's pod or an engine's helper (its host namespace)."""
        kind, name = where
        if kind == "pod":
            engine, cid = self._pods[name]
        else:
            engine = next(e for e in self.engines if e.name == name)
            cid = self._helpers.get(name) or self._start_helper_for(engine)
        api = self.api(engine)
        ex = api.exec_create(cid, argv)
        if detach:
            api.exec_start(ex["Id"], detach=True)
            return True, ""
        out = api.exec_start(ex["Id"]).decode(errors="replace")
        return api.exec_inspect(ex["Id"]).get("ExitCode") == 0, out

    def _start_delayer_in(self, where: tuple[str, str], shape: Shape, seed: int) -> None:
        """The packet delayer in that container's namespace (the harness in its image), up once
        its queue is bound there."""
        self._exec_in(where, ["python3", "-m", "harness.cluster.delayer", "--queue", str(QUEUE), "--delay-ms",
                              str(shape.delay_ms), "--jitter-ms", str(shape.jitter_ms), "--seed", str(seed), "--here"],
                      detach=True)
        for _ in range(150):
            ok, out = self._exec_in(where, ["cat", "/proc/net/netfilter/nfnetlink_queue"])
            if ok and any(l.split()[:1] == [str(QUEUE)] for l in out.splitlines()):
                return
            time.sleep(0.1)
        raise NemesisError(f"the packet delayer did not start in {where[0]} {where[1]} within 15 s; the harness image "
                           f"there may predate it (`make swarm` rebuilds and loads it)")

    def _probe_in(self, where: tuple[str, str], argv: list[str]) -> list:
        ok, out = self._exec_in(where, argv)
        try:
            return json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise NemesisError(f"could not measure the link from {where[0]} {where[1]}: {out.strip()[-200:]}") from None

    def _rate_to(self, ns: str, servers: list[str], kbit: int) -> None:
        """The bandwidth class covers those servers' addresses and ports (the store's are not)."""
        nodes = [self._nodes[name] for name in sorted(set(servers))]
        self._rate(ns, [["match", "ip", "dst", f"{n.host}/32", "match", "ip", "dport", str(port), "0xffff"]
                        for n in nodes for port in (n.port, n.peer_port, n.election_port) if port], kbit)

    def _start_helper_for(self, engine: SwarmNode) -> str:
        self._helpers[engine.name] = self._start_helper(engine)
        return self._helpers[engine.name]

