"""nemesis/base.py: Combined routes each op to the one nemesis that declares its f, refuses
what nobody declares, fans events out to the reactive members and tears every member
down; fault_intervals reads the faults that took effect back out of a history."""

from __future__ import annotations

import random

import pytest

from harness.core.errors import BadArgument
from harness.core.history import NEMESIS, Op
from harness.core.faults import fault_intervals
from harness.core.contracts.nemesis import Fault, NemesisContext, Planned, complete
from nemesis.base import Combined, Noop


class Member:
    """A nemesis of fs `start-NAME`/`stop-NAME` that records what it is handed."""

    def __init__(self, name: str, fs: tuple[str, ...] | None = None, teardown_error: str | None = None):
        self.name = name
        self.fs = frozenset(fs or (f"start-{name}", f"stop-{name}"))
        self.got: list[Op] = []
        self.ctx = None
        self.torn_down = 0
        self.teardown_error = teardown_error

    def setup(self, ctx: NemesisContext) -> None:
        self.ctx = ctx

    def next_fault(self, rng: random.Random) -> Fault:
        return Fault(start=(f"start-{self.name}", rng.random()), stop=(f"stop-{self.name}", None))

    def heal_ops(self):
        return [(f"stop-{self.name}", None)]

    def invoke(self, op: Op) -> Op:
        self.got.append(op)
        return complete(op, "ok", value=f"done by {self.name}")

    def teardown(self) -> None:
        self.torn_down += 1
        if self.teardown_error:
            raise RuntimeError(self.teardown_error)


class Reacting(Member):
    """A member that answers every event with one op of its own."""

    def on_event(self, ctx, event: Op) -> list[Planned]:
        return [Planned(at=ctx, f=f"start-{self.name}", value=event.f, phase="fault")]


def inv(f: str, value=None) -> Op:
    return Op(time_ns=1, process=NEMESIS, type="invoke", f=f, value=value)


def test_each_op_goes_to_the_member_that_declares_its_f():
    a, b = Member("a"), Member("b", fs=("cut", "mend"))
    c = Combined([a, b])
    assert c.routes == {"start-a": a, "stop-a": a, "cut": b, "mend": b} and c.fs == set(c.routes)
    for f in ("cut", "start-a", "mend", "stop-a", "cut"):
        done = c.invoke(inv(f, value=[f]))
        assert done.type == "ok" and done.f == f and done.value == f"done by {c.routes[f].name}"
    assert [o.f for o in a.got] == ["start-a", "stop-a"]
    assert [o.f for o in b.got] == ["cut", "mend", "cut"] and b.got[0].value == ["cut"]


def test_an_f_nobody_declares_is_refused_and_reaches_no_member():
    a = Member("a")
    for nemesis in (Combined([a]), Combined([]), Noop()):
        done = nemesis.invoke(inv("clock-bump", {"n1": 5.0}))
        assert (done.type, done.error) == ("fail", "no nemesis handles 'clock-bump'")  # it certainly did not happen
        assert done.f == "clock-bump" and done.value == {"n1": 5.0} and done.process == NEMESIS
    assert a.got == []


def test_two_members_declaring_one_f_are_refused_naming_both():
    with pytest.raises(BadArgument, match=r"^nemeses a and b both handle 'cut'; use only one of them$"):
        Combined([Member("a", fs=("cut", "mend")), Member("b", fs=("cut", "join"))])


def test_noop_members_drop_out_and_nothing_is_left_to_plan():
    a = Member("a")
    assert Combined([Noop(), a, Noop()]).members == [a]
    empty = Combined([Noop()])
    assert empty.fs == frozenset() and empty.heal_ops() == []
    assert empty.next_fault(random.Random(1)) is None


def test_faults_are_drawn_from_every_member_by_the_rng_alone():
    c = Combined([Member("a"), Member("b"), Member("c")])
    draws = [c.next_fault(random.Random(9)).start for _ in range(3)]
    assert draws[0] == draws[1] == draws[2]  # a fresh rng of one seed: one draw
    rng = random.Random(4)
    starts = {c.next_fault(rng).start[0] for _ in range(60)}
    assert starts == {"start-a", "start-b", "start-c"}
    assert c.heal_ops() == [("stop-a", None), ("stop-b", None), ("stop-c", None)]  # the final heal asks all


def test_setup_reaches_every_member_and_events_reach_the_reactive_ones():
    plain, r1, r2 = Member("p"), Reacting("r1"), Reacting("r2")
    c = Combined([plain, r1, r2])
    ctx = NemesisContext(spec=None, cluster=None)
    c.setup(ctx)
    assert plain.ctx is ctx and r1.ctx is ctx and r2.ctx is ctx
    event = Op(time_ns=5, process=3, type="ok", f="acquire")
    assert [(p.f, p.value) for p in c.on_event(7.5, event)] == [("start-r1", "acquire"), ("start-r2", "acquire")]
    assert Combined([plain]).on_event(7.5, event) == []


def test_teardown_heals_every_member_even_when_one_fails():
    a, bad, b = Member("a"), Member("bad", teardown_error="iptables said no"), Member("b")
    c = Combined([a, bad, b])
    with pytest.raises(RuntimeError, match="^bad: iptables said no$"):
        c.teardown()
    assert (a.torn_down, bad.torn_down, b.torn_down) == (1, 1, 1)


def nem(t: int, type_: str, f: str, value=None) -> Op:
    return Op(time_ns=t, process=NEMESIS, type=type_, f=f, value=value)


def test_fault_intervals_are_the_faults_that_took_effect_until_their_heal():
    history = [nem(10, "invoke", "partition", "plan"), nem(12, "ok", "partition", "cut n1"),
               Op(time_ns=13, process=0, type="invoke", f="acquire"),
               nem(20, "invoke", "heal"), nem(21, "ok", "heal"),
               nem(30, "invoke", "clock-bump", {"n1": 5}), nem(31, "fail", "clock-bump"),  # never took effect
               nem(40, "invoke", "clock-strobe"), nem(41, "info", "clock-strobe", "maybe"),  # may have: counted
               nem(50, "invoke", "clock-reset"), nem(52, "ok", "clock-reset"),
               nem(60, "invoke", "pause", ["n2"]), nem(61, "ok", "pause", ["n2"])]  # never resumed
    history = [o.with_index(i) for i, o in enumerate(history)]
    assert fault_intervals(history) == [
        {"f": "partition", "start_ns": 10, "end_ns": 21, "value": "cut n1"},
        {"f": "clock-strobe", "start_ns": 40, "end_ns": 52, "value": "maybe"},
        {"f": "pause", "start_ns": 60, "end_ns": None, "value": ["n2"]},
    ]


def test_a_reactive_member_does_not_end_the_composed_schedule():
    """Issue 37: composed with a purely reactive nemesis (kill-holder), a periodic one's
    schedule stopped at the first slot that drew the reactive one (plan() ends at None): a
    battery "with faults every 3 s" had one or two. Now every slot of the fault phase has one."""
    import random

    from harness.core.contracts.nemesis import Fault
    from harness.engine.generator import plan
    from nemesis.base import Combined

    class Slow:
        name, fs = "slow-link", frozenset({"slow-link", "fast-link"})

        def next_fault(self, rng):
            return Fault(start=("slow-link", {}), stop=("fast-link", None))

        def heal_ops(self):
            return [("fast-link", None)]

    class Reactive:
        name, fs = "kill-holder", frozenset({"kill-holder", "respawn-holder"})

        def next_fault(self, rng):
            return None

        def heal_ops(self):
            return []

    alone = [p.at for p in plan(Slow(), 3, 57.0, 3.0) if p.f == "slow-link"]
    for seed in range(20):
        with_reactive = [p.at for p in plan(Combined([Slow(), Reactive()]), seed, 57.0, 3.0) if p.f == "slow-link"]
        assert len(with_reactive) >= 8, (seed, with_reactive)
    assert Combined([Reactive()]).next_fault(random.Random(0)) is None
    # members that all plan: the same draws as before (one choice per slot, then its fault)
    class Before(Combined):
        def next_fault(self, rng):
            return rng.choice(self.members).next_fault(rng)

    both = [Slow(), Slow()]
    assert [(p.at, p.f) for p in plan(Combined(both[:1]), 3, 57.0, 3.0)] == \
        [(p.at, p.f) for p in plan(Before(both[:1]), 3, 57.0, 3.0)]
    assert len(alone) >= 8
