"""The fault schedule: a pure, seeded generator of nemesis ops.

Same seed and same nemesis, same schedule: the generator never reads a clock or sleeps.
The runner asks `op(ctx)` with the elapsed time and gets either a `Planned` op that is due,
a `Pending(at)` telling it when to ask again, or None when the schedule is over. It tells
the generator what happened with `update(ctx, event)`; reactive nemeses use that hook.

Shape, as in Jepsen's combined packages: quiet for a jittered interval, start a fault,
hold it for an interval, heal it, repeat until the fault phase ends (time_limit minus
recovery); then the final phase heals everything, and the workload runs on, unfaulted,
for the recovery period.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Iterator

from harness.core.contracts.nemesis import Fault, Nemesis, Planned, Reactive


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


class FaultSchedule:
    """The generator the runner drives: `op(ctx)` and `update(ctx, event)`."""

    def __init__(self, nemesis: Nemesis, seed: int, fault_phase: float, interval: float):
        self.nemesis = nemesis
        self.ops = plan(nemesis, seed, fault_phase, interval)
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
            self.reactive.extend(self.nemesis.on_event(ctx, event) or [])
            self.reactive.sort(key=lambda p: p.at)

    def __iter__(self) -> Iterator[Planned]:
        return iter(self.ops)
