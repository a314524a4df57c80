"""`chaos audit` without servers: bad input is one sentence and exit 254 with nothing started;
the card (terminal, audit.json, audit.html, JUnit) and the exit code come from the runs'
results, here handed in by a stand-in for runner.run (the battery's own tests are
tests/unit/engine/test_audit.py); an interrupted run ends the audit with 130 or 143, card written."""

from __future__ import annotations

import json
import signal
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.commands import audit as cmd
from harness.engine import audit as plan
from harness.engine.runner import RunOutcome
from tests.conftest import chaos

EXAMPLE = "python3 clients/example-redis/client.py"


@pytest.mark.parametrize("args, words", [
    ((), "name what to audit"),
    (("--client", EXAMPLE), "--client needs --servers"),
    (("--backend", "redis", "--servers", "valkey:1"), "--servers goes with --client"),
    (("--client", EXAMPLE, "--servers", "valkey:1", "-b", "redis"), "drop --backend redis"),
    (("--client", EXAMPLE, "--servers", "valkey:1", "-o", "pause_multiple=3"), "the audit's to set"),
    (("--backend", "redlok"), "unknown backend 'redlok'"),
    (("--client", EXAMPLE, "--servers", "valkey:1", "--ttl", "5"), "--ttl 5"),
    (("--client", "/nonexistent/lockclient", "--servers", "valkey:1"), "/nonexistent/lockclient"),
    (("--client", EXAMPLE, "--servers", "valkey:1", "--scenarios", "kill-holder,nope"), "'nope' is no scenario"),
    (("--client", EXAMPLE, "--servers", "valkey:1", "--renew", "--scenarios", "lose-renew-rquest"), "lose-renew-request"),
])
def test_bad_input_is_one_sentence_exit_254_and_nothing_started(tmp_path, args, words):
    store = tmp_path / "store"
    r = chaos("audit", *args, "--store", str(store), timeout=60)
    assert r.returncode == 254, (r.returncode, r.stderr)
    assert words in r.stderr and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (store / "audit").exists()


def doc(valid_by_checker: dict, **summary) -> dict:
    summary = {"acquires_ok": 5, **summary}  # the fault-free contention run's calibration needs an acquire
    return {"summary": {"valid": all(v is True for v in valid_by_checker.values()), **summary},
            "checkers": {n: {"valid": v} for n, v in valid_by_checker.items()}}


GOOD = {n: True for n in ("mutex", "writes", "outlived", "fresh-leases", "liveness", "timeouts", "noticed", "alive")}


class FakeRunner:
    """runner.run for the command's own logic: each spec gets the doc `answer(spec)` says, and
    the audit's clock (`monotonic`) moves on by the spec's time limit plus 2 s."""

    def __init__(self, tmp_path: Path, answer, interrupt_after: int | None = None):
        self.tmp, self.answer, self.specs, self.interrupt_after, self.now = tmp_path, answer, [], interrupt_after, 0.0

    def monotonic(self) -> float:
        return self.now

    def __call__(self, spec, progress=True, replay=None):
        self.specs.append(spec)
        self.now += spec.time_limit + 2
        d = self.tmp / f"run{len(self.specs)}"
        d.mkdir()
        stop = self.interrupt_after is not None and len(self.specs) >= self.interrupt_after
        return RunOutcome(run_dir=d, summary=self.answer(spec)["summary"], results=self.answer(spec), interrupted=stop,
                          signal=signal.SIGTERM if stop else None)


def audit(tmp_path, monkeypatch, runner, budget_s=0.0, refused=None):
    from harness.core.spec import TestSpec
    import harness.engine.runner

    monkeypatch.setattr(harness.engine.runner, "run", runner)
    monkeypatch.setattr(cmd, "time", runner)  # the budget is spent on the runner's clock
    from harness.core import interrupts

    monkeypatch.setattr(interrupts, "ignore_stops", lambda: None)  # the test session keeps its handlers
    client = plan.Client(ttl_ms=2000, acquire_timeout_s=2.0, fencing=True)
    base = TestSpec(backend="external", options={"command": EXAMPLE, "servers": "valkey:1"}, store=str(tmp_path),
                    seed=7, fencing=True, command="chaos audit").validate()
    scenarios = [s for s in plan.battery(client) if s.name not in (refused or {})]
    junit = tmp_path / "audit.xml"
    code = cmd._audit(base, client, scenarios, dict(refused or {}), budget_s, EXAMPLE, False, str(junit))
    card = json.loads(next((tmp_path / "audit").glob("*/audit.json")).read_text())
    return code, card, junit


def test_a_clean_audit_exits_0_and_writes_its_card_everywhere(tmp_path, monkeypatch, capsys):
    runner = FakeRunner(tmp_path, lambda spec: doc(GOOD, holder_deaths=1))
    code, card, junit = audit(tmp_path, monkeypatch, runner, refused={"partition": "one server cannot be partitioned"})
    assert code == 0 and card["exit_code"] == 0
    assert len(runner.specs) == len(card["scenarios"]) == 15  # every scenario once, budget 0
    assert {s.nemesis for s in runner.specs} >= {("pause-holder",), ("cut-in-flight",), ("clock-skew",), ()}
    assert all(s.seed == 7 and s.fencing for s in runner.specs)
    out = capsys.readouterr().out
    assert "NOT TESTED partition: one server cannot be partitioned" in out and "[run 1 of 15]" in out
    assert "no two holders" in out and "exit code: 0" in out.splitlines()[-1]
    assert (Path(card["runs"][0]["run_dir"]).parent / "audit").is_dir()
    page = next((tmp_path / "audit").glob("*/audit.html")).read_text()
    assert "expiry after the holder&#x27;s death" in page and "default-src 'none'" in page
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite.get("tests") == str(len(plan.PROMISES)) and suite.get("failures") == "0"
    assert int(suite.get("skipped")) >= 0


def test_a_finding_exits_1_gets_the_extra_seeds_and_names_run_dir_cause_and_replay(tmp_path, monkeypatch, capsys):
    def answer(spec):
        if spec.nemesis == ("kill-holder",) and spec.options.get("during") != "acquire":
            d = doc({**GOOD, "outlived": False}, holder_deaths=1, outlived_holder_s=9.0, outlived_bound_s=2.5)
            d["checkers"]["outlived"]["details"] = {"findings": ["c1 died; its lock lived on 9.0 s"]}
            return d
        return doc(GOOD, holder_deaths=1)

    runner = FakeRunner(tmp_path, answer)
    code, card, junit = audit(tmp_path, monkeypatch, runner, budget_s=600)
    assert code == 1
    row = {r["promise"]: r for r in card["rows"]}["outlived"]
    assert row["status"] == "FAIL" and row["failures"][0]["cause"] == "c1 died; its lock lived on 9.0 s"
    assert row["failures"][0]["replay"].startswith("chaos run --replay ") and "--client" in row["failures"][0]["replay"]
    kills = [s for s in card["scenarios"] if s["name"] == "kill-holder"][0]
    assert kills["runs"] > 1  # the extra seeds went to the scenario that found something
    out = capsys.readouterr().out
    assert "FAIL expiry after the holder's death: kill-holder seed" in out and "replay:  chaos run --replay" in out
    assert ET.parse(junit).getroot().find("testsuite").get("failures") == "1"


def test_an_interrupted_run_ends_the_audit_with_143_and_the_card_covers_what_finished(tmp_path, monkeypatch, capsys):
    runner = FakeRunner(tmp_path, lambda spec: doc(GOOD), interrupt_after=2)
    code, card, _ = audit(tmp_path, monkeypatch, runner, budget_s=600)
    assert code == 143 and len(runner.specs) == 2 and len(card["runs"]) == 2 and card["interrupted"] == "SIGTERM"
    assert "INTERRUPTED by SIGTERM after 2 finished run(s)" in capsys.readouterr().out


def test_a_scenario_the_cluster_refuses_is_not_tested_with_its_sentence(tmp_path, monkeypatch):
    from harness.core.errors import BadArgument

    def answer(spec):
        if spec.nemesis == ("slow-link",):
            raise BadArgument("slow-link needs a cluster that can shape links; use --cluster local")
        return doc(GOOD)

    code, card, _ = audit(tmp_path, monkeypatch, FakeRunner(tmp_path, answer))
    assert card["not_tested"]["slow-link"].startswith("slow-link needs a cluster") and code == 0


def test_nothing_judged_exits_2(tmp_path, monkeypatch):
    unknown = {n: "unknown" for n in GOOD}
    code, card, _ = audit(tmp_path, monkeypatch, FakeRunner(tmp_path, lambda spec: doc(unknown)))
    assert code == 2 and {r["status"] for r in card["rows"]} == {"NOT TESTED"}


def test_ctrl_c_between_two_runs_ends_the_audit_with_130_and_the_card(tmp_path, monkeypatch, capsys):
    class CtrlC(FakeRunner):
        def __call__(self, spec, progress=True, replay=None):
            if len(self.specs) == 1:
                raise KeyboardInterrupt
            return super().__call__(spec, progress, replay)

    code, card, _ = audit(tmp_path, monkeypatch, CtrlC(tmp_path, lambda spec: doc(GOOD)), budget_s=600)
    assert code == 130 and len(card["runs"]) == 1 and card["interrupted"] == "Ctrl-C"
    assert capsys.readouterr().out.splitlines()[-1].endswith("exit code: 130 (interrupted by Ctrl-C)")


def test_a_client_that_never_acquires_without_faults_stops_the_audit_at_once(tmp_path, monkeypatch, capsys):
    runner = FakeRunner(tmp_path, lambda spec: doc(GOOD, acquires_ok=0, acquires_info=12))
    code, card, _ = audit(tmp_path, monkeypatch, runner, budget_s=600)
    assert code == 2 and len(runner.specs) == 1 and runner.specs[0].nemesis == ()
    assert card["calibration"]["acquires_info"] == 12 and "never acquired the lock" in card["stopped"]
    assert {r["status"] for r in card["rows"]} == {"NOT TESTED"} and "never acquired" in card["rows"][0]["why"]
    assert "fault-free: 0 acquires ok, ? fail, 12 info" in capsys.readouterr().out


def test_the_fault_free_run_calibrates_and_the_card_keeps_its_numbers(tmp_path, monkeypatch, capsys):
    runner = FakeRunner(tmp_path, lambda spec: doc(GOOD, p50_acquire_ms=3.5, p99_acquire_ms=40.0, handover_max_s=0.05))
    code, card, _ = audit(tmp_path, monkeypatch, runner)
    assert code == 0 and card["calibration"]["p99_acquire_ms"] == 40.0
    assert "acquire p50 3.5 ms, p99 40 ms; longest handover 0.05 s" in capsys.readouterr().out


DESCRIBES = """import json, sys
for line in sys.stdin:
    req = json.loads(line)
    if req["op"] == "describe":
        print(json.dumps({"id": req["id"], "type": "ok", "ttl_ms": 5000, "acquire_timeout_s": 3,
                          "session_ms": 9000, "command_timeout_ms": 2500, "renews": True}), flush=True)
"""


def test_the_client_describes_itself_and_flags_win(tmp_path, monkeypatch):
    import harness.engine.runner

    script = tmp_path / "describes.py"
    script.write_text(DESCRIBES)
    runner = FakeRunner(tmp_path, lambda spec: doc(GOOD))
    monkeypatch.setattr(harness.engine.runner, "run", runner)
    monkeypatch.setattr(cmd, "time", runner)
    from harness.core import interrupts

    monkeypatch.setattr(interrupts, "ignore_stops", lambda: None)
    code = cmd.audit.main(["--client", f"python3 {script}", "--servers", "valkey:1", "--budget", "0",
                           "--scenarios", "contention,server-pause,pause-holder-renewed", "--acquire-timeout", "4",
                           "--store", str(tmp_path / "store")], standalone_mode=False)
    card = json.loads(next((tmp_path / "store" / "audit").glob("*/audit.json")).read_text())
    assert code == 0 and card["ttl_ms"] == 5000 and card["acquire_timeout_s"] == 4.0  # the flag wins
    assert card["session_s"] == 9.0 and card["command_timeout_s"] == 2.5 and card["renew"] is True
    assert "it stated ttl_ms 5000" in card["described"]
    pause = [s for s in runner.specs if s.nemesis == ("pause",)][0]
    assert pause.nemesis_interval == 3.75  # servers paused 1.5 x the command timeout it stated
    assert all(s.ttl_ms == 5000 and s.renew for s in runner.specs)


def test_recheck_judges_a_finished_audits_runs_again_and_keeps_their_shrinks(tmp_path, capsys):
    from tests.paths import TESTS

    run = tmp_path / "store" / "redis-kill-holder" / "20261206T080000"
    run.mkdir(parents=True)
    (run / "spec.json").write_text(json.dumps({"backend": "redis", "nemesis": ["kill-holder"], "time_limit": 15,
                                               "seed": 1, "ttl_ms": 2000, "acquire_timeout": 2.0}))
    (run / "history.jsonl").write_text((TESTS / "golden" / "liveness" / "outlived-bad.jsonl").read_text())
    adir = tmp_path / "store" / "audit" / "20261206T080100"
    adir.mkdir(parents=True)
    shrunk = {"schedule": "1 fault: kill-holder", "faults": 1, "of_faults": 2, "time_limit": 12.0,
              "rate": "reproduced in 2 of 2", "replay": "chaos run --replay X"}
    old = {"client": "redis", "backend": "redis", "ttl_ms": 2000, "acquire_timeout_s": 2.0, "session_s": None,
           "renew": False, "fenced": True, "scenarios": [{"name": "kill-holder"}], "not_tested": {},
           "runs": [{"scenario": "kill-holder", "seed": 1, "run_dir": str(run), "valid": True}],
           "rows": [{"promise": "outlived", "status": "PASS", "failures": [{"run_dir": str(run), "shrunk": shrunk}]}]}
    (adir / "audit.json").write_text(json.dumps(old))
    code = cmd.audit.main(["--recheck", str(adir)], standalone_mode=False)
    card = json.loads((adir / "audit.json").read_text())
    rows = {r["promise"]: r for r in card["rows"]}
    assert code == 1 and card["exit_code"] == 1 and card["rechecked"]
    f = rows["outlived"]["failures"][0]
    assert rows["outlived"]["status"] == "FAIL" and f["run_dir"] == str(run) and f["shrunk"] == shrunk
    assert (run / "results.json").is_file() and card["runs"][0]["valid"] is False
    assert "judged again" in capsys.readouterr().out and (adir / "audit.html").is_file()


def test_recheck_of_what_is_not_an_audit_is_one_sentence(tmp_path):
    (tmp_path / "audit.json").write_text("{}")
    r = chaos("audit", "--recheck", str(tmp_path), timeout=60)
    assert r.returncode == 254 and "is not an audit's card" in r.stderr and len(r.stderr.strip().splitlines()) == 1
