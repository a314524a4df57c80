"""chaos run --replay and chaos shrink (harness/commands/shrink.py) without servers: what they
refuse, in one sentence and exit 254, and what counts as the same finding."""

import json

import pytest

from harness.commands.shrink import findings, replay_spec, reproduces
from harness.core.errors import BadArgument
from tests.conftest import chaos

HISTORY = [
    {"time_ns": 0, "process": 0, "type": "invoke", "f": "acquire", "key": "chaos-lock"},
    {"time_ns": 10**8, "process": 0, "type": "ok", "f": "acquire", "key": "chaos-lock"},
    {"time_ns": 2 * 10**9, "process": "nemesis", "type": "invoke", "f": "pause-holder", "value": {"worker": 0}},
    {"time_ns": 2 * 10**9 + 1, "process": "nemesis", "type": "ok", "f": "pause-holder", "value": {"worker": 0}},
    {"time_ns": 6 * 10**9, "process": "nemesis", "type": "invoke", "f": "resume-holder", "value": {"worker": 0}},
    {"time_ns": 6 * 10**9 + 1, "process": "nemesis", "type": "ok", "f": "resume-holder", "value": {"worker": 0}},
]


def run_dir(tmp_path, name="run", history=HISTORY, summary=None):
    d = tmp_path / name
    d.mkdir()
    (d / "spec.json").write_text(json.dumps({"backend": "redis", "nemesis": ["pause-holder"], "time_limit": 15,
                                             "seed": 3, "store": str(tmp_path / "store")}))
    (d / "history.jsonl").write_text("".join(json.dumps(o) + "\n" for o in history))
    if summary is not None:
        (d / "results.json").write_text(json.dumps({"summary": summary}))
    return d


def test_findings_name_the_causes_and_the_writes():
    assert findings({"valid": True}) == frozenset()
    assert findings({"valid": "unknown"}) == frozenset()
    assert findings({"valid": False, "violations": 2, "violations_by_cause": {"overran-paused": 2}}) == \
        {"violation:overran-paused"}
    assert findings({"valid": False, "violations": 0, "stale_writes_accepted": 1}) == {"stale-write"}
    assert findings({"valid": False}) == {"invalid"}


def test_the_same_finding_is_a_cause_of_the_violations_when_there_were_violations():
    target = frozenset({"violation:early-server-clock", "stale-write", "lost-update"})
    assert reproduces(target, frozenset({"violation:early-server-clock"}))
    assert not reproduces(target, frozenset({"lost-update", "stale-write"}))
    assert not reproduces(target, frozenset({"violation:overran-paused"}))
    assert reproduces(frozenset({"stale-write"}), frozenset({"stale-write", "lost-update"}))


def test_replay_spec_keeps_the_options_and_seed_and_names_the_run(tmp_path):
    d = run_dir(tmp_path)
    spec, schedule = replay_spec(str(d))
    assert (spec.backend, spec.seed, spec.time_limit, spec.store) == ("redis", 3, 15, str(tmp_path / "store"))
    assert schedule.of == str(d) and [(r.f, r.at, r.duration) for r in schedule.faults] == [("pause-holder", 2.0, 4.0)]
    spec, _ = replay_spec(str(d), store=str(tmp_path / "other"), time_limit=9.0)
    assert spec.store == str(tmp_path / "other") and spec.time_limit == 9.0


def test_a_replay_of_a_replay_replays_what_it_was_asked_to(tmp_path):
    d = run_dir(tmp_path)
    spec = json.loads((d / "spec.json").read_text())
    asked = {"f": "pause-holder", "at": 1.5, "duration": 0.5, "value": None, "heal": "resume-holder", "heal_value": None}
    spec["facts"] = {"replay": {"of": "elsewhere", "faults": [asked]}}
    (d / "spec.json").write_text(json.dumps(spec))
    _, schedule = replay_spec(str(d))
    assert [(r.at, r.duration) for r in schedule.faults] == [(1.5, 0.5)] and schedule.of == str(d)


@pytest.mark.parametrize("make, words", [
    (lambda t: t / "missing", "does not exist"),
    (lambda t: run_dir(t, history=HISTORY[:2]), "applied no faults"),
    (lambda t: run_dir(t, history=[{"time_ns": 1, "process": 0}]), "history.jsonl line 1"),
])
def test_replay_refuses_in_one_sentence(tmp_path, make, words):
    r = chaos("run", "--replay", str(make(tmp_path)))
    assert r.returncode == 254, r.stderr
    assert words in r.stderr and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_replay_refuses_a_flag_that_would_change_the_recorded_options(tmp_path):
    r = chaos("run", "--replay", str(run_dir(tmp_path)), "--seed", "4")
    assert r.returncode == 254 and "drop --seed" in r.stderr


def test_shrink_refuses_a_valid_run_in_one_sentence(tmp_path):
    r = chaos("shrink", str(run_dir(tmp_path, summary={"valid": True, "violations": 0})))
    assert r.returncode == 254, r.stderr
    assert "was valid" in r.stderr and "nothing to shrink" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_shrink_refuses_what_is_not_a_run(tmp_path):
    r = chaos("shrink", str(tmp_path / "missing"))
    assert r.returncode == 254 and "does not exist" in r.stderr
    with pytest.raises(BadArgument):
        replay_spec(str(tmp_path / "missing"))


def test_repeat_counts_the_invalid_runs_and_keeps_going(monkeypatch, capsys):
    import io

    from harness.commands import shrink as cmd
    from harness.engine import runner

    verdicts = iter([False, True, False])

    class Outcome:
        def __init__(self, valid):
            self.summary, self.run_dir, self.interrupted, self.signal = {"valid": valid}, "store/x/1", False, None
    monkeypatch.setattr(runner, "run", lambda spec, progress, replay: Outcome(next(verdicts)))
    out = io.StringIO()
    code, summaries = cmd.repeat(object(), 3, None, out)
    assert code == 1 and len(summaries) == 3
    assert out.getvalue().splitlines()[-1] == "invalid in 2 of 3"


def test_shrink_searches_with_replays_and_ctrl_c_keeps_the_best_so_far(tmp_path, monkeypatch, capsys):
    """Replays simulated: a candidate reproduces while it keeps the first pause; the third
    replay is interrupted (Ctrl-C): shrink.json is written, the last line names the best so far, 130."""
    from harness.commands import shrink as cmd
    from harness.engine import runner

    hist = HISTORY + [dict(o, time_ns=o["time_ns"] + 6 * 10**9) for o in HISTORY[2:]]
    d = run_dir(tmp_path, history=hist, summary={"valid": False, "violations": 1,
                                                 "violations_by_cause": {"overran-paused": 1}})
    calls = []

    class Outcome:
        def __init__(self, n, replay):
            first = any(r.at == 2.0 for r in replay.faults)
            self.summary = {"valid": not first, "violations": int(first),
                            "violations_by_cause": {"overran-paused": 1} if first else {}}
            self.run_dir, self.interrupted, self.signal = tmp_path / f"replay{n}", n == 3, None
            self.run_dir.mkdir()

    def fake_run(spec, progress, replay):
        calls.append(replay)
        return Outcome(len(calls), replay)
    monkeypatch.setattr(runner, "run", fake_run)
    rv = cmd.shrink.main([str(d), "--trials", "2", "--rate", "1"], standalone_mode=False)
    assert rv == 130 and len(calls) == 3
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1].startswith("smallest: 1 fault: pause-holder at 2 s for 4 s") and "INTERRUPTED" in out[-1]
    assert out[-1].endswith(f"chaos run --replay {tmp_path / 'replay2'}")
    doc = json.loads((d / "shrink.json").read_text())
    assert doc["interrupted"] and doc["best"]["faults"][0]["at"] == 2.0 and doc["candidates"][0]["kept"]


def test_repeat_with_junit_writes_one_testcase_per_run(tmp_path, monkeypatch):
    """--junit with --repeat 3: one file, three cases, each with its run's verdict and run dir;
    a repeat cut short by Ctrl-C has the runs that finished."""
    import io
    import signal
    import xml.etree.ElementTree as ET

    from harness.commands import shrink as cmd
    from harness.engine import runner

    runs = iter([{"valid": False, "violations": 2, "violations_by_cause": {"overran-paused": 2}, "duration_s": 9.5},
                 {"valid": True, "violations": 0, "duration_s": 9.1},
                 {"valid": "unknown", "violations": None, "unknown_reason": "the cluster never came up"}])

    class Outcome:
        def __init__(self, n, summary, interrupted=False):
            self.run_dir, self.interrupted = f"store/redis-pause-holder/{n}", interrupted
            self.signal = signal.SIGINT if interrupted else None
            self.summary = {"backend": "redis", "nemesis": ["pause-holder"], "seed": 3, "run_dir": self.run_dir, **summary}
    calls = []
    monkeypatch.setattr(runner, "run", lambda spec, progress, replay: calls.append(1) or Outcome(len(calls), next(runs)))
    junit = tmp_path / "j.xml"
    code, _ = cmd.repeat(object(), 3, None, io.StringIO(), str(junit))
    assert code == 1
    suite = ET.parse(junit).getroot().find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "1", "1")
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == [f"run {n} of 3 (seed 3)" for n in (1, 2, 3)]
    assert {c.get("classname") for c in cases} == {"chaoslock.redis.pause-holder"}
    failure = cases[0].find("failure")
    assert "violations=2" in failure.get("message") and "overran-paused=2" in failure.text
    assert "run_dir=store/redis-pause-holder/1" in failure.text and cases[0].get("time") == "9.500"
    assert cases[1].find("failure") is None and cases[1].find("error") is None
    assert "the cluster never came up" in cases[2].find("error").get("message")

    calls.clear()
    runs = iter([{"valid": True, "violations": 0}, {"valid": "unknown", "interrupted": True}])
    monkeypatch.setattr(runner, "run", lambda spec, progress, replay: calls.append(1) or
                        Outcome(len(calls), next(runs), interrupted=len(calls) == 2))
    code, _ = cmd.repeat(object(), 5, None, io.StringIO(), str(junit))
    assert code == 130
    cases = ET.parse(junit).getroot().findall("testsuite/testcase")
    assert [c.get("name") for c in cases] == ["run 1 of 5 (seed 3)", "run 2 of 5 (seed 3)"]
    assert "interrupted" in cases[1].find("error").text
