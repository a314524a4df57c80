"""Clock faults on servers: jumps forward or back, strobe, and drift.

How a node's clock moves depends on the server (its kind's clock_method): valkey runs
under libfaketime with its own timestamp file; etcd (Go, which libfaketime cannot reach)
and ZooKeeper get their wall clock shifted by a vDSO patch (timewarp.py), a plain
wall-clock skew that leaves their monotonic timers alone. `--option zk_clock=faketime`
runs ZooKeeper under libfaketime instead, which fakes the JVM's monotonic clock too: a
backward jump on a leader then leaves a zombie leader, a deliberate, documented fault. Modes (`--option
clock_mode=bump|back|strobe|drift|mixed`, default bump):

- bump: a random majority (or more) of the nodes jumps forward by 1-1.5 x --clock-jump
  (default 2.5 x TTL): an NTP step or a VM resume; keys expire early there.
- back: the same jump backwards; keys live longer than their TTL.
- strobe: the clocks flip between +jump and 0 every `strobe_ms` (default 200 ms).
- drift: the clocks run fast (`drift_rate`, default 1.5): stepped at 10 Hz, because
  libfaketime's own rate spec is measured from process start and leaves a permanent
  offset behind when it is removed (seen here).

`--option clock_target=clients` skews the client workers instead: a Python client's
in-process clock (see harness.core.contracts.client.Clock; the backend's `clock_reads` say which of its
reads the skew reaches, often none: most clients time their leases with the monotonic
clock, which is the point), or an external client process's wall clock through the vDSO
patch, read back with the protocol's `clock` request (workloads/external.py). The
history's timestamps stay true.

`clock-reset` heals any of them. Every change is read back from the server itself
(valkey's TIME; ZooKeeper's own log timestamp) and the measured offsets are the op's
value, so the report can plot them; a change that does not read back is an `info`.
"""

from __future__ import annotations

import math
import random
import threading
import time
from typing import Any

from harness.cluster.kinds import kind_class
from harness.core.contracts.cluster import ClockControl, SetsClocksTogether
from harness.core.errors import BadArgument
from harness.core.options import Option, values
from harness.core.history import Op
from harness.core.faults import FaultKind
from harness.core.contracts.nemesis import Fault, NemesisContext, complete

TOLERANCE_S = 0.5
MODES = ("bump", "back", "strobe", "drift")


class ClockSkew:
    name = "clock-skew"
    fs = frozenset({"clock-bump", "clock-strobe", "clock-drift", "clock-reset"})
    # a moved clock expires keys early on servers whose expiry reads it, or skews a client's lease
    FAULTS = tuple(FaultKind(f=f, heal="clock-reset", explains=("early-server-clock", "early-client-clock"))
                   for f in ("clock-bump", "clock-strobe", "clock-drift"))
    OPTIONS = (
        Option(name="clock_target", type=str, default="servers", choices=("servers", "clients"),
               help="whose clocks jump: the lock servers', or the client workers' (in-process)"),
        Option(name="clock_mode", type=str, default="bump", choices=MODES + ("mixed",),
               help="forward jumps, backward jumps, strobing, drift, or a mix"),
        Option(name="clock_jump_jitter", type=float, default=0.5, min=0, max=10,
               help="jumps are 1 to 1+jitter times --clock-jump"),
        Option(name="strobe_ms", type=float, default=200.0, min=10, max=60_000, help="strobe period, ms"),
        Option(name="drift_rate", type=float, default=1.5, above=0, max=100, help="clock rate while drifting"),
    )

    @classmethod
    def refusal(cls, spec: Any) -> str | None:
        v = values(spec.options, cls.OPTIONS)
        if v["clock_mode"] == "drift" and v["drift_rate"] == 1:
            return "clock-skew -o clock_mode=drift with drift_rate=1 moves no clock; give another rate, e.g. -o drift_rate=1.5"
        shortest_ms = 0.75 * spec.nemesis_interval * 1000  # a fault lasts 0.75-1.25 x the interval (generator.plan)
        if v["clock_mode"] == "strobe" and v["strobe_ms"] >= shortest_ms:
            return (f"clock-skew -o strobe_ms={v['strobe_ms']:g} is not shorter than a fault ({shortest_ms:g} ms at "
                    f"least, 0.75 x --nemesis-interval), so the clocks would never flip back; give a shorter strobe_ms")
        return None

    @staticmethod
    def span_s(spec: Any) -> float:
        return 0.0  # the schedule times its faults

    def moves_server_clocks(self, spec: Any) -> bool:
        return values(spec.options, self.OPTIONS)["clock_target"] == "servers"

    def setup(self, ctx: NemesisContext) -> None:
        self.ctx = ctx
        self.clients = not self.moves_server_clocks(ctx.spec)
        if self.clients and ctx.spec.backend == "external":
            from harness.cluster import timewarp

            reason = timewarp.supported()
            if reason:
                raise BadArgument(f"clock_target=clients moves an external client's clock with the vDSO patch, and {reason}; "
                                  f"use clock_target=servers")
        if self.clients:
            # An external client process reads its clock back once it is free (an acquire may be waiting).
            wait = ctx.spec.acquire_timeout + 3.0 if ctx.spec.backend == "external" else 0.0
            self.cluster = _ClientClocks(ctx.workers, wait)
            self.targets = [f"c{i + 1}" for i in range(ctx.spec.concurrency)]
            self._common(ctx)
            return
        if not isinstance(ctx.cluster, ClockControl):
            raise BadArgument("this cluster provider cannot control clocks; clock-skew needs the local provider")
        self.cluster = ctx.cluster
        movable = set(ctx.cluster.movable_clocks())
        self.targets = [n.name for n in ctx.cluster.nodes if n.role == "lock" and n.name in movable]
        if not self.targets:
            kind = next((n.kind for n in ctx.cluster.nodes if n.role == "lock"), "?")
            raise BadArgument(f"clock-skew cannot move the clocks of {kind} nodes here: neither libfaketime nor "
                              f"the vDSO patch (ptrace) reaches them; see docs/nemeses.md, how clocks are moved")
        self._common(ctx)

    def _common(self, ctx: NemesisContext) -> None:
        self._together = isinstance(self.cluster, SetsClocksTogether)
        v = values(ctx.spec.options, self.OPTIONS)
        mode = v["clock_mode"]
        self.modes = MODES if mode == "mixed" else (mode,)
        self.jump = ctx.spec.jump_s
        self.jitter = v["clock_jump_jitter"]  # jumps are 1..1+jitter x the jump
        self.strobe_s = v["strobe_ms"] / 1000
        self.rate = v["drift_rate"]
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def next_fault(self, rng: random.Random) -> Fault | None:
        # At least a majority, so that keys expire on enough nodes for a second quorum.
        k = rng.randint(len(self.targets) // 2 + 1, len(self.targets))
        nodes = sorted(rng.sample(self.targets, k))
        mode = rng.choice(self.modes)
        jump = round(self.jump * rng.uniform(1.0, 1.0 + self.jitter), 3)
        if mode in ("bump", "back"):
            start = ("clock-bump", {n: jump if mode == "bump" else -jump for n in nodes})
        elif mode == "strobe":
            start = ("clock-strobe", {"nodes": nodes, "delta": jump, "period_s": self.strobe_s})
        else:
            start = ("clock-drift", {"nodes": nodes, "rate": self.rate})
        return Fault(start=start, stop=("clock-reset", nodes))

    def heal_ops(self) -> list[tuple[str, Any]]:
        return [("clock-reset", list(self.targets))]

    def invoke(self, op: Op) -> Op:
        self._stop_thread()
        if op.f == "clock-bump":
            return self._set(op, {n: float(v) for n, v in dict(op.value).items()})
        if op.f == "clock-reset":
            return self._set(op, {n: 0.0 for n in op.value})
        nodes = list(op.value["nodes"])
        if op.f == "clock-strobe":
            delta, period = float(op.value["delta"]), float(op.value["period_s"])
            self._start_thread(lambda i: {n: delta if i % 2 == 0 else 0.0 for n in nodes}, period)
            return complete(op, "ok", value=dict(op.value, measured=self._read(nodes)))
        rate = float(op.value["rate"])
        t0 = time.monotonic()
        self._start_thread(lambda i: {n: (time.monotonic() - t0) * (rate - 1) for n in nodes}, 0.1)
        time.sleep(0.3)
        measured = self._read(nodes)
        want = (time.monotonic() - t0) * (rate - 1)
        bad = [n for n, v in measured.items() if v is None or abs(v - want) > self._tolerance(n)]
        return complete(op, "info" if bad else "ok", value=dict(op.value, measured=measured),
                        error=f"clock did not drift as asked on {', '.join(bad)}" if bad else None)

    def _set_all(self, offsets: dict[str, float]) -> None:
        if self._together:
            self.cluster.set_clocks(offsets)
        else:
            for n, off in offsets.items():
                self.cluster.set_clock(n, off)

    def _set(self, op: Op, wanted: dict[str, float]) -> Op:
        self._set_all(wanted)
        measured, bad = self._verify(wanted)
        if bad:
            unread = [n for n in bad if measured[n] is None]
            wrong = [n for n in bad if measured[n] is not None]
            why = ([f"clock did not move as asked on {', '.join(wrong)}"] if wrong else []) + (
                [f"{', '.join(unread)} did not report {'its' if len(unread) == 1 else 'their'} clock"
                 + (" (no `clock` reply: unsupported, busy or paused)" if self.clients else "")] if unread else [])
            return complete(op, "info", value=measured, error="; ".join(why))
        return complete(op, "ok", value=measured)

    def _start_thread(self, offsets_at, period: float) -> None:
        self._stop.clear()

        def loop() -> None:
            i = 0
            while not self._stop.is_set():
                self._set_all(offsets_at(i))
                i += 1
                self._stop.wait(period)

        self._thread = threading.Thread(target=loop, name="clock-nemesis", daemon=True)
        self._thread.start()

    def _stop_thread(self) -> None:
        if getattr(self, "_thread", None) is not None:  # None too when torn down before setup (a Ctrl-C)
            self._stop.set()
            self._thread.join(5)
            self._thread = None

    def _tolerance(self, name: str) -> float:
        try:
            return TOLERANCE_S + kind_class(self.cluster.node(name).kind).clock_read_error_s
        except Exception:  # client targets have no node
            return TOLERANCE_S

    def _read(self, nodes: list[str]) -> dict[str, float | None]:
        out: dict[str, float | None] = {}
        for n in nodes:
            try:
                out[n] = round(self.cluster.read_clock_offset(n), 3)
            except Exception:
                out[n] = None
        return out

    def _verify(self, wanted: dict[str, float]) -> tuple[dict[str, float | None], list[str]]:
        """Read each node's clock back; valkey may answer one command with its cached time."""
        measured: dict[str, float | None] = {}
        bad: list[str] = []
        for n, off in wanted.items():
            tol = self._tolerance(n)
            got = None
            for _ in range(5):
                got = self._read([n])[n]
                if got is not None and abs(got - off) <= tol:
                    break
                time.sleep(0.02)
            measured[n] = got
            if got is None or abs(got - off) > tol:
                bad.append(n)
        return measured, bad

    def teardown(self) -> None:
        self._stop_thread()
        for n in list(getattr(self, "targets", [])):
            self.cluster.set_clock(n, 0.0)


class _ClientClocks:
    """ClockControl over the workers' clocks (targets named c1..cN): in-process ones, or
    external client processes, which report their clock once they are free (`wait` s)."""

    def __init__(self, workers, wait: float):
        self.workers = workers
        self.wait = wait
        self.deadline = 0.0

    def set_clock(self, name: str, offset_s: float, rate: float = 1.0) -> None:
        self.workers.set_clock(int(name[1:]) - 1, offset_s)
        if time.monotonic() >= self.deadline:  # one wait for every client set together (and for a drift)
            self.deadline = time.monotonic() + self.wait

    def read_clock_offset(self, name: str) -> float:
        i = int(name[1:]) - 1
        while True:
            got = self.workers.clock_offset(i)
            if got == got or time.monotonic() >= self.deadline:  # read back, or waited long enough
                break
            if i in self.workers.paused:
                break  # a paused client cannot answer
            time.sleep(0.02)
        if got != got or math.isinf(got):  # not yet, or never (the client has no `clock`)
            raise LookupError(f"{name} did not report its clock")
        return got
