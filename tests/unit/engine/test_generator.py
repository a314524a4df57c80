"""The fault schedule is pure and seeded: same seed, same schedule."""

import random

from harness.engine.generator import Context, FaultSchedule, Pending, plan
from harness.core.history import NEMESIS, Op
from harness.core.contracts.nemesis import Fault, Planned, complete
from nemesis.base import Combined, Noop


class FakeTargets:
    """A nemesis planning faults over fixed names (no cluster needed to plan)."""

    name = "t"
    fs = frozenset({"start-t", "stop-t"})

    def next_fault(self, rng: random.Random) -> Fault:
        nodes = sorted(rng.sample(["n1", "n2", "n3", "n4", "n5"], 3))
        return Fault(start=("start-t", nodes), stop=("stop-t", nodes))

    def heal_ops(self):
        return [("stop-t", ["n1", "n2", "n3", "n4", "n5"])]


def test_same_seed_same_schedule_and_different_seed_differs():
    a = plan(FakeTargets(), 7, 30, 3)
    assert a == plan(FakeTargets(), 7, 30, 3)
    assert a != plan(FakeTargets(), 8, 30, 3)


def test_faults_alternate_with_heals_and_end_with_a_final_heal():
    ops = plan(FakeTargets(), 1, 30, 3)
    body, final = ops[:-1], ops[-1]
    assert [p.f for p in body] == ["start-t", "stop-t"] * (len(body) // 2)
    assert final.phase == "final" and final.at == 30
    assert all(p.at <= 30 for p in ops)
    assert [p.at for p in ops] == sorted(p.at for p in ops)


def test_schedule_hands_out_due_ops_and_says_when_to_come_back():
    s = FaultSchedule(FakeTargets(), 3, 20, 2)
    first = s.ops[0]
    assert s.op(Context(time=0)) == Pending(until=first.at)
    assert s.op(Context(time=first.at)) == first
    taken = 1
    while isinstance(s.op(Context(time=1e9)), Planned):
        taken += 1
    assert taken == len(s.ops) and s.op(Context(time=1e9)) is None


class Recording:
    """A nemesis with its own fs (start-NAME, stop-NAME) that remembers every op it is handed."""

    def __init__(self, name: str):
        self.name = name
        self.fs = frozenset({f"start-{name}", f"stop-{name}"})
        self.got: list[str] = []

    def next_fault(self, rng: random.Random) -> Fault:
        return Fault(start=(f"start-{self.name}", [self.name]), stop=(f"stop-{self.name}", None))

    def heal_ops(self):
        return [(f"stop-{self.name}", None)]

    def invoke(self, op: Op) -> Op:
        self.got.append(op.f)
        return complete(op, "ok")


def test_noop_plans_nothing_and_compose_routes_by_f():
    assert plan(Noop(), 1, 30, 3) == []
    a, b = Recording("a"), Recording("b")
    c = Combined([Noop(), a, b])
    assert c.fs == {"start-a", "stop-a", "start-b", "stop-b"}
    ops = plan(c, 5, 60, 3)
    starts = [p.f for p in ops if p.phase == "fault"]
    assert {"start-a", "start-b"} <= set(starts), starts  # faults drawn from both members
    for p in ops:  # every op of the schedule reaches the member that declared its f
        done = c.invoke(Op(time_ns=0, process=NEMESIS, type="invoke", f=p.f, value=p.value))
        assert done.type == "ok", (p, done)
    assert a.got == [p.f for p in ops if p.f.endswith("-a")] and a.got
    assert b.got == [p.f for p in ops if p.f.endswith("-b")] and b.got
    # a start is healed by its own member's stop, and the final heal asks both
    body = [p for p in ops if p.phase != "final"]
    assert all(s.f.replace("start", "stop") == h.f for s, h in zip(body[::2], body[1::2]))
    assert [p.f for p in ops if p.phase == "final"] == ["stop-a", "stop-b"]
