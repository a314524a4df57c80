"""The no-op nemesis (`--nemesis none`) and `Combined`, several nemeses on one schedule
(harness/core/contracts/nemesis.py is the contract they implement)."""

from __future__ import annotations

import random
from typing import Any, Sequence

from harness.core.contracts.nemesis import Fault, MovesServerClocks, Nemesis, NemesisContext, Planned, Reactive, complete
from harness.core.errors import BadArgument
from harness.core.faults import FaultKind
from harness.core.history import Op


class Noop:
    """Does nothing, plans nothing: `--nemesis none`."""

    name = "none"
    fs: frozenset[str] = frozenset()
    FAULTS: tuple[FaultKind, ...] = ()
    OPTIONS: tuple = ()

    def setup(self, ctx: NemesisContext) -> None:
        pass

    def next_fault(self, rng: random.Random) -> Fault | None:
        return None

    def heal_ops(self) -> list[tuple[str, Any]]:
        return []

    def invoke(self, op: Op) -> Op:
        return complete(op, "fail", error=f"no nemesis handles {op.f!r}")

    def teardown(self) -> None:
        pass


class Combined:
    """Several nemeses on one schedule; ops are routed by f, faults drawn in turn at random."""

    name = "compose"

    def __init__(self, members: Sequence[Nemesis]):
        self.members = [m for m in members if not isinstance(m, Noop)]
        self.routes: dict[str, Nemesis] = {}
        for m in self.members:
            for f in m.fs:
                if f in self.routes:
                    raise BadArgument(f"nemeses {self.routes[f].name} and {m.name} both handle {f!r}; use only one of them")
                self.routes[f] = m
        self.fs = frozenset(self.routes)
        self.FAULTS = tuple(k for m in self.members for k in getattr(m, "FAULTS", ()))
        self.reactive = [m for m in self.members if isinstance(m, Reactive)]  # asked once: a Protocol check is slow

    def setup(self, ctx: NemesisContext) -> None:
        for m in self.members:
            m.setup(ctx)

    def next_fault(self, rng: random.Random) -> Fault | None:
        """A fault of a member drawn at random; a member that plans none (a purely reactive one,
        such as kill-holder, whose faults come from on_event) is passed over, never the end of
        the schedule: the generator stops at None, so drawing it ended every member's periodic
        faults after a slot or two. With every member planning, the draws are as before."""
        left = list(self.members)
        while left:
            pick = rng.choice(left)
            fault = pick.next_fault(rng)
            if fault is not None:
                return fault
            left.remove(pick)
        return None

    def heal_ops(self) -> list[tuple[str, Any]]:
        return [op for m in self.members for op in m.heal_ops()]

    def on_event(self, ctx: Any, event: Op) -> list[Planned]:
        out: list[Planned] = []
        for m in self.reactive:
            out += m.on_event(ctx, event) or []
        return out

    def moves_server_clocks(self, spec: Any) -> bool:
        return any(isinstance(m, MovesServerClocks) and m.moves_server_clocks(spec) for m in self.members)

    def invoke(self, op: Op) -> Op:
        m = self.routes.get(op.f)
        if m is None:
            return complete(op, "fail", error=f"no nemesis handles {op.f!r}")
        return m.invoke(op)

    def teardown(self) -> None:
        errors = []
        for m in self.members:
            try:
                m.teardown()
            except Exception as e:  # heal the rest before reporting
                errors.append(f"{m.name}: {e}")
        if errors:
            raise RuntimeError("; ".join(errors))
