"""`slow-link`: latency, jitter, loss and bandwidth on the links to the lock servers.

The network is not only fine or cut: replies arrive late, packets are lost, a link is thin.
A client that hands out a lock whose validity ran out in transit, or computes validity from
the wrong start, breaks only here. Between the client namespaces and the lock servers (the
default, `-o between=clients`) or between the lock servers (`-o between=servers`), during each
fault of the schedule: `-o delay_ms=150 -o jitter_ms=50 -o loss=0.05 -o rate_kbit=512`.
Only the direction towards the target is shaped (a round trip grows by the delay once).

How it is made on this kernel (no netem) is harness/cluster/shaping.py: a netfilter queue
that holds packets, iptables `statistic` for loss, an htb class for bandwidth. The fault is
recorded ok only when the measured connect round trip grew by at least half the delay asked.
"""

from __future__ import annotations

import random
from typing import Any

from harness.core.contracts.cluster import Shape, ShapesLinks, client_hosts
from harness.core.contracts.nemesis import Fault, NemesisContext, complete
from harness.core.errors import BadArgument
from harness.core.faults import FaultKind
from harness.core.history import Op
from harness.core.options import Option, values


class SlowLink:
    name = "slow-link"
    fs = frozenset({"slow-link", "fast-link"})
    # A late request or reply is a fault on both ends of its link: a holder whose renew or
    # write crawled may overrun its lease, and a release slowed in flight lands late.
    FAULTS = (FaultKind(f="slow-link", heal="fast-link", targets="client",
                        explains=("overran-cut-off", "in-flight-release")),)
    OPTIONS = (Option(name="delay_ms", type=float, default=100.0, min=0, max=10_000,
                      help="how long each packet towards the target is held"),
               Option(name="jitter_ms", type=float, default=0.0, min=0, max=10_000,
                      help="the delay varies by up to this much either way"),
               Option(name="loss", type=float, default=0.0, min=0, max=1,
                      help="the share of packets towards the target that are lost"),
               Option(name="rate_kbit", type=int, default=0, min=0, max=10_000_000,
                      help="bandwidth towards the targets, kbit/s (0: unlimited)"),
               Option(name="between", type=str, default="clients", choices=("clients", "servers"),
                      help="shape client->server links, or server->server links"))

    @classmethod
    def refusal(cls, spec: Any) -> str | None:
        from harness.core import plugins

        from nemesis.partition import netns_refusal

        v = values(spec.options, cls.OPTIONS)
        if why := netns_refusal(cls.name, spec):
            return why
        if not (v["delay_ms"] or v["jitter_ms"] or v["loss"] or v["rate_kbit"]):
            return "slow-link with delay_ms=0, jitter_ms=0, loss=0 and rate_kbit=0 changes nothing; ask for one, e.g. -o delay_ms=150"
        kind, n = plugins.servers_of(spec.backend, spec.options)
        if v["between"] == "servers" and n < 2:
            return f"slow-link -o between=servers needs at least two lock servers ({spec.backend} runs {n}); use between=clients"
        return None

    @staticmethod
    def span_s(spec: Any) -> float:
        return 0.0  # the schedule times its faults

    def setup(self, ctx: NemesisContext) -> None:
        if not isinstance(ctx.cluster, ShapesLinks):
            raise BadArgument("slow-link needs a cluster whose servers and clients have network namespaces "
                              "(--cluster local as root, or compose); this one has none")
        if why := self.refusal(ctx.spec):  # TestSpec.validate refused it already; a spec built by hand too
            raise BadArgument(why)
        v = values(ctx.spec.options, self.OPTIONS)
        self.shape = Shape(delay_ms=v["delay_ms"], jitter_ms=v["jitter_ms"], loss=v["loss"], rate_kbit=v["rate_kbit"])
        self.cluster = ctx.cluster
        self.between = v["between"]
        names = ctx.lock_node_names()
        if self.between == "servers":
            self.pairs = [(a, b) for a in names for b in names if a != b]
        else:
            self.pairs = [(f"c{i}", n) for i in range(1, client_hosts(ctx.spec.concurrency) + 1) for n in names]
        self.seed = ctx.spec.seed or 0
        self.active = False

    def next_fault(self, rng: random.Random) -> Fault:
        return Fault(start=("slow-link", {"between": self.between, "shape": self.shape.words()}),
                     stop=("fast-link", None))

    def heal_ops(self) -> list[tuple[str, Any]]:
        return [("fast-link", None)]

    def invoke(self, op: Op) -> Op:
        if op.f == "fast-link":
            self.cluster.unshape_links()
            self.active = False
            return complete(op, "ok")
        self.active = True
        got = self.cluster.shape_links(self.pairs, self.shape, seed=self.seed)
        value = dict(op.value or {}, **got)
        asked, before, after = self.shape.delay_ms, got["rtt_before_ms"], got["rtt_after_ms"]
        if asked and (before is None or after is None or after - before < asked / 2):
            return complete(op, "info", value=value,
                            error=f"asked for +{asked:g} ms, measured {before} -> {after} ms round trip")
        return complete(op, "ok", value=value)

    def teardown(self) -> None:
        if getattr(self, "cluster", None) is not None:
            self.cluster.unshape_links()
            self.active = False
