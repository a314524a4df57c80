"""Clock faults on servers, through libfaketime's per-node timestamp file.

`clock-bump` moves the wall clock of a random subset of lock nodes forward by more than
the TTL (a VM resume or an NTP step); keys then expire early there. `clock-reset` puts
them back. Every change is read back from the server itself (valkey's TIME command), and
the offsets it measured are the op's value, so the report can plot them.
"""

from __future__ import annotations

import random
import time
from typing import Any

from harness.cluster.base import ClockControl
from harness.errors import BadArgument
from harness.history import Op
from nemesis.base import Fault, NemesisContext, complete

TOLERANCE_S = 0.5


class ClockSkew:
    name = "clock-skew"
    fs = frozenset({"clock-bump", "clock-reset"})
    needs_fake_clock = True

    def setup(self, ctx: NemesisContext) -> None:
        if not isinstance(ctx.cluster, ClockControl):
            raise BadArgument("this cluster provider cannot control clocks; clock-skew needs the local provider")
        self.ctx = ctx
        self.cluster = ctx.cluster
        self.targets = [n.name for n in ctx.cluster.nodes if n.role == "lock" and n.clock_file]
        if not self.targets:
            raise BadArgument(f"clock-skew: no node of backend {ctx.spec.backend!r} runs under libfaketime")
        self.jump = ctx.spec.jump_s
        self.skewed: set[str] = set()

    def next_fault(self, rng: random.Random) -> Fault | None:
        # At least a majority, so that keys expire on enough nodes for a second quorum.
        k = rng.randint(len(self.targets) // 2 + 1, len(self.targets))
        nodes = sorted(rng.sample(self.targets, k))
        jump = round(self.jump * rng.uniform(1.0, 1.5), 3)
        return Fault(start=("clock-bump", {n: jump for n in nodes}), stop=("clock-reset", nodes))

    def heal_ops(self) -> list[tuple[str, Any]]:
        return [("clock-reset", list(self.targets))]

    def invoke(self, op: Op) -> Op:
        if op.f == "clock-bump":
            wanted = {n: float(v) for n, v in dict(op.value).items()}
        else:
            wanted = {n: 0.0 for n in op.value}
        for n, off in wanted.items():
            self.cluster.set_clock(n, off)
            (self.skewed.add if off else self.skewed.discard)(n)
        measured, bad = self._verify(wanted)
        if bad:
            return complete(op, "info", value=measured, error=f"clock did not move as asked on {', '.join(bad)}")
        return complete(op, "ok", value=measured)

    def _verify(self, wanted: dict[str, float]) -> tuple[dict[str, float], list[str]]:
        """Read each node's clock back; valkey may answer one command with its cached time."""
        measured: dict[str, float] = {}
        bad: list[str] = []
        for n, off in wanted.items():
            got = None
            for _ in range(5):
                try:
                    got = self.cluster.read_clock_offset(n)
                except Exception:
                    got = None
                if got is not None and abs(got - off) <= TOLERANCE_S:
                    break
                time.sleep(0.02)
            measured[n] = round(got, 3) if got is not None else None
            if got is None or abs(got - off) > TOLERANCE_S:
                bad.append(n)
        return measured, bad

    def teardown(self) -> None:
        for n in list(getattr(self, "targets", [])):
            self.cluster.set_clock(n, 0.0)
        self.skewed = set()
