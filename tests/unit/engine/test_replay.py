"""The recorded schedule of a run (harness/engine/replay.py) and its replay by the generator:
periodic faults at their offsets, reactive ones at their first trigger at or after theirs."""

import json

import pytest

from harness.core.contracts.nemesis import NemesisContext, Planned
from harness.core.errors import BadArgument
from harness.core.history import NEMESIS, Op
from harness.core.spec import TestSpec
from harness.engine.generator import Context, FaultSchedule, Pending, replayed
from harness.engine.replay import Recorded, Schedule, load, recorded_faults, words
from nemesis.base import Combined
from nemesis.process import PauseHolder

S = 1_000_000_000


def op(t: float, process, type_: str, f: str, value=None, **kw) -> Op:
    return Op(time_ns=int(t * S), process=process, type=type_, f=f, value=value, **kw)


def history() -> list[Op]:
    """A worker from t=0; a clock bump at 2 s healed at 5 s; a pause-holder that missed at 6 s;
    one at 7 s resumed at 11 s; a partition at 12 s healed only by the final heal at 20 s."""
    ops = [op(0.0, 0, "invoke", "acquire"), op(0.1, 0, "ok", "acquire")]
    for t, f, v, done, heal in ((2, "clock-bump", {"n1": 5.0, "n2": 5.0}, "ok", (5, "clock-reset", ["n1", "n2"])),
                                (6, "pause-holder", {"worker": 1}, "fail", None),
                                (7, "pause-holder", {"worker": 2}, "ok", (11, "resume-holder", {"worker": 2})),
                                (12, "partition", {"shape": "halves"}, "info", (20, "heal", None))):
        ops += [op(t, NEMESIS, "invoke", f, v), op(t + 0.01, NEMESIS, done, f, v)]
        if heal:
            ops += [op(heal[0], NEMESIS, "invoke", heal[1], heal[2]), op(heal[0] + 0.01, NEMESIS, "ok", heal[1], heal[2])]
    return sorted(ops, key=lambda o: o.time_ns)


def test_recorded_faults_pair_each_applied_fault_with_its_heal_and_skip_misses():
    got = recorded_faults(history())
    assert [(r.f, r.at, r.duration, r.heal) for r in got] == [
        ("clock-bump", 2.0, 3.0, "clock-reset"), ("pause-holder", 7.0, 4.0, "resume-holder"),
        ("partition", 12.0, 8.0, "heal")]
    assert got[0].value == {"n1": 5.0, "n2": 5.0} and got[0].heal_value == ["n1", "n2"]
    assert [r.reactive for r in got] == [False, True, False]
    assert words(got[:1]) == "1 fault: clock-bump of n1 +5 s, n2 +5 s at 2 s for 3 s"


def test_a_fault_never_healed_lasts_to_the_end_of_the_history():
    h = [op(0, 0, "invoke", "acquire"), op(1, NEMESIS, "invoke", "kill", ["n1"]), op(1.2, NEMESIS, "ok", "kill", ["n1"]),
         op(9, 0, "ok", "acquire")]
    (r,) = recorded_faults(h)
    assert (r.f, r.at, r.duration, r.heal) == ("kill", 1.0, 8.0, "restart")


def test_schedule_round_trips_through_json():
    s = Schedule(of="store/x/1", faults=tuple(recorded_faults(history())))
    assert Schedule.from_dict(json.loads(json.dumps(s.to_dict()))) == s


def test_replayed_plans_periodic_faults_at_their_offsets_and_leaves_reactive_ones_to_triggers():
    ops = replayed(recorded_faults(history()), [("heal", None), ("clock-reset", ["n1", "n2", "n3"])], 18.0)
    assert [(p.at, p.f, p.phase) for p in ops] == [
        (2.0, "clock-bump", "fault"), (5.0, "clock-reset", "heal"), (12.0, "partition", "fault"),
        (18.0, "heal", "final"), (18.0, "clock-reset", "final")]  # the partition's heal at 20 s is past the phase


class Workers:
    paused: set = set()


def pause_holder_schedule(faults) -> tuple[PauseHolder, FaultSchedule]:
    spec = TestSpec(backend="redis", nemesis=("pause-holder",), time_limit=30, recovery=3, concurrency=3)
    n = PauseHolder()
    n.setup(NemesisContext(spec=spec, cluster=None, workers=Workers()))
    return n, FaultSchedule(Combined([n]), 1, 27.0, 3.0, replay=faults)


def hold(schedule: FaultSchedule, t: float, process: int) -> list[Planned]:
    """A holder's ok acquire then ok read at t (pause-holder's trigger); what it planned."""
    for o in (op(t, process, "ok", "acquire"), op(t, process, "ok", "read")):
        schedule.update(Context(time=t), o)
    out = list(schedule.reactive)
    schedule.reactive.clear()
    return out


def test_a_reactive_fault_starts_at_its_first_trigger_at_or_after_its_offset_for_its_duration():
    r = Recorded(f="pause-holder", at=7.0, duration=1.5, value={"worker": 2}, heal="resume-holder")
    n, s = pause_holder_schedule([r])
    assert hold(s, 1.0, 0) == []  # before its offset: the nemesis's own timing would allow it
    (start,) = hold(s, 7.4, 1)  # the first trigger at or after 7 s
    assert (start.f, start.at, start.value["worker"]) == ("pause-holder", 7.4, 1)
    assert start.value["seconds"] == 1.5  # what the replay applies, not pause_multiple x TTL (4 s)
    s.update(Context(time=7.45), op(7.45, NEMESIS, "ok", "pause-holder", start.value))
    (heal,) = s.reactive
    assert (heal.f, heal.at) == ("resume-holder", 8.9)  # 1.5 s after its start, not pause_multiple x TTL
    assert heal.value["seconds"] == 1.5
    n.paused.clear()
    s.reactive.clear()
    assert hold(s, 12.0, 2) == []  # the one recorded fault was replayed: no more


def test_a_reactive_fault_that_missed_stays_due():
    r = Recorded(f="pause-holder", at=2.0, duration=1.0, value={}, heal="resume-holder")
    n, s = pause_holder_schedule([r])
    (start,) = hold(s, 3.0, 0)
    n.paused.clear()  # its invoke found the holder gone (PauseHolder.invoke lets it go)
    s.update(Context(time=3.01), op(3.01, NEMESIS, "fail", "pause-holder", start.value))
    assert s.reactive == [] and s.is_due("pause-holder", 3.5)
    (again,) = hold(s, 4.0, 1)
    assert again.at == 4.0


def test_a_replay_plans_nothing_of_its_own():
    n, s = pause_holder_schedule([])
    assert [p.phase for p in s.ops] == ["final"]
    assert s.op(Context(time=1.0)) == Pending(until=27.0)


def write_run(d, hist, spec=None):
    d.mkdir(parents=True, exist_ok=True)
    (d / "spec.json").write_text(json.dumps(spec or {"backend": "redis", "nemesis": ["pause-holder"]}))
    (d / "history.jsonl").write_text("".join(json.dumps({k: v for k, v in o.to_dict().items() if k != "index"}) + "\n" for o in hist))


def test_load_refuses_what_cannot_be_replayed_in_one_sentence(tmp_path):
    with pytest.raises(BadArgument, match="is not a run directory"):
        load(tmp_path / "nope")
    write_run(tmp_path / "calm", [op(0, 0, "invoke", "acquire"), op(1, 0, "ok", "acquire")])
    with pytest.raises(BadArgument, match="applied no faults"):
        load(tmp_path / "calm")
    (tmp_path / "torn").mkdir()
    (tmp_path / "torn" / "spec.json").write_text("{}")
    (tmp_path / "torn" / "history.jsonl").write_text('{"time_ns": 1}\n{"process": 0}\n')
    with pytest.raises(BadArgument):
        load(tmp_path / "torn")
    write_run(tmp_path / "ok", history(), {"backend": "redis", "nemesis": ["clock-skew", "pause-holder", "partition"]})
    spec, faults = load(tmp_path / "ok")
    assert spec.backend == "redis" and len(faults) == 3


def test_load_reads_faults_by_the_installed_nemeses_never_by_the_run_dirs_facts(tmp_path):
    """A kill op in a pause-holder run is none of its nemeses' doing: refused, not replayed;
    facts that declare "kill" a heal of something (so a kill would pass for one) change nothing."""
    write_run(tmp_path / "odd", history() + [op(21, NEMESIS, "invoke", "kill", ["store"]),
                                             op(21.1, NEMESIS, "ok", "kill", ["store"])],
              {"backend": "redis", "nemesis": ["clock-skew", "pause-holder", "partition"],
               "facts": {"faults": [{"f": "pause-holder", "heal": "kill"}]}})
    with pytest.raises(BadArgument, match="'kill' op.*none of its nemeses"):
        load(tmp_path / "odd")
