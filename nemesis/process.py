"""Process faults: SIGSTOP/SIGCONT and SIGKILL/restart, for servers and lock holders.

`pause`: stop one node, a minority, a majority, or the leader (etcd, ZooKeeper) for an
interval, then continue it. `pause-holder`: the articles' GC pause, triggered by the
history rather than the clock: right after a lock holder has read the counter (in the
middle of its critical section, past its lease check), stop that worker for
`pause_multiple` x TTL (spec option, default 2), then continue it; it wakes believing it
still holds the lock, and writes. `kill`: SIGKILL nodes and restart them with their
data dir (valkey runs without persistence unless `--option appendonly=yes`, so a killed
Redis node comes back empty: the unsafe case for Redlock).
"""

from __future__ import annotations

import random
from typing import Any

from harness.core.contracts.cluster import HasLeader, ProcessControl
from harness.cluster.kinds import server_kind
from harness.core.errors import BadArgument
from harness.core.faults import FaultKind
from harness.core.options import Option, values
from harness.core.history import NEMESIS, Holders, Op
from harness.core.contracts.nemesis import Fault, NemesisContext, Planned, complete



def choose_targets(rng: random.Random, names: list[str], leader_of=None) -> tuple[str, list[str]]:
    """A Jepsen-style target: one, minority, majority or the leader (where there is one)."""
    shapes = ["one", "minority", "majority"] + (["leader"] if leader_of else [])
    shape = rng.choice(shapes)
    n = len(names)
    if shape == "one":
        return shape, [rng.choice(names)]
    if shape == "minority":
        return shape, sorted(rng.sample(names, max(1, (n - 1) // 2)))
    if shape == "majority":
        return shape, sorted(rng.sample(names, n // 2 + 1))
    return shape, ["@leader"]  # resolved when the op runs: the leader is a runtime fact


class _ServerProcessNemesis:
    start_f = stop_f = ""
    OPTIONS: tuple[Option, ...] = ()  # targets come from the seeded schedule, not from options

    def setup(self, ctx: NemesisContext) -> None:
        if not isinstance(ctx.cluster, ProcessControl):
            raise BadArgument(f"{self.name} needs a cluster provider that controls processes (the local one does)")
        self.ctx = ctx
        self.cluster = ctx.cluster
        self.names = ctx.lock_node_names()
        kind = server_kind(next(n.kind for n in ctx.cluster.nodes if n.role == "lock"))
        self.leader_of = kind.leader if isinstance(kind, HasLeader) else None
        self.affected: set[str] = set()

    def next_fault(self, rng: random.Random) -> Fault:
        shape, targets = choose_targets(rng, self.names, self.leader_of)
        return Fault(start=(self.start_f, targets), stop=(self.stop_f, None))

    def heal_ops(self) -> list[tuple[str, Any]]:
        return [(self.stop_f, None)]

    def _resolve(self, targets) -> list[str]:
        if targets == ["@leader"]:
            if self.leader_of is None:  # a kind without a leader (valkey): nothing to target
                return []
            lead = self.leader_of([n for n in self.cluster.nodes if n.role == "lock"])
            return [lead] if lead else []
        return list(targets)


class Pause(_ServerProcessNemesis):
    name = "pause"
    fs = frozenset({"pause", "resume"})
    FAULTS = (FaultKind(f="pause", heal="resume"),)  # a paused server grants nothing: it explains no violation
    start_f, stop_f = "pause", "resume"

    def invoke(self, op: Op) -> Op:
        if op.f == "pause":
            targets = self._resolve(op.value)
            if not targets:
                return complete(op, "fail", error="no leader to pause")
            for n in targets:
                self.cluster.pause(n)
                self.affected.add(n)
            return complete(op, "ok", value=targets)
        resumed = sorted(self.affected)
        for n in resumed:
            self.cluster.resume(n)
        self.affected.clear()
        return complete(op, "ok", value=resumed)

    def teardown(self) -> None:
        for n in list(getattr(self, "affected", ())):
            self.cluster.resume(n)
        self.affected = set()


class Kill(_ServerProcessNemesis):
    name = "kill"
    fs = frozenset({"kill", "restart"})
    FAULTS = (FaultKind(f="kill", heal="restart", explains=("early-restart",)),)  # a server without its data
    start_f, stop_f = "kill", "restart"

    def invoke(self, op: Op) -> Op:
        if op.f == "kill":
            targets = self._resolve(op.value)
            if not targets:
                return complete(op, "fail", error="no leader to kill")
            for n in targets:
                self.cluster.kill(n)
                self.affected.add(n)
            return complete(op, "ok", value=targets)
        restarted, failed = [], []
        for n in sorted(self.affected):
            try:
                self.cluster.restart(n)
                restarted.append(n)
            except Exception as e:  # keep restarting the others; report what failed
                failed.append(f"{n}: {e}")
        self.affected.clear()
        if failed:
            return complete(op, "info", value=restarted, error="; ".join(failed)[:300])
        return complete(op, "ok", value=restarted)

    def teardown(self) -> None:
        for n in list(getattr(self, "affected", ())):
            try:
                self.cluster.restart(n)
            except Exception:
                pass
        self.affected = set()


class RenewCount:
    """How many times each process has renewed its current hold (ok renews since its last ok
    acquire; a failed renew is not counted): what `-o after_renews=k` aims by."""

    def __init__(self) -> None:
        self.renews: dict[Any, int] = {}

    def see(self, event: Op) -> None:
        if event.type == "ok" and event.f == "acquire":
            self.renews[event.process] = 0
        elif event.type == "ok" and event.f == "renew":
            self.renews[event.process] = self.renews.get(event.process, 0) + 1

    def __getitem__(self, process: Any) -> int:
        return self.renews.get(process, 0)


def after_renews_option(verb: str) -> Option:
    return Option(name="after_renews", type=int, default=None, min=1, max=1000,
                  help=f"with --renew: {verb} a holder once it has renewed k times in one hold (default: after "
                       f"its first ok renew; without --renew, after its ok read)")


def renews_refusal(name: str, spec: Any, after_renews: int | None) -> str | None:
    """after_renews without --renew: there is no renew to count (JudgesSpec.refusal)."""
    if after_renews is not None and not getattr(spec, "renew", False):
        return f"{name} -o after_renews={after_renews} needs holders that renew: add --renew"
    return None


def renew_trigger(name: str, spec: Any, after_renews: int | None) -> tuple[str, int]:
    """The op whose ok aims the fault at a holder ("read", or "renew" with --renew) and the
    renews of one hold it waits for; after_renews without --renew is refused."""
    if why := renews_refusal(name, spec, after_renews):
        raise BadArgument(why)
    return "renew" if getattr(spec, "renew", False) else "read", after_renews or 1


class PauseHolder:
    """Stops the lock holder in its critical section, for pause_multiple x TTL."""

    name = "pause-holder"
    fs = frozenset({"pause-holder", "resume-holder"})
    FAULTS = (FaultKind(f="pause-holder", heal="resume-holder", targets="worker", explains=("overran-paused",)),)
    OPTIONS = (Option(name="pause_multiple", type=float, default=2.0, above=0, max=1000,
                      help="how long the holder stays stopped, in TTLs"),
               after_renews_option("pause"))

    @classmethod
    def refusal(cls, spec: Any) -> str | None:
        return renews_refusal(cls.name, spec, values(spec.options, cls.OPTIONS)["after_renews"])

    @classmethod
    def span_s(cls, spec: Any) -> float:
        """A pause lasts pause_multiple x TTL."""
        return values(spec.options, cls.OPTIONS)["pause_multiple"] * spec.ttl_ms / 1000

    def setup(self, ctx: NemesisContext) -> None:
        self.ctx = ctx
        spec = ctx.spec
        v = values(spec.options, self.OPTIONS)
        self.pause_s = v["pause_multiple"] * spec.ttl_ms / 1000
        self.trigger, self.after_renews = renew_trigger(self.name, spec, v["after_renews"])
        self.renews = RenewCount()
        self.cooldown = spec.nemesis_interval
        self.fault_phase = spec.time_limit - spec.recovery
        self.next_allowed = spec.nemesis_interval * 0.5
        self.paused: dict[int, Any] = {}
        self.holders = Holders()

    gate = None  # a replay's: harness/engine/generator.py Gated

    def _may_start(self, t: float) -> bool:
        if self.gate is not None:
            return self.gate("pause-holder", t)
        return self.next_allowed <= t and t + self.pause_s < self.fault_phase

    def next_fault(self, rng: random.Random) -> None:
        return None  # purely reactive: faults come from on_event

    def heal_ops(self) -> list[tuple[str, Any]]:
        return [("resume-holder", None)]

    def on_event(self, ctx, event: Op) -> list[Planned]:
        """A holder's ok read during the fault phase, with no pause active: pause its worker.
        The resume is planned when the pause is known to have landed in the critical section."""
        if event.process == NEMESIS and event.f == "pause-holder":
            if event.type == "ok":
                return [Planned(at=round(ctx.time + self.pause_s, 3), f="resume-holder", value=event.value,
                                phase="heal")]
            self.next_allowed = ctx.time  # missed the critical section: aim at the next holder
            return []
        if not isinstance(event.process, int):
            return []
        self.holders.see(event)
        self.renews.see(event)
        if not (event.f == self.trigger and event.type == "ok" and event.process in self.holders.now):
            return []
        renewed = self.renews[event.process]
        if self.paused or not self._may_start(ctx.time) or (self.trigger == "renew" and renewed < self.after_renews):
            return []
        worker = event.process % self.ctx.spec.concurrency
        self.next_allowed = ctx.time + self.pause_s + self.cooldown
        self.paused[worker] = event.process
        v = {"process": event.process, "worker": worker, "seconds": round(self.pause_s, 3),
             **({"renews": renewed} if self.trigger == "renew" else {})}
        return [Planned(at=ctx.time, f="pause-holder", value=v, phase="fault")]

    def invoke(self, op: Op) -> Op:
        workers = self.ctx.workers
        if op.f == "pause-holder":
            w = op.value["worker"]
            if workers.pause(w) and workers.holding_lock(w):
                return complete(op, "ok")
            # The worker left its critical section (a short hold) before the stop landed:
            # this pause would test nothing. Let it go at once; the next holder is aimed at.
            workers.resume(w)
            self.paused.pop(w, None)
            return complete(op, "fail", error=f"missed: worker {w} had released before the stop landed")
        resumed = sorted(workers.paused)
        for w in resumed:
            workers.resume(w)
        self.paused.clear()
        return complete(op, "ok", value=op.value or {"workers": resumed})

    def teardown(self) -> None:
        workers = getattr(self.ctx, "workers", None) if hasattr(self, "ctx") else None
        if workers is not None:
            for w in sorted(workers.paused):
                workers.resume(w)
        self.paused = {}
