"""Network partitions between real namespaces (iptables DROP inside each namespace).

`partition`: each fault picks a shape (`--option partition_shape=NAME`, default a random
one of: one, halves, random-halves, majorities-ring, bridge) over the lock nodes, cuts
it, and checks one cut pair really cannot connect before it reports ok. `heal` removes
exactly the rules it added. `partition-client`: cut one client worker (by default the
current lock holder) from `cut_servers` of the servers (default a majority), the
articles' "partitioned holder" scenario. With `--option island=true` the servers the
client can still reach are cut from the others too: the client and a server minority
form an island, so the client's side of the partition is a true minority.
"""

from __future__ import annotations

import random
from typing import Any

from harness.cluster import grudge as G
from harness.core.contracts.cluster import NetworkControl, client_host
from harness.core.errors import BadArgument
from harness.core.faults import FaultKind
from harness.core.options import Option, values
from harness.core.history import Op, begins_hold, ends_hold
from harness.core.contracts.nemesis import Fault, NemesisContext, complete


SHAPES = ("one", "halves", "random-halves", "majorities-ring", "bridge")


def shape_grudge(shape: str, nodes: list[str], rng: random.Random) -> G.Grudge:
    if shape == "one":
        return G.isolate(nodes, rng.choice(nodes))
    if shape == "halves":
        return G.halves(nodes)
    if shape == "random-halves":
        return G.random_halves(nodes, rng)
    if shape == "majorities-ring":
        return G.majorities_ring(nodes, rng)
    if shape == "bridge":
        return G.bridge(nodes, rng)
    raise BadArgument(f"unknown partition shape {shape!r}; choose one of: {', '.join(SHAPES)}")


def lock_servers(spec: Any) -> tuple[str, int]:
    """(kind, count) of the run's lock servers, from the spec alone."""
    from harness.core import plugins

    return plugins.servers_of(spec.backend, spec.options)


def _jsonable(grudge) -> dict[str, list[str]]:
    return {k: sorted(v) for k, v in sorted(grudge.items()) if v}


def netns_refusal(name: str, spec: Any) -> str | None:
    """--no-netns: every server and client on loopback, so no link can be cut or shaped."""
    if getattr(spec, "netns", None) is False:
        return f"{name} needs network namespaces, and --no-netns runs everything on loopback; drop --no-netns"
    return None


class _Net:
    def _setup_net(self, ctx: NemesisContext) -> None:
        if not isinstance(ctx.cluster, NetworkControl):
            reason = ctx.cluster.fallback_reason or "this cluster provider cannot cut links"
            raise BadArgument(f"{self.name} needs network namespaces, which are unavailable here ({reason}); run as root")
        self.ctx = ctx
        self.cluster = ctx.cluster
        self.nodes = {n.name: n for n in ctx.cluster.nodes}
        self.active = False

    def _probe_cut(self, grudge) -> str | None:
        """Try one pair that must now be cut; return an error if it still connects."""
        for a, hated in sorted(grudge.items()):
            for b in sorted(hated):
                if b in self.nodes and (a in self.nodes or a.startswith("c")):
                    return f"{a} still reaches {b}" if self.cluster.reaches(a, b) else None
        return None

    def _heal(self, op: Op) -> Op:
        self.cluster.heal()
        self.active = False
        return complete(op, "ok")

    def teardown(self) -> None:
        if getattr(self, "active", False):
            self.cluster.heal()
            self.active = False


class Partition(_Net):
    name = "partition"
    fs = frozenset({"partition", "heal"})
    # sessions expire on the far side; a release cut off may still land after the heal
    FAULTS = (FaultKind(f="partition", heal="heal", targets="everyone", explains=("early-partition", "in-flight-release")),)
    OPTIONS = (Option(name="partition_shape", type=str, default=None, choices=SHAPES,
                      help="one shape for every cut (default: a random shape each time)"),)

    @classmethod
    def refusal(cls, spec: Any) -> str | None:
        kind, n = lock_servers(spec)
        shape = values(spec.options, cls.OPTIONS)["partition_shape"]
        if why := netns_refusal(cls.name, spec):
            return why
        if n < 2:
            return (f"partition cuts the lock servers from each other, and backend {spec.backend} runs one "
                    f"({kind}:1); use partition-client to cut a client from it")
        if shape in ("bridge", "majorities-ring") and n < 3:
            return f"-o partition_shape={shape} needs at least 3 lock servers ({spec.backend} runs {n}); choose halves or one"
        return None

    @staticmethod
    def span_s(spec: Any) -> float:
        return 0.0  # the schedule times its cuts

    def setup(self, ctx: NemesisContext) -> None:
        self._setup_net(ctx)
        self.names = ctx.lock_node_names()
        shape = values(ctx.spec.options, self.OPTIONS)["partition_shape"]
        self.shapes = (shape,) if shape else SHAPES

    def next_fault(self, rng: random.Random) -> Fault:
        shape = rng.choice(self.shapes)
        grudge = shape_grudge(shape, self.names, rng)
        return Fault(start=("partition", {"shape": shape, "grudge": _jsonable(grudge),
                                          "describe": G.describe(grudge, self.names)}),
                     stop=("heal", None))

    def heal_ops(self) -> list[tuple[str, Any]]:
        return [("heal", None)]

    def invoke(self, op: Op) -> Op:
        if op.f == "heal":
            return self._heal(op)
        grudge = {k: set(v) for k, v in op.value["grudge"].items()}
        self.cluster.partition(grudge)
        self.active = True
        err = self._probe_cut(grudge)
        return complete(op, "info" if err else "ok", error=err)


class PartitionClient(_Net):
    name = "partition-client"
    fs = frozenset({"partition-client", "heal-client"})
    FAULTS = (FaultKind(f="partition-client", heal="heal-client", targets="client",
                        explains=("overran-cut-off", "early-partition", "in-flight-release")),)
    OPTIONS = (Option(name="cut_servers", type=int, default=None, min=1, max=64,
                      help="how many lock servers the holder is cut from (default: a majority)"),
               Option(name="island", type=bool, default=False,
                      help="also cut the servers it kept from the rest: a minority island"))

    @classmethod
    def refusal(cls, spec: Any) -> str | None:
        kind, n = lock_servers(spec)
        k = values(spec.options, cls.OPTIONS)["cut_servers"]
        if why := netns_refusal(cls.name, spec):
            return why
        if k is not None and k > n:
            return f"-o cut_servers={k} is more than the {n} lock server(s) of {spec.backend} ({kind}); give 1 to {n}"
        return None

    @staticmethod
    def span_s(spec: Any) -> float:
        return 0.0  # the schedule times its cuts

    def setup(self, ctx: NemesisContext) -> None:
        self._setup_net(ctx)
        self.names = ctx.lock_node_names()
        self.k = values(ctx.spec.options, self.OPTIONS)["cut_servers"] or len(self.names) // 2 + 1
        if not 1 <= self.k <= len(self.names):
            raise BadArgument(f"cut_servers must be between 1 and {len(self.names)}, not {self.k}")
        self.holder: int | None = None
        self.island = values(ctx.spec.options, self.OPTIONS)["island"]

    def on_event(self, ctx, event: Op) -> list:
        if begins_hold(event.f, event.type) and isinstance(event.process, int):
            self.holder = event.process
        elif ends_hold(event.f, event.type) and event.process == self.holder:
            self.holder = None
        return []

    def next_fault(self, rng: random.Random) -> Fault:
        servers = sorted(rng.sample(self.names, self.k))
        return Fault(start=("partition-client", {"client": "@holder", "servers": servers,
                                                 "fallback": rng.randrange(self.ctx.spec.concurrency)}),
                     stop=("heal-client", None))

    def heal_ops(self) -> list[tuple[str, Any]]:
        return [("heal-client", None)]

    def invoke(self, op: Op) -> Op:
        if op.f == "heal-client":
            return self._heal(op)
        n = self.ctx.spec.concurrency
        worker = self.holder % n if self.holder is not None else op.value["fallback"]
        client = client_host(worker, n)  # beyond 64 workers, the others of its namespace are cut too
        grudge = G.cut_client(client, self.names, op.value["servers"], island=self.island)
        self.cluster.partition(grudge)
        self.active = True
        err = self._probe_cut(grudge)
        value = dict(op.value, client=client, worker=worker, holder=self.holder,
                     island=sorted(set(grudge) - set(grudge[client])) if self.island else None)
        return complete(op, "info" if err else "ok", value=value, error=err)
