"""Client faults aimed at a moment of a client's life, triggered by the history.

`pause-waiter`: SIGSTOP a worker while its acquire is in flight and another process holds
the lock, for `pause_multiple` x the lease TTL (or the session timeout, where the service
has sessions), then SIGCONT. Its lease or session runs out while it is queued; a correct
client must not then say it holds the lock. A stopped waiter explains nothing about the
holder: a violation under it is the client's or the server's.

`partition-waiter`: the same moment, but the waiter's client namespace is cut from every
lock server (as partition-client cuts the holder) for the same span, then healed. The cut
is probed (a connect from the namespace must fail) and the waiting flag read after it has
landed; a waiter whose acquire had completed by then is healed at once (fail, "missed"). A
cut waiter explains nothing about the holder either.

`kill-holder`: SIGKILL a holder's whole process group (an external client process too)
in its critical section, right after its ok read (with `--renew`, its ok renew; with
`-o after_renews=k`, its k-th ok renew of one hold); after
`respawn_after` x TTL a new process takes the worker's slot under a new process id. The dead
holder cannot write, so it explains nothing either: what it tests is that the lock outlives
its holder only until the lease ends. With `-o during=acquire` it kills a waiter instead,
between its acquire request and the reply, while another process holds: armed at an ok
acquire, the waiter stops at its next acquire invoke, is let go HEAD_START_S so its request
leaves, then stopped, looked at (acquire still unanswered) and killed; its acquire is closed
with an `info` at its death (the servers may have granted it, or queued it). `-o when=free`
kills the next acquirer of a free lock instead, `-o at_ms=A-B` sets the moment
(nemesis/midacquire.py).

`cut-in-flight` (nemesis/inflight.py) aims the same way, at a holder's release or renew.

pause-waiter and kill-holder stop the worker first and look at it stopped before they act, so what they record is
what happened: a waiter is paused only if its acquire is still in flight (else the op
fails, "missed", and the next waiter is aimed at); a holder is killed only if it still
holds, has no op in flight and every op it recorded has reached the history. The kill
ends its hold in the history with a release it never sent: an `info` release at the moment
of death (error "killed: ..."), so the checkers' rule (a hold ends at the release invoke)
ends it there, and a release in doubt lets the lock go at an unknown later time, which is
what its expiry does.
"""

from __future__ import annotations

import random
import time
from typing import Any

from harness.cluster import grudge as G
from harness.core.contracts.cluster import client_host
from harness.core.contracts.nemesis import KillsClients, NemesisContext, ParksClients, Planned, WatchesClients, complete
from harness.core.errors import BadArgument
from harness.core.faults import FaultKind
from harness.core.history import NEMESIS, Holders, Op, now_ns
from harness.core.options import Option, values
from nemesis import midacquire, readback
from nemesis.midacquire import HEAD_START_S
from nemesis.partition import _Net, netns_refusal
from nemesis.process import PauseHolder, RenewCount, after_renews_option, renew_trigger, renews_refusal

KILLED = "killed: the process was SIGKILLed holding the lock (recorded for it by kill-holder); the lock ends when its lease does"
KILLED_ACQUIRING = ("killed: the process was SIGKILLed with its acquire in flight (recorded for it by kill-holder "
                    "-o during=acquire); whatever the servers granted it ends when its lease does")
QUEUE_WAIT_S = 0.01  # how long the history queue may stay locked under a stopped holder (another worker's write is shorter)
STOP_TRIES = 5  # stops of a holder that was writing into the queue, before the kill is given up


def _workers(ctx: NemesisContext, need: type, name: str):
    if not isinstance(ctx.workers, need):
        raise BadArgument(f"{name} needs the runner's client workers (harness.engine.pool.Workers)")
    return ctx.workers


class _Aimed:
    """What both faults share: a seeded choice, a time window, a cooldown, the history seen."""

    name = ""

    def _setup(self, ctx: NemesisContext, span_s: float) -> None:
        spec = ctx.spec
        self.ctx, self.spec = ctx, spec
        self.span_s = span_s
        self.n = spec.concurrency
        self.cooldown = spec.nemesis_interval
        self.fault_phase = spec.time_limit - spec.recovery
        self.next_allowed = spec.nemesis_interval * 0.5
        self.rng = random.Random(spec.seed * 31 + sum(map(ord, self.name)))
        self.holders = Holders()
        self.seen = [0] * self.n  # ops received from each worker
        self.last: dict[Any, Op] = {}  # each process's last op
        self.acquired: dict[Any, Op] = {}  # each process's last ok acquire

    def _see(self, event: Op) -> bool:
        """Update what is known from a worker's op; False for other ops."""
        if not isinstance(event.process, int):
            return False
        self.seen[event.process % self.n] += 1
        self.holders.see(event)
        self.last[event.process] = event
        if event.f == "acquire" and event.type == "ok":
            self.acquired[event.process] = event
        return True

    def _waits_at(self, worker: int) -> bool:
        """Whether the invoke just seen is the one the armed worker is parked at: it is parked,
        and this invoke is the last op it recorded. An invoke it made before it parked (held in
        its batch while a blocking call ran, and read by a starved runner after the worker had
        gone on to park at a later one) is not the moment: that later invoke is still on its way."""
        return self.workers.parked(worker) and self.workers.ops_recorded(worker) == self.seen[worker]

    gate = None  # a replay's: harness/engine/generator.py Gated

    def _may_start(self, t: float) -> bool:
        if self.gate is not None:
            return self.gate(self.FAULTS[0].f, t)
        return t >= self.next_allowed and t + self.span_s < self.fault_phase

    def next_fault(self, rng: random.Random) -> None:
        return None  # purely reactive: faults come from on_event


class PauseWaiter(_Aimed):
    """Stops a waiter (its acquire in flight) while another process holds the lock."""

    name = "pause-waiter"
    fs = frozenset({"pause-waiter", "resume-waiter"})
    FAULTS = (FaultKind(f="pause-waiter", heal="resume-waiter", targets="worker"),)  # explains nothing
    OPTIONS = PauseHolder.OPTIONS  # pause_multiple, shared with pause-holder

    @classmethod
    def refusal(cls, spec: Any) -> str | None:
        if spec.concurrency < 2:
            return f"{cls.name} needs a waiter and a holder: use --concurrency 2 or more (this run has {spec.concurrency})"
        counts = values(spec.options, cls.OPTIONS)["after_renews"]
        if counts is not None and not {"pause-holder", "kill-holder"} & set(spec.nemesis):
            return f"{cls.name} aims at waiters, which have renewed nothing: drop -o after_renews={counts}"
        return None

    @classmethod
    def span_s(cls, spec: Any) -> float:
        """At least pause_multiple x TTL (a session longer than the TTL makes it longer)."""
        return values(spec.options, cls.OPTIONS)["pause_multiple"] * spec.ttl_ms / 1000

    def setup(self, ctx: NemesisContext) -> None:
        self.workers = _workers(ctx, WatchesClients, self.name)
        spec = ctx.spec
        if why := self.refusal(spec):  # TestSpec.validate refused it already; a spec built by hand too
            raise BadArgument(why)
        facts = spec.facts if isinstance(getattr(spec, "facts", None), dict) else {}
        base_ms = max(spec.ttl_ms, facts.get("session_timeout_ms") or 0)  # a session outlives a short TTL
        self._setup(ctx, values(spec.options, self.OPTIONS)["pause_multiple"] * base_ms / 1000)
        self.paused: set[int] = set()

    def heal_ops(self) -> list[tuple[str, Any]]:
        return [("resume-waiter", None)]

    def _candidates(self, holder: int) -> list[int]:
        return [w for w in range(self.n) if w != holder]

    def _aim(self, worker: int) -> dict:
        return {"worker": worker}

    def on_event(self, ctx, event: Op) -> list[Planned]:
        """A process's ok acquire (someone holds now): aim at another worker, chosen by the
        seeded rng; its acquire is checked when the fault has landed. The end is planned
        when the fault is known to have landed mid-acquire (ok; info: it may have)."""
        kind = self.FAULTS[0]
        if event.process == NEMESIS and event.f == kind.f:
            if event.type in ("ok", "info"):
                return [Planned(at=round(ctx.time + self.span_s, 3), f=kind.heal, value=event.value,
                                phase="heal")]
            self.next_allowed = ctx.time  # missed: aim at the next waiter
            return []
        if not self._see(event) or not (event.f == "acquire" and event.type == "ok"):
            return []
        if self.paused or self.n < 2 or not self._may_start(ctx.time):
            return []
        candidates = self._candidates(event.process % self.n)
        if not candidates:
            return []
        worker = self.rng.choice(candidates)
        self.next_allowed = ctx.time + self.span_s + self.cooldown
        self.paused.add(worker)
        v = {**self._aim(worker), "holder": event.process, "key": event.key, "seconds": round(self.span_s, 3)}
        return [Planned(at=ctx.time, f=kind.f, value=v, phase="fault")]

    def invoke(self, op: Op) -> Op:
        w = self.workers
        if op.f == "pause-waiter":
            i = op.value["worker"]
            stopped = w.pause(i)
            waiting = w.waiting_on_acquire(i)  # read while it is stopped: it cannot change
            holders = [j for j in range(self.n) if j != i and w.holding_lock(j)]
            if stopped and waiting and holders:
                return complete(op, "ok", value={**op.value, "process": w.process_of(i), "stopped": True,
                                                 "holders": holders})
            # Its acquire completed before the stop landed (or nobody held the lock any more):
            # this pause would test nothing. Let it go at once; the next waiter is aimed at.
            w.resume(i)
            self.paused.discard(i)
            why = "the stop did not land" if not stopped else \
                "its acquire had completed" if not waiting else "no other process held the lock"
            return complete(op, "fail", error=f"missed: worker {i}: {why} before the stop landed")
        resumed = sorted(self.paused) if op.value is None else [op.value["worker"]]
        for i in resumed:
            w.resume(i)
            self.paused.discard(i)
        return complete(op, "ok", value=op.value or {"workers": resumed})

    def teardown(self) -> None:
        for i in sorted(getattr(self, "paused", ())):
            self.workers.resume(i)
        self.paused = set()


class PartitionWaiter(PauseWaiter, _Net):
    """Cuts a waiter's client namespace (its acquire in flight) from every lock server while
    another process holds the lock; heals after the same span as pause-waiter. Workers
    beyond 64 share namespaces (client_host): a waiter is only aimed at if the holder is not
    in its namespace, and the others cut with it are named in the op (`sharing`)."""

    name = "partition-waiter"
    fs = frozenset({"partition-waiter", "heal-waiter"})
    # a cut waiter explains nothing about the holder: the holder's links are untouched
    FAULTS = (FaultKind(f="partition-waiter", heal="heal-waiter", targets="client"),)
    OPTIONS = PauseHolder.OPTIONS  # pause_multiple: the cut lasts as long as pause-waiter's stop

    @classmethod
    def refusal(cls, spec: Any) -> str | None:
        return netns_refusal(cls.name, spec) or super().refusal(spec)

    def setup(self, ctx: NemesisContext) -> None:
        self._setup_net(ctx)
        super().setup(ctx)
        self.names = ctx.lock_node_names()

    def _candidates(self, holder: int) -> list[int]:
        mine = client_host(holder, self.n)
        return [w for w in range(self.n) if w != holder and client_host(w, self.n) != mine]

    def _aim(self, worker: int) -> dict:
        client = client_host(worker, self.n)
        sharing = [w for w in range(self.n) if w != worker and client_host(w, self.n) == client]
        return {"worker": worker, "client": client, **({"sharing": sharing} if sharing else {})}

    def heal_ops(self) -> list[tuple[str, Any]]:
        return [("heal-waiter", None)]

    def invoke(self, op: Op) -> Op:
        w = self.workers
        if op.f == "heal-waiter":
            healed = sorted(self.paused)
            if self.active:
                self.cluster.heal()
                self.active = False
            self.paused = set()
            return complete(op, "ok", value=op.value or {"workers": healed})
        i, client = op.value["worker"], op.value["client"]
        grudge = G.cut_client(client, self.names, self.names)
        self.cluster.partition(grudge)
        self.active = True
        err = self._probe_cut(grudge)  # a connect from the waiter's namespace must now fail
        waiting = w.waiting_on_acquire(i)  # read after the cut has landed
        holders = [j for j in range(self.n) if j != i and w.holding_lock(j)]
        if waiting and holders:
            value = {**op.value, "process": w.process_of(i), "servers": sorted(self.names), "holders": holders}
            return complete(op, "info" if err else "ok", value=value, error=err)
        # Its acquire completed before the cut landed (or nobody held any more): this cut
        # would test nothing. Heal at once; the next waiter is aimed at.
        self.cluster.heal()
        self.active = False
        self.paused.discard(i)
        why = "its acquire had completed" if not waiting else "no other process held the lock"
        return complete(op, "fail", error=f"missed: worker {i}: {why} before the cut landed")

    def teardown(self) -> None:
        _Net.teardown(self)
        self.paused = set()


class KillHolder(_Aimed):
    """SIGKILLs the holder in its critical section; a new process takes its place later."""

    name = "kill-holder"
    fs = frozenset({"kill-holder", "respawn-holder"})
    FAULTS = (FaultKind(f="kill-holder", heal="respawn-holder", targets="worker"),)  # a dead holder cannot write
    OPTIONS = (Option(name="respawn_after", type=float, default=1.0, min=0, max=1000,
                      help="how long a killed holder's worker stays down before a new process takes its place, "
                           "in TTLs"),
               after_renews_option("kill"),
               Option(name="during", type=str, default="hold", choices=("hold", "acquire"),
                      help="kill a holder in its critical section, or a waiter between its acquire request and "
                           "the reply (while another process holds; -o when=free: the next acquirer of a free lock)"),
               *midacquire.OPTIONS)

    @classmethod
    def refusal(cls, spec: Any) -> str | None:
        v = values(spec.options, cls.OPTIONS)
        if why := midacquire.refusal(cls.name, spec, v):
            return why
        if v["during"] == "acquire":
            return None
        return renews_refusal(cls.name, spec, v["after_renews"])

    @classmethod
    def span_s(cls, spec: Any) -> float:
        """A killed worker stays down respawn_after x TTL."""
        return values(spec.options, cls.OPTIONS)["respawn_after"] * spec.ttl_ms / 1000

    def setup(self, ctx: NemesisContext) -> None:
        self.workers = _workers(ctx, KillsClients, self.name)
        spec = ctx.spec
        if why := self.refusal(spec):  # TestSpec.validate refused it already; a spec built by hand too
            raise BadArgument(why)
        v = values(spec.options, self.OPTIONS)
        self._setup(ctx, self.span_s(spec))
        self.during, self.when = v["during"], v["when"]
        self.at_ms = midacquire.parse_at_ms(v["at_ms"])
        self.servers = [n for n in getattr(ctx.cluster, "nodes", ()) if n.role == "lock"]
        self.trigger, self.after_renews = renew_trigger(self.name, spec, v["after_renews"])
        if self.during == "acquire":
            self.workers = _workers(ctx, ParksClients, self.name)
        self.renews = RenewCount()
        self.armed: int | None = None  # during=acquire: the worker armed to stop at its next acquire
        self.down: set[int] = set()
        self.stopped: set[int] = set()

    def heal_ops(self) -> list[tuple[str, Any]]:
        return [("respawn-holder", None)]

    def on_event(self, ctx, event: Op) -> list[Planned]:
        """A holder's ok read (with --renew, its ok renew) during the fault phase: kill its
        worker. The respawn is planned once the kill is known to have landed."""
        if event.process == NEMESIS and event.f == "kill-holder":
            if event.type == "fail":
                self.down.discard(event.value["worker"])
                self.next_allowed = ctx.time  # missed: aim at the next holder
                return []
            return [Planned(at=round(ctx.time + self.span_s, 3), f="respawn-holder",
                            value={"worker": event.value["worker"]}, phase="heal")]
        if not self._see(event):
            return []
        if self.during == "acquire":
            return self._aim_at_waiter(ctx, event)
        self.renews.see(event)
        if not (event.f == self.trigger and event.type == "ok" and event.process in self.holders.now):
            return []
        renewed = self.renews[event.process]
        if self.down or not self._may_start(ctx.time) or (self.trigger == "renew" and renewed < self.after_renews):
            return []
        worker = event.process % self.n
        self.next_allowed = ctx.time + self.span_s + self.cooldown
        self.down.add(worker)
        v = {"process": event.process, "worker": worker, **({"renews": renewed} if self.trigger == "renew" else {})}
        return [Planned(at=ctx.time, f="kill-holder", value=v, phase="fault")]

    def _aim_at_waiter(self, ctx, event: Op) -> list[Planned]:
        """during=acquire: an ok acquire (someone holds) arms another worker, chosen by the
        seed (when=free: the holder itself, for its next acquire), to stop at its next
        acquire invoke; that invoke plans the kill (when=free: if no one holds the lock then)."""
        worker = event.process % self.n
        if event.f == "acquire" and event.type == "ok" and self.armed is None and not self.down \
                and self._may_start(ctx.time):
            self.armed = worker if self.when == "free" else self.rng.choice([w for w in range(self.n) if w != worker])
            self.workers.arm(self.armed, "acquire")
        elif event.f == "acquire" and event.type == "invoke" and worker == self.armed and self._waits_at(worker):
            self.armed = None
            if self.down or not self._may_start(ctx.time) or \
                    (self.when == "free" and not midacquire.free_now(self.workers, self.n, worker)):
                self.workers.let_go(worker)  # a free lock's next acquirer: the next holder is armed
                return []
            self.next_allowed = ctx.time + self.span_s + self.cooldown
            self.down.add(worker)
            at = midacquire.moment_ms(self.when, self.at_ms, self.rng)
            v = {"process": event.process, "worker": worker, "during": "acquire",
                 **({"when": "free"} if self.when == "free" else {}),
                 **({"key": event.key} if self.when == "free" and event.key is not None else {}),
                 **({"after_ms": at} if at is not None else {})}
            return [Planned(at=ctx.time, f="kill-holder", value=v, phase="fault")]
        return []

    def _ready(self, i: int, process: int, acquiring: bool = False) -> str | None:
        """Why the stopped worker i must not be killed now (None: it may)."""
        w = self.workers
        if w.process_of(i) != process:
            return f"worker {i} went on as process {w.process_of(i)}"
        if acquiring:
            if not w.waiting_on_acquire(i):
                return f"process {process} had its acquire answered"
        elif not w.holding_lock(i):
            return f"process {process} had released"
        last = self.last.get(process)
        if not acquiring and last is not None and last.type == "invoke":
            return f"process {process} had {last.f} in flight"
        if w.ops_recorded(i) != self.seen[i]:
            return f"process {process} had ops not yet in the history"
        return None

    def _queue_free(self) -> bool:
        """The history queue is not locked (a write by another worker ends within QUEUE_WAIT_S)."""
        deadline = time.monotonic() + QUEUE_WAIT_S
        while self.workers.queue_busy():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.0005)
        return True

    def invoke(self, op: Op) -> Op:
        w = self.workers
        if op.f == "respawn-holder":
            which = sorted(self.down) if op.value is None else [op.value["worker"]]
            done = []
            for i in which:
                done.append({"worker": i, **w.respawn(i)})
                self.down.discard(i)
            return complete(op, "ok", value=done[0] if op.value is not None and done else {"respawned": done})
        i, process = op.value["worker"], op.value["process"]
        acquiring = op.value.get("during") == "acquire"
        state: dict = {}
        if acquiring:
            if not w.parked(i):
                self.down.discard(i)
                return complete(op, "fail", error=f"missed: worker {i} had sent its acquire already")
            state = self._read_key(op.value.get("key"), "server_state_before")
            if op.value.get("when") == "free" and "key present" in state.get("server_state_before", ""):
                w.let_go(i)  # taken on the servers (a flag is set only at a grant): not a free lock's acquire
                self.down.discard(i)
                return complete(op, "fail", error=f"missed: the lock was not free when worker {i}'s acquire was "
                                                  f"to leave ({state['server_state_before']})")
            w.let_go(i)  # its request leaves; the stop lands while it waits for the reply
            after_ms = op.value.get("after_ms")
            time.sleep(HEAD_START_S if after_ms is None else after_ms / 1000)
        why = None
        for _ in range(STOP_TRIES):
            if not w.pause(i):
                why = f"worker {i} did not stop"
            else:
                self.stopped.add(i)
                why = self._ready(i, process, acquiring)
                if why is None and self._queue_free():
                    break
                why = why or "it was writing into the history queue"
            w.resume(i)  # a stopped writer would hold the queue's lock for ever: let it finish
            self.stopped.discard(i)
            if not why.startswith("it was writing"):
                return complete(op, "fail", error=f"missed: {why} when the stop landed")
            time.sleep(0.002)
        else:
            return complete(op, "fail", error=f"missed: {why} each time the stop landed")
        held = self.acquired.get(process)
        killed = w.kill(i)
        self.stopped.discard(i)
        t = now_ns()
        if acquiring:  # its acquire ends in doubt at its death: the servers may have granted it
            asked = self.last.get(process)
            w.record_for(i, [{k: v for k, v in {"process": process, "f": "acquire", "key": asked.key if asked else None,
                                                 "time_ns": t, "type": "info", "error": KILLED_ACQUIRING}.items()
                              if v is not None}])
        else:
            base = {"process": process, "f": "release", "key": held.key if held else None,
                    "value": held.value if held else None}
            w.record_for(i, [{k: v for k, v in d.items() if v is not None} for d in
                             ({**base, "time_ns": t, "type": "invoke"},
                              {**base, "time_ns": t + 1, "type": "info", "error": KILLED})])
        value = {**op.value, **killed, **state}
        if acquiring and "key" in op.value:  # what the dead acquirer left, once another's acquire in flight is done
            value.update(self._read_key(op.value["key"], "server_state_at_kill"))
            time.sleep(midacquire.SETTLE_S)
            value.update(self._read_key(op.value["key"], "server_state"))
        if not killed["gone"]:
            return complete(op, "info", value=value, error=f"worker {i}'s process group was not gone after the kill")
        return complete(op, "ok", value=value)

    def _read_key(self, key: Any, name: str) -> dict:
        """{name: the lock key's state on the servers} (when=free: its key is known), or {}."""
        if key is None:
            return {}
        why = readback.readable(self.servers)
        return {name: why if why is not None else readback.words(readback.read(self.servers, key))}

    def teardown(self) -> None:
        if getattr(self, "armed", None) is not None:
            self.workers.arm(self.armed, None)
        for i in sorted(getattr(self, "stopped", ())):  # stopped, never killed (an error between)
            self.workers.resume(i)
        self.stopped = set()
