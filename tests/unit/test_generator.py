"""The fault schedule is pure and seeded: same seed, same schedule."""

import random

from harness.generator import Context, FaultSchedule, Pending, plan
from nemesis.base import Planned
from nemesis.base import Compose, Fault, Noop


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


def test_noop_plans_nothing_and_compose_routes_by_f():
    assert plan(Noop(), 1, 30, 3) == []
    c = Compose([Noop(), FakeTargets()])
    assert c.fs == {"start-t", "stop-t"}
    assert plan(c, 5, 30, 3) == plan(c, 5, 30, 3)
