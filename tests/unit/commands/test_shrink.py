"""chaos run --replay and chaos shrink (harness/commands/shrink.py) without servers: what they
refuse, in one sentence and exit 254, and what counts as the same finding."""

import json

import pytest

from harness.commands.shrink import findings, replay_spec, reproduces
from harness.core.errors import BadArgument
from harness.engine.replay_input import Here
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
    """The workload and seed come from the run dir; the store from the command line (its
    default, never the store the run dir's spec names)."""
    d = run_dir(tmp_path)
    spec, schedule = replay_spec(str(d))
    assert (spec.backend, spec.seed, spec.time_limit, spec.store) == ("redis", 3, 15, "store")
    assert schedule.of == str(d) and [(r.f, r.at, r.duration) for r in schedule.faults] == [("pause-holder", 2.0, 4.0)]
    spec, _ = replay_spec(str(d), Here(store=str(tmp_path / "other")), time_limit=9.0)
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
    assert out[-1].endswith(f"chaos run --replay {tmp_path / 'replay2'} --store store")  # a line that runs as printed
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
    # the runs that finished, then the three the interrupt left undone: errors, never passes
    assert [c.get("name") for c in cases] == ["run 1 of 5 (seed 3)", "run 2 of 5 (seed 3)", "run 3 of 5",
                                              "run 4 of 5", "run 5 of 5"]
    assert "interrupted" in cases[1].find("error").text
    assert all("not run" in c.find("error").text for c in cases[2:])


def hostile_run_dir(tmp_path, target="store"):
    """A run dir as a hostile user would hand it over: an external client whose command would
    leave a marker, a store outside (with a page of someone else's), kill ops aimed at
    `target` (the counter's store server by default), and a finding to shrink."""
    marker, outside = tmp_path / "marker", tmp_path / "outside"
    outside.mkdir()
    (outside / "index.html").write_text("someone else's page")
    d = tmp_path / "copied" / "run"
    d.mkdir(parents=True)
    (d / "spec.json").write_text(json.dumps({
        "backend": "external", "nemesis": ["kill"], "time_limit": 6, "recovery": 1, "concurrency": 2, "seed": 5,
        "options": {"command": f"sh -c 'touch {marker}'", "servers": "valkey:1"}, "store": str(outside)}))
    ops = HISTORY[:2] + [
        {"time_ns": 10**9, "process": "nemesis", "type": "invoke", "f": "kill", "value": [target]},
        {"time_ns": 10**9 + 1, "process": "nemesis", "type": "ok", "f": "kill", "value": [target]},
        {"time_ns": 2 * 10**9, "process": "nemesis", "type": "invoke", "f": "restart", "value": None},
        {"time_ns": 2 * 10**9 + 1, "process": "nemesis", "type": "ok", "f": "restart", "value": [target]}]
    (d / "history.jsonl").write_text("".join(json.dumps(o) + "\n" for o in ops))
    (d / "results.json").write_text(json.dumps({"summary": {"valid": False, "violations": 0, "lost_updates": 1}}))
    return d, marker, outside


@pytest.mark.parametrize("cmd", [("run", "--replay"), ("shrink",)])
def test_a_hostile_run_dir_runs_no_command_writes_nowhere_and_its_store_fault_is_refused(tmp_path, cmd):
    """Before any server starts: without --client, one sentence asking for it; with it, one
    sentence refusing the kill of the store server. Nothing is run, nothing written."""
    d, marker, outside = hostile_run_dir(tmp_path)
    mine = tmp_path / "mine"
    r = chaos(*cmd, str(d), "--store", str(mine), timeout=60)
    assert r.returncode == 254 and len(r.stderr.strip().splitlines()) == 1, r.stdout + r.stderr
    assert "was run with an external client" in r.stderr and "give it with --client CMD" in r.stderr
    r = chaos(*cmd, str(d), "--store", str(mine), "--client", "python3 my_client.py", timeout=60)
    assert r.returncode == 254 and len(r.stderr.strip().splitlines()) == 1, r.stdout + r.stderr
    assert "aims kill at the store server, which holds the counter" in r.stderr
    assert not marker.exists() and not mine.exists()
    assert sorted(p.name for p in outside.iterdir()) == ["index.html"]
    assert (outside / "index.html").read_text() == "someone else's page"
    assert sorted(p.name for p in d.iterdir()) == ["history.jsonl", "results.json", "spec.json"]


def test_a_replay_aimed_at_a_node_the_cluster_lacks_is_refused_before_anything_starts(tmp_path):
    d, _, _ = hostile_run_dir(tmp_path, target="n2")  # valkey:1 has n1 only
    r = chaos("run", "--replay", str(d), "--client", "python3 my_client.py", "--store", str(tmp_path / "mine"))
    assert r.returncode == 254 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "aims kill at 'n2', which the cluster a replay of it brings up does not have (its lock nodes are n1)" \
        in r.stderr and not (tmp_path / "mine").exists()


def test_replay_takes_where_and_how_from_the_command_line_and_refuses_a_client_it_has_no_use_for(tmp_path):
    d = run_dir(tmp_path)
    r = chaos("run", "--replay", str(d), "--client", "python3 my_client.py")
    assert r.returncode == 254 and "ran backend redis; drop --client" in r.stderr
    r = chaos("shrink", str(run_dir(tmp_path, name="found", summary={"valid": False, "violations": 1})),
              "--client", "python3 my_client.py")
    assert r.returncode == 254 and "ran backend redis; drop --client" in r.stderr


def test_shrink_reads_no_results_json_through_a_link_out_of_the_run_dir(tmp_path):
    d = run_dir(tmp_path)
    (tmp_path / "elsewhere.json").write_text(json.dumps({"summary": {"valid": False, "violations": 1}}))
    (d / "results.json").symlink_to(tmp_path / "elsewhere.json")
    r = chaos("shrink", str(d), "--store", str(tmp_path / "mine"))
    assert r.returncode == 254 and "outside" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_a_shrink_whose_finding_never_reproduces_says_so_and_exits_2(tmp_path, monkeypatch, capsys):
    """Replays simulated, none showing the finding: the original schedule is replayed too (its
    rate measured, never assumed), and the command ends "nothing reproduced", exit 2, not 0."""
    from harness.commands import shrink as cmd
    from harness.engine import runner

    d = run_dir(tmp_path, summary={"valid": False, "violations": 1, "violations_by_cause": {"overran-paused": 1}})
    calls = []

    class Outcome:
        def __init__(self, n):
            self.summary = {"valid": True, "violations": 0}
            self.run_dir, self.interrupted, self.signal = tmp_path / f"replay{n}", False, None
            self.run_dir.mkdir()

    monkeypatch.setattr(runner, "run", lambda spec, progress, replay: calls.append(replay) or Outcome(len(calls)))
    rv = cmd.shrink.main([str(d), "--trials", "2", "--rate", "1", "--store", str(tmp_path / "s")],
                         standalone_mode=False)
    assert rv == 2
    assert calls[-2].faults == calls[-1].faults and [f.at for f in calls[-1].faults] == [2.0], \
        "the original schedule is replayed its full trials"
    err = capsys.readouterr().err
    assert "chaos shrink: nothing reproduced: " in err and "overran-paused showed in none of the" in err
    doc = json.loads((d / "shrink.json").read_text())
    assert doc["best_run"] == str(d.resolve()) and doc["best_outcomes"] == [False, False]
