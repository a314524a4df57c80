"""`cut-in-flight`: cut a holder's client namespace from every lock server at the moment it
invokes `release` (`-o during=renew`: a renew, with --renew), before the request is sent: the
worker is armed to stop right after recording the invoke (harness/engine/pool.py `arm`), the
cut is made and probed while it waits, then it goes on into the cut. Healed after `-o cut_ms`.
The op's outcome is whatever the client reports (a timeout: `info`); TCP may still deliver
the request after the heal, so the history shows what the servers did. A cut holder may
overrun its lease (its renew is cut) and its release may land late: it explains both.

`-o lose=request|reply` loses one side only (`CutsOneWay`, inside the client's namespace):
request, its packets to the servers are answered with a TCP reset, so the servers never act on
it and nothing is retransmitted after the heal; reply, the servers act and what they send back
is dropped. Either is verified by reading the lock key back from the servers before the
request leaves and for WATCH_S after (nemesis/readback.py): the op records `server_state` and
`server` ("not released (key present)", "renewed (expiry extended)", ...), and is `info` when
the servers did the opposite of what the mode promises.
"""

from __future__ import annotations

import time
from typing import Any

from harness.cluster import grudge as G
from harness.core.contracts.cluster import CutsOneWay, client_host
from harness.core.contracts.nemesis import NemesisContext, ParksClients, Planned, complete
from harness.core.errors import BadArgument
from harness.core.faults import FaultKind
from harness.core.history import NEMESIS, Op
from harness.core.options import Option, values
from nemesis import readback
from nemesis.client import _Aimed, _workers
from nemesis.partition import _Net, netns_refusal


LOSE = ("both", "request", "reply")
WATCH_S = 0.3  # how long the servers are watched after a one-way cut's request left
WATCH_STEP_S = 0.01


class CutInFlight(_Aimed, _Net):
    """Cuts a holder's links to every lock server as its release (or renew) is invoked,
    before the request leaves; heals after cut_ms."""

    name = "cut-in-flight"
    fs = frozenset({"cut-in-flight", "heal-in-flight"})
    FAULTS = (FaultKind(f="cut-in-flight", heal="heal-in-flight", targets="client",
                        explains=("overran-cut-off", "in-flight-release")),)
    OPTIONS = (Option(name="during", type=str, default="release", choices=("release", "renew"),
                      help="the op whose request is cut: a holder's release, or (with --renew) its renew"),
               Option(name="cut_ms", type=float, default=2000.0, min=1, max=600_000,
                      help="how long the holder's links stay cut"),
               Option(name="lose", type=str, default="both", choices=LOSE,
                      help="what the cut loses: both directions (TCP may deliver the request after the heal); "
                           "request: its packets are answered with a TCP reset, so the servers never act on it; "
                           "reply: the servers act and their answer is dropped (read back from the servers)"))

    @classmethod
    def refusal(cls, spec: Any) -> str | None:
        if why := netns_refusal(cls.name, spec):
            return why
        v = values(spec.options, cls.OPTIONS)
        if v["lose"] != "both" and getattr(spec, "cluster", "local") == "ssh":
            return (f"{cls.name} -o lose={v['lose']} cuts one direction of a link, which the ssh provider cannot: "
                    f"use -o lose=both, or --cluster local")
        if v["during"] == "renew" and not getattr(spec, "renew", False):
            return f"{cls.name} -o during=renew needs holders that renew: add --renew"
        return None

    @classmethod
    def span_s(cls, spec: Any) -> float:
        """A cut lasts cut_ms."""
        return values(spec.options, cls.OPTIONS)["cut_ms"] / 1000

    def setup(self, ctx: NemesisContext) -> None:
        if why := self.refusal(ctx.spec):  # TestSpec.validate refused it already; a spec built by hand too
            raise BadArgument(why)
        self._setup_net(ctx)
        self.workers = _workers(ctx, ParksClients, self.name)
        spec = ctx.spec
        v = values(spec.options, self.OPTIONS)
        self.during = v["during"]
        self.lose = v["lose"]
        if self.lose != "both" and not isinstance(ctx.cluster, CutsOneWay):
            raise BadArgument(f"{self.name} -o lose={self.lose} needs a provider that can cut one direction of a "
                              f"link (local, compose), and this one cannot: use -o lose=both")
        self._setup(ctx, self.span_s(spec))
        self.names = ctx.lock_node_names()
        self.armed: int | None = None  # the worker armed to stop before its next `during`
        self.cut: int | None = None  # the worker whose links are cut now
        self.lease_value: Any = None  # the value the cut op carries (its lease's), to read the key back

    def heal_ops(self) -> list[tuple[str, Any]]:
        return [("heal-in-flight", None)]

    def on_event(self, ctx, event: Op) -> list[Planned]:
        """A holder's ok acquire: arm its worker (seeded choice among holders seen while
        none is armed). Its `during` invoke: cut now. The heal is planned once the cut is
        known to have landed."""
        if event.process == NEMESIS and event.f == "cut-in-flight":
            if event.type == "fail":
                self.cut = None
                self.next_allowed = ctx.time
                return []
            return [Planned(at=round(ctx.time + self.span_s, 3), f="heal-in-flight", value=event.value, phase="heal")]
        if not self._see(event):
            return []
        worker = event.process % self.n
        if self.armed is None and self.cut is None and event.f == "acquire" and event.type == "ok" \
                and self._may_start(ctx.time) and self.rng.random() < 0.5:
            self.armed = worker
            self.workers.arm(worker, self.during)
            return []
        if self.armed == worker and event.f == self.during and event.type == "invoke" and self._waits_at(worker):
            self.armed = None
            if not self._may_start(ctx.time):  # too late in the fault phase for a cut and its heal
                self.workers.let_go(worker)
                return []
            self.cut = worker
            self.lease_value = event.value
            self.next_allowed = ctx.time + self.span_s + self.cooldown
            v = {"worker": worker, "client": client_host(worker, self.n), "process": event.process,
                 "during": self.during, "key": event.key, **({"lose": self.lose} if self.lose != "both" else {})}
            return [Planned(at=ctx.time, f="cut-in-flight", value=v, phase="fault")]
        return []

    def invoke(self, op: Op) -> Op:
        w = self.workers
        if op.f == "heal-in-flight":
            if self.active:
                self.cluster.heal()
                self.active = False
            healed, self.cut = self.cut, None
            return complete(op, "ok", value=op.value or {"workers": [] if healed is None else [healed]})
        i = op.value["worker"]
        if not w.parked(i):
            self.cut = None
            return complete(op, "fail", error=f"missed: worker {i} had sent its {self.during} already "
                                              f"(it waits at most a while to be cut)")
        grudge = G.cut_client(op.value["client"], self.names, self.names)
        servers = [self.nodes[n] for n in self.names]
        unreadable = readback.readable(servers) if self.lose != "both" else None
        before = readback.read(servers, op.value["key"]) if self.lose != "both" and unreadable is None else None
        if self.lose == "both":
            self.cluster.partition(grudge)
        else:
            self.cluster.cut_one_way(op.value["client"], self.names, self.lose)
        self.active = True
        err = self._probe_cut(grudge)  # a connect from the holder's namespace must now fail
        if not w.parked(i):  # it waited PARK_MAX_S and went on: its request may have left before the cut
            err = err or f"worker {i} went on before the cut was proven"
        w.let_go(i)  # its request goes out into the cut
        value = {**op.value, "servers": sorted(self.names)}
        if self.lose != "both":
            value.update(self._watch(servers, op.value["key"], before, unreadable))
            if value["acted"] is not None and value["acted"] != (self.lose == "reply"):
                err = err or (f"the servers {'acted on' if value['acted'] else 'did not act on'} the {self.during} "
                              f"whose {self.lose} was to be lost: {value['server_state']}")
        return complete(op, "info" if err else "ok", value=value, error=err)

    def _watch(self, servers, key: str, before: dict | None, unreadable: str | None) -> dict:
        """What the servers did with the request that just left: the key read back until they
        are seen to act, at most WATCH_S (a lost request is watched that long)."""
        if unreadable is not None or before is None:
            return {"server_state": unreadable or readback.NOT_VERIFIED, "acted": None}
        deadline = before["t"] + WATCH_S
        while True:
            time.sleep(WATCH_STEP_S)
            after = readback.read(servers, key)
            did = readback.acted(self.during, self.lease_value, before, after)
            if did or after["t"] >= deadline:
                break
        return {"server_state": readback.words(after), "server_state_before": readback.words(before),
                "server": readback.outcome(self.during, did), "acted": did}

    def teardown(self) -> None:
        if getattr(self, "armed", None) is not None:
            self.workers.arm(self.armed, None)
        _Net.teardown(self)
