"""The Nemesis contract: what a nemesis is, the ops it plans and the context it gets.

A nemesis turns an invoke op (process "nemesis", f naming the fault) into a completion:
`ok` when the fault verifiably took effect (its value says what was measured), `info`
when it may have partly happened. It declares the fs it handles, and it plans its own
faults: `next_fault(rng)` returns the op that starts one fault and the op that heals it,
drawn only from the rng, so the same seed gives the same schedule (see generator.py).

`teardown()` must heal everything the nemesis ever did, even after an error, and must be
safe to call twice. `invoke` must not sleep for the length of a fault: the generator
decides when the healing op runs.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

from harness.core.contracts.cluster import Cluster
from harness.core.faults import FaultKind
from harness.core.history import Op, now_ns


@dataclass(frozen=True, slots=True, kw_only=True)
class Fault:
    start: tuple[str, Any]  # (f, value) of the op that starts the fault
    stop: tuple[str, Any] | None  # (f, value) of the op that heals it


@dataclass(frozen=True, slots=True, kw_only=True)
class Planned:
    """An op the schedule will run: at `at` seconds after the workload started."""

    at: float
    f: str
    value: Any
    phase: str  # "fault" | "heal" | "final"


@runtime_checkable
class Clients(Protocol):
    """What a nemesis may do to the client workers (harness.engine.pool.Workers): stop and
    continue one (index 0..concurrency-1), ask whether it holds the lock, skew its
    in-process wall clock. `paused` is the set of indexes stopped now."""

    paused: set[int]

    def pause(self, index: int, wait_s: float = 1.0) -> bool:
        """SIGSTOP it and wait until the kernel says it stopped; False if it did not."""

    def resume(self, index: int) -> None: ...

    def holding_lock(self, index: int) -> bool: ...

    def set_clock(self, index: int, offset_s: float) -> None: ...

    def clock_offset(self, index: int) -> float: ...


@runtime_checkable
class WatchesClients(Clients, Protocol):
    """Optional, for faults aimed at a moment of a client's life (pause-waiter, kill-holder):
    read its shared flags and counts. The Workers of harness.engine.pool implement it."""

    def waiting_on_acquire(self, index: int) -> bool:
        """Between the invoke of its acquire and that acquire's completion."""

    def process_of(self, index: int) -> int:
        """The process id it records under now."""

    def ops_recorded(self, index: int) -> int:
        """How many ops it has recorded (all its processes), received or not."""

    def queue_busy(self) -> bool:
        """Whether some worker is writing into the history queue at this moment."""


@runtime_checkable
class ParksClients(WatchesClients, Protocol):
    """Optional: stop a client worker at a chosen op, after its invoke is recorded and before
    the request is sent (cut-in-flight cuts its links there)."""

    def arm(self, index: int, f: str | None) -> None:
        """Stop it before it sends its next `f` ("acquire", "release", "renew"); None disarms."""

    def parked(self, index: int) -> bool:
        """Whether it waits there now."""

    def let_go(self, index: int) -> None: ...


@runtime_checkable
class KillsClients(WatchesClients, Protocol):
    """Optional: SIGKILL a client worker and start a new process in its place."""

    def kill(self, index: int, wait_s: float = 5.0) -> dict:
        """SIGKILL its process group; wait until every process of it is gone. Returns
        {"pid", "group", "gone", "gone_ms"}."""

    def record_for(self, index: int, ops: list[dict]) -> None:
        """Record ops (dicts of the history format) for its dead process."""

    def respawn(self, index: int) -> dict:
        """A new process in its place, under the next process id: {"pid", "process"}."""


@dataclass(slots=True, kw_only=True)
class NemesisContext:
    """What a nemesis may touch: the spec, the cluster (ask it for capabilities with
    isinstance), and the client workers."""

    spec: Any  # TestSpec
    cluster: Cluster
    workers: Clients | None = None
    extra: dict = field(default_factory=dict)

    def lock_node_names(self) -> list[str]:
        return [n.name for n in self.cluster.nodes if n.role == "lock"]


@runtime_checkable
class Nemesis(Protocol):
    """A fault injector. Constructed with no arguments; `setup` receives everything it may
    touch and must refuse (BadArgument) a cluster that lacks a capability it needs, asked
    with isinstance on the capability Protocols of harness/core/contracts/cluster.py, never by
    provider name. It declares the options it reads in `OPTIONS`."""

    name: str
    fs: frozenset[str]  # the op fs it handles (Combined routes by them)
    # Its kinds of fault, for readers of the history (harness/core/faults.py): the op that starts
    # each, the op that heals it, whom its value names, the causes it can explain. The runner
    # records them into the run's facts, so checkers never load this code.
    FAULTS: tuple[FaultKind, ...]

    def setup(self, ctx: NemesisContext) -> None: ...

    def next_fault(self, rng: random.Random) -> Fault | None: ...

    def heal_ops(self) -> list[tuple[str, Any]]: ...

    def invoke(self, op: Op) -> Op: ...

    def teardown(self) -> None: ...


@runtime_checkable
class JudgesSpec(Protocol):
    """Optional: what a nemesis class can tell from the spec alone, asked of the class before
    any server starts (TestSpec.validate, the runner), so a run it cannot serve leaves no run
    dir and moves no `latest`. Neither may need setup(), a cluster or the workers.

    `refusal(spec)`: a setting (or combination) that makes this fault impossible or a no-op,
    as one sentence naming it and the fix; None when the spec is fine. `span_s(spec)`: how
    long one of its faults lasts at least, in seconds, when the nemesis times its own faults
    (a reactive one starts a fault only if it ends within the fault phase); 0.0 when the
    schedule times them."""

    def refusal(self, spec: Any) -> str | None: ...

    def span_s(self, spec: Any) -> float: ...


@runtime_checkable
class Reactive(Protocol):
    """Optional: a nemesis that answers history events (an ok acquire, its own op's
    completion) with ops of its own. Must be pure and quick: it plans, it does not act."""

    def on_event(self, ctx: Any, event: Op) -> list[Planned]: ...


@runtime_checkable
class MovesServerClocks(Protocol):
    """Optional: a nemesis whose faults move the servers' clocks in a way that needs the
    servers started for it (under libfaketime, for kinds it reaches)."""

    def moves_server_clocks(self, spec: Any) -> bool: ...


def complete(op: Op, type_: str = "ok", value: Any = None, error: str | None = None) -> Op:
    """The completion of a nemesis invoke, stamped now."""
    return replace(op, index=-1, time_ns=now_ns(), type=type_, value=op.value if value is None else value, error=error)
