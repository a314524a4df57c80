"""The pure part of pause-holder (nemesis/process.py PauseHolder): which history events
plan a pause or a resume, and what it makes of a pause that landed or missed.

The workers here are a plain test double that records what it is asked to do; stopping
real worker processes is tested by tests/integration/nemesis/test_pause.py."""

from __future__ import annotations

import pytest

from harness.engine.generator import Context
from harness.core.history import NEMESIS, Op
from harness.core.spec import TestSpec
from harness.core.contracts.nemesis import NemesisContext
from harness.core.errors import BadArgument
from nemesis.process import PauseHolder

TTL_MS = 1000
INTERVAL = 2.0  # cooldown between pauses; the first may come after half of it
FAULT_PHASE = 27.0  # time_limit 30 - recovery 3


class Workers:
    """Records pause/resume; `holding` is what holding_lock answers after a stop."""

    def __init__(self, holding: bool = True):
        self.paused: set[int] = set()
        self.calls: list[tuple[str, int]] = []
        self.holding = holding

    def pause(self, index: int) -> bool:
        self.calls.append(("pause", index))
        self.paused.add(index)
        return True

    def holding_lock(self, index: int) -> bool:
        return self.holding

    def resume(self, index: int) -> None:
        self.calls.append(("resume", index))
        self.paused.discard(index)


def holder(workers: Workers | None = None, renew: bool = False, **options) -> PauseHolder:
    spec = TestSpec(backend="redis", nemesis=("pause-holder",), ttl_ms=TTL_MS, nemesis_interval=INTERVAL,
                    time_limit=30, recovery=3, concurrency=3, renew=renew, options=options).validate()
    nem = PauseHolder()
    nem.setup(NemesisContext(spec=spec, cluster=None, workers=workers or Workers()))
    return nem


def op(process, type_: str, f: str, value=None) -> Op:
    return Op(time_ns=1, process=process, type=type_, f=f, value=value)


def see(nem: PauseHolder, t: float, *events: Op) -> list:
    out = []
    for e in events:
        out += nem.on_event(Context(time=t), e)
    return out


def acquired(p) -> list[Op]:
    return [op(p, "invoke", "acquire"), op(p, "ok", "acquire")]


def test_a_holders_ok_read_plans_a_pause_of_its_worker():
    nem = holder()
    assert see(nem, 1.5, *acquired(4), op(4, "invoke", "read")) == []
    (p,) = see(nem, 1.5, op(4, "ok", "read", value=3))
    assert (p.at, p.f, p.phase) == (1.5, "pause-holder", "fault")
    assert p.value == {"process": 4, "worker": 1, "seconds": 2.0}  # process 4 of 3 workers: worker 1; 2 x TTL


@pytest.mark.parametrize("why, t, events", [
    ("not a holder", 1.5, [op(4, "ok", "read")]),
    ("a failed acquire holds nothing", 1.5, [op(4, "invoke", "acquire"), op(4, "fail", "acquire"), op(4, "ok", "read")]),
    ("released", 1.5, [*acquired(4), op(4, "invoke", "release"), op(4, "ok", "read")]),
    ("the read is not ok", 1.5, [*acquired(4), op(4, "info", "read")]),
    ("a write, not a read", 1.5, [*acquired(4), op(4, "ok", "write")]),
    ("too early: before half an interval", 0.9, [*acquired(4), op(4, "ok", "read")]),
    ("too late: the pause would outlast the fault phase", FAULT_PHASE - 2.0, [*acquired(4), op(4, "ok", "read")]),
    ("not a worker", 1.5, [op("final", "invoke", "acquire"), op("final", "ok", "acquire"), op("final", "ok", "read")]),
    ("another nemesis's op", 1.5, [op(NEMESIS, "ok", "partition"), op(NEMESIS, "ok", "resume-holder")]),
])
def test_no_pause_is_planned(why, t, events):
    assert see(holder(), t, *events) == [], why


def test_one_pause_at_a_time_then_a_cooldown():
    workers = Workers()
    nem = holder(workers)
    (pause,) = see(nem, 1.5, *acquired(0), *acquired(1), op(0, "ok", "read"))
    assert see(nem, 1.6, op(1, "ok", "read")) == []  # the first is still paused
    (resume,) = see(nem, 1.7, op(NEMESIS, "ok", "pause-holder", pause.value))
    assert (resume.at, resume.f, resume.phase, resume.value) == (3.7, "resume-holder", "heal", pause.value)
    nem.invoke(op(NEMESIS, "invoke", "resume-holder", pause.value))
    # resumed; the next may come pause + cooldown after the first was planned: 1.5 + 2 + 2
    assert see(nem, 5.4, op(1, "ok", "read")) == []
    (nxt,) = see(nem, 5.5, op(1, "ok", "read"))
    assert nxt.value["worker"] == 1


def test_a_pause_that_missed_the_critical_section_is_let_go_and_the_next_holder_aimed_at():
    workers = Workers(holding=False)  # released before the stop landed
    nem = holder(workers)
    (pause,) = see(nem, 1.5, *acquired(2), op(2, "ok", "read"))
    done = nem.invoke(op(NEMESIS, "invoke", "pause-holder", pause.value))
    assert done.type == "fail" and done.error == "missed: worker 2 had released before the stop landed"
    assert workers.calls == [("pause", 2), ("resume", 2)] and workers.paused == set()
    assert see(nem, 1.6, done) == []  # no resume to plan ...
    (again,) = see(nem, 1.6, *acquired(1), op(1, "ok", "read"))  # ... and no cooldown either
    assert again.value["worker"] == 1


def test_a_pause_that_landed_is_ok_and_the_resumes_let_every_paused_worker_go():
    workers = Workers()
    nem = holder(workers)
    (pause,) = see(nem, 1.5, *acquired(5), op(5, "ok", "read"))
    assert nem.invoke(op(NEMESIS, "invoke", "pause-holder", pause.value)).type == "ok"
    assert workers.paused == {2}
    planned = nem.invoke(op(NEMESIS, "invoke", "resume-holder", pause.value))
    assert planned.type == "ok" and planned.value == pause.value and workers.paused == set()
    workers.paused = {0, 1}  # left paused, say by a pause that never completed
    final = nem.invoke(op(NEMESIS, "invoke", "resume-holder", None))  # the final heal names what it resumed
    assert final.value == {"workers": [0, 1]} and workers.paused == set()
    workers.paused = {2}
    nem.teardown()
    assert workers.paused == set()


def test_the_pause_lasts_pause_multiple_ttls():
    (p,) = see(holder(pause_multiple="0.5"), 1.5, *acquired(0), op(0, "ok", "read"))
    assert p.value["seconds"] == 0.5
    nem = holder(pause_multiple=3)
    (p,) = see(nem, 1.5, *acquired(0), op(0, "ok", "read"))
    (resume,) = see(nem, 2.0, op(NEMESIS, "ok", "pause-holder", p.value))
    assert p.value["seconds"] == 3.0 and resume.at == 5.0


def test_after_renews_pauses_a_holder_at_its_kth_ok_renew_of_one_hold():
    nem = holder(renew=True, after_renews=2)
    renew = [op(0, "invoke", "renew"), op(0, "ok", "renew")]
    assert see(nem, 1.5, *acquired(0), op(0, "ok", "read"), *renew) == []  # with --renew, the read aims at nothing
    (p,) = see(nem, 1.6, *renew)
    assert p.value == {"process": 0, "worker": 0, "seconds": 2.0, "renews": 2}


def test_after_renews_needs_holders_that_renew():
    with pytest.raises(BadArgument, match="pause-holder -o after_renews=2 needs holders that renew: add --renew"):
        holder(after_renews=2)
