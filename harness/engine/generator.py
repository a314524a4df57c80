"""The fault schedule: a pure, seeded generator of nemesis ops.

Same seed and same nemesis, same schedule: the generator never reads a clock or sleeps.
The runner asks `op(ctx)` with the elapsed time and gets either a `Planned` op that is due,
a `Pending(at)` telling it when to ask again, or None when the schedule is over. It tells
the generator what happened with `update(ctx, event)`; reactive nemeses use that hook.

Shape, as in Jepsen's combined packages: quiet for a jittered interval, start a fault,
hold it for an interval, heal it, repeat until the fault phase ends (time_limit minus
recovery); then the final phase heals everything, and the workload runs on, unfaulted,
for the recovery period.

A replay (`replay=`, harness/engine/replay.py) plans no faults of its own: the recorded
periodic faults run at their offsets with their values and are healed `duration` later; a
reactive nemesis that declares `gate` (the `Gated` capability) is let start a fault only when
a recorded one of its kind is due (its first trigger at or after the recorded offset; a
start that misses, `fail`, leaves it due), and the schedule moves that fault's heal to
`duration` after its start, with the moment it drew inside a client's op (REPLAYED_MOMENTS)
taken from the recorded fault. The final heal is the same as in a planned run.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterator, Protocol, Sequence, runtime_checkable

from harness.core.contracts.nemesis import Fault, Nemesis, Planned, Reactive
from harness.core.history import NEMESIS


# Keys of a reactive fault's value that a replay takes from the recorded fault: a moment the
# nemesis drew inside a client's op (kill-holder -o during=acquire: `after_ms`, how long after
# the acquire request left the kill landed).
REPLAYED_MOMENTS = ("after_ms",)


@dataclass(frozen=True, slots=True, kw_only=True)
class Pending:
    until: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Context:
    time: float  # seconds since the workload started


def plan(nemesis: Nemesis, seed: int, fault_phase: float, interval: float) -> list[Planned]:
    """Every op of the schedule, in order. Pure: depends only on its arguments."""
    rng = random.Random(seed)
    out: list[Planned] = []
    t = interval * rng.uniform(0.5, 1.0)
    while t < fault_phase:
        fault: Fault | None = nemesis.next_fault(rng)
        if fault is None:
            break
        out.append(Planned(at=round(t, 3), f=fault.start[0], value=fault.start[1], phase="fault"))
        t += interval * rng.uniform(0.75, 1.25)
        if fault.stop is not None:
            out.append(Planned(at=round(min(t, fault_phase), 3), f=fault.stop[0], value=fault.stop[1], phase="heal"))
        t += interval * rng.uniform(0.75, 1.25)
    for f, value in nemesis.heal_ops():
        out.append(Planned(at=round(fault_phase, 3), f=f, value=value, phase="final"))
    return out


@runtime_checkable
class Gated(Protocol):
    """Optional for a reactive nemesis: replays its recorded faults. When `gate` is set (by a
    replaying FaultSchedule, after setup), the nemesis must start a fault of kind f at time t
    only if `gate(f, t)` is True, in place of its own timing (cooldown, the fault phase's end);
    its other conditions (the moment, one fault at a time) stay. None: it times itself."""

    gate: Callable[[str, float], bool] | None


def replayed(faults: Sequence[Any], heal_ops: list[tuple[str, Any]], fault_phase: float) -> list[Planned]:
    """The planned ops of a replay's periodic faults (harness/engine/replay.py Recorded), in
    time order, then the final heal at fault_phase. Faults starting at or after fault_phase
    are left out; a heal past it is left to the final heal."""
    out: list[Planned] = []
    for r in faults:
        if r.reactive or r.at >= fault_phase:
            continue
        out.append(Planned(at=round(r.at, 3), f=r.f, value=r.value, phase="fault"))
        if r.heal and r.at + r.duration < fault_phase:
            out.append(Planned(at=round(r.at + r.duration, 3), f=r.heal, value=r.heal_value, phase="heal"))
    out.sort(key=lambda p: (p.at, p.phase != "heal"))  # a heal due with a start goes first
    out += [Planned(at=round(fault_phase, 3), f=f, value=value, phase="final") for f, value in heal_ops]
    return out


class FaultSchedule:
    """The generator the runner drives: `op(ctx)` and `update(ctx, event)`."""

    def __init__(self, nemesis: Nemesis, seed: int, fault_phase: float, interval: float,
                 replay: Sequence[Any] | None = None):
        self.nemesis = nemesis
        self.replay = replay
        self.due: list[Any] = []  # replay: reactive faults not yet started, by offset
        self.started: dict[str, tuple[Any, float]] = {}  # replay: heal f -> (fault, when it started)
        if replay is None:
            self.ops = plan(nemesis, seed, fault_phase, interval)
        else:
            self.ops = replayed(replay, nemesis.heal_ops(), fault_phase)
            self.due = sorted((r for r in replay if r.reactive), key=lambda r: r.at)
            for m in getattr(nemesis, "members", [nemesis]):
                if isinstance(m, Gated):
                    m.gate = self.is_due
        self._next = 0
        self.reactive: list[Planned] = []  # ops a nemesis asked for in response to events
        # Whether any event can matter (asked once: a Protocol check costs more than an op).
        self.listens = isinstance(nemesis, Reactive) and bool(getattr(nemesis, "reactive", True))

    def op(self, ctx: Context) -> Planned | Pending | None:
        planned = self.ops[self._next] if self._next < len(self.ops) else None
        reactive = self.reactive[0] if self.reactive else None
        if planned is None and reactive is None:
            return None
        take_reactive = planned is None or (reactive is not None and reactive.at <= planned.at)
        p = reactive if take_reactive else planned
        if p.at > ctx.time:
            return Pending(until=p.at)
        if take_reactive:
            self.reactive.pop(0)
        else:
            self._next += 1
        return p

    def update(self, ctx: Context, event: Any) -> None:
        """Let a reactive nemesis answer an event (e.g. an ok acquire) with ops of its own."""
        if self.listens:
            planned = self.nemesis.on_event(ctx, event) or []
            if self.replay is not None:
                planned = self._replaying(ctx, event, planned)
            self.reactive.extend(planned)
            self.reactive.sort(key=lambda p: p.at)

    def is_due(self, f: str, t: float) -> bool:
        """Replay: whether a recorded fault of kind f is due at t (the Gated nemesis's gate)."""
        return any(r.f == f and r.at <= t for r in self.due)

    def _replaying(self, ctx: Context, event: Any, planned: list[Planned]) -> list[Planned]:
        """Replay: a started fault takes its recorded one off `due`; one that missed (`fail`)
        puts it back; its heal is moved to the recorded duration after its start, and a
        `seconds` in its value (the nemesis's own span, e.g. pause_multiple x TTL) says that
        duration, so the history records what the replay applied (a shrunk pause says 0.5 s)."""
        if getattr(event, "process", None) == NEMESIS and getattr(event, "type", None) == "fail":
            for heal, (r, _) in list(self.started.items()):
                if r.f == event.f:
                    del self.started[heal]
                    self.due = sorted(self.due + [r], key=lambda x: x.at)
        out = []
        for p in planned:
            if p.phase == "fault":
                r = next((r for r in self.due if r.f == p.f and r.at <= p.at), None)
                if r is not None:
                    self.due.remove(r)
                    self.started[r.heal] = (r, p.at)
                    if isinstance(p.value, dict) and "seconds" in p.value:  # the nemesis's own span: not this fault's
                        p = replace(p, value={**p.value, "seconds": round(r.duration, 3)})
                    moment = {k: r.value[k] for k in REPLAYED_MOMENTS if isinstance(r.value, dict) and k in r.value}
                    if isinstance(p.value, dict) and moment:  # a seeded moment inside a client's op: the recorded one
                        p = replace(p, value={**p.value, **moment})
            elif p.phase == "heal" and p.f in self.started:
                r, began = self.started.pop(p.f)
                p = replace(p, at=round(max(ctx.time, began + r.duration), 3))
            out.append(p)
        return out

    def __iter__(self) -> Iterator[Planned]:
        return iter(self.ops)
