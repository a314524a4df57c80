"""Shrinking a liveness finding (harness/checker/liveness.py: a stuck lock, a starved waiter):
the same finding is the same kind of liveness finding. The search runs on simulated replays,
pure functions from a schedule to the summary a replay would show, some flaky (seeded)."""

import json
import random

import pytest

from harness.commands.shrink import findings, reproduces
from harness.engine.replay import Recorded
from harness.engine.shrink import Candidate, Search
from tests.conftest import chaos
from tests.unit.commands.test_shrink import HISTORY, run_dir

STUCK = {"valid": False, "violations": 0, "stuck": 1, "starved": None}


def test_findings_name_each_kind_of_liveness_finding():
    assert findings(STUCK) == {"liveness:stuck"}
    assert findings({"valid": False, "violations": 0, "stuck": 0, "starved": 2}) == {"liveness:starved"}
    assert findings({"valid": False, "violations": 1, "violations_by_cause": {"overran-paused": 1}, "stuck": 1}) == \
        {"violation:overran-paused", "liveness:stuck"}
    assert findings({"valid": True, "stuck": 0, "starved": None}) == frozenset()
    assert findings({"valid": "unknown", "stuck": None}) == frozenset()  # an unchecked run found nothing
    assert findings({"valid": False, "stuck": True}) == {"invalid"}  # a count, never a flag


def test_findings_name_each_other_broken_promise_by_its_count():
    assert findings({"valid": False, "outlived_holder": 1}) == {"outlived"}
    assert findings({"valid": False, "expired_grants": 2, "overlong_grants": 0}) == {"fresh:expired"}
    assert findings({"valid": False, "acquires_late": 1, "acquires_early": 3}) == {"timeouts:late", "timeouts:early"}
    assert findings({"valid": False, "handover_stalls": 1, "held_true_after_lost": 1, "client_deaths": 1}) == \
        {"liveness:handover", "noticed", "client-died"}
    assert findings({"valid": False, "client_deaths": True}) == {"invalid"}  # a count, never a flag
    # a late acquire does not stand in for a violation, but does for itself
    assert not reproduces(frozenset({"violation:unexplained", "timeouts:late"}), frozenset({"timeouts:late"}))
    assert reproduces(frozenset({"timeouts:late"}), frozenset({"timeouts:late", "noticed"}))


def test_the_same_liveness_finding_is_the_same_kind():
    stuck = frozenset({"liveness:stuck"})
    assert reproduces(stuck, frozenset({"liveness:stuck", "violation:overran-paused"}))
    assert not reproduces(stuck, frozenset({"liveness:starved"}))
    assert not reproduces(stuck, frozenset({"violation:overran-paused"}))
    assert not reproduces(stuck, frozenset({"invalid"}))
    # a run that had violations too is shrunk for its violations, as before
    assert not reproduces(frozenset({"violation:early-server-clock", "liveness:stuck"}), stuck)


# --- the search, with a replay simulated -----------------------------------------------------
SCHEDULE = (Recorded(f="kill", at=2.0, duration=3.0, heal="restart"),
            Recorded(f="pause-holder", at=6.0, duration=4.0, heal="resume-holder"),
            Recorded(f="partition", at=11.0, duration=4.0, heal="heal"),
            Recorded(f="kill", at=16.0, duration=3.0, heal="restart"),
            Recorded(f="pause", at=20.0, duration=2.0, heal="resume"))
START = Candidate(faults=SCHEDULE, time_limit=40.0)


def replayed(p_stuck: float = 1.0, seed: int = 0, starved_without_partition: bool = False):
    """A simulated replay's summary: a partition of at least 2 s leaves the lock stuck once it
    heals (in p_stuck of the replays, seeded); a pause-holder makes a violation; without the
    partition the queue may starve a waiter instead."""
    rng = random.Random(seed)

    def summary(c: Candidate) -> dict:
        have = {r.f: r for r in c.faults}
        s = {"valid": True, "violations": 0, "stuck": 0, "starved": 0}
        if "partition" in have and have["partition"].duration >= 2.0 and rng.random() < p_stuck:
            s.update(valid=False, stuck=1)
        elif starved_without_partition and "kill" in have:
            s.update(valid=False, starved=1)
        if "pause-holder" in have:
            s.update(valid=False, violations=2, violations_by_cause={"overran-paused": 2})
        return s
    return summary


def oracle_for(target: frozenset, summary):
    return lambda c: reproduces(target, findings(summary(c)))


def test_a_stuck_lock_shrinks_to_the_partition_that_left_it_stuck():
    """5 faults -> the partition alone, shortened 4 s -> 2 s (at 1 s it no longer sticks), the
    workload to its heal + 1 s + the recovery: 6 candidates, 12 replays (each candidate
    decided in 2 trials of 3)."""
    s = Search(oracle_for(findings(STUCK), replayed()), trials=3, rate=0.67, recovery=5)
    best = s.run(START)
    assert [(r.f, r.duration) for r in best.faults] == [("partition", 2.0)]
    assert best.time_limit == 19.0  # 11 + 2, + 1, + 5
    assert (len(s.tried), s.trials_run) == (6, 12)


def test_a_starved_waiter_does_not_stand_in_for_a_stuck_lock():
    """Without the partition the replays starve a waiter (a liveness finding, another kind):
    the search never keeps a schedule without the partition."""
    s = Search(oracle_for(findings(STUCK), replayed(starved_without_partition=True)))
    best = s.run(START)
    assert [r.f for r in best.faults] == ["partition"]
    dropped = [t for t in s.tried if "partition" not in [r.f for r in t.candidate.faults]]
    assert dropped and not any(t.kept for t in dropped)
    # and shrinking the starved finding keeps a kill, never needing the partition
    starved = Search(oracle_for(frozenset({"liveness:starved"}), replayed(starved_without_partition=True)))
    assert [r.f for r in starved.run(START).faults] == ["kill"]


def test_a_flaky_stuck_lock_is_never_lost():
    """Stuck in 70 % of the replays with the partition: over 20 seeds the partition is always
    kept, alone in 18 of them (with one other fault in the rest), in 10-34 replays."""
    sizes, trials = [], []
    for seed in range(20):
        s = Search(oracle_for(findings(STUCK), replayed(p_stuck=0.7, seed=seed)), trials=3, rate=0.67, recovery=5)
        best = s.run(START)
        assert "partition" in [r.f for r in best.faults], seed
        sizes.append(len(best.faults))
        trials.append(s.trials_run)
    assert sizes.count(1) >= 18 and max(sizes) <= 2 and max(trials) <= 34, (sizes, trials)


# --- chaos shrink on a stored run with a stuck finding ----------------------------------------
def test_chaos_shrink_takes_a_stuck_run_and_keeps_what_sticks(tmp_path, monkeypatch, capsys):
    from harness.commands import shrink as cmd
    from harness.engine import runner

    two = HISTORY + [dict(o, time_ns=o["time_ns"] + 6 * 10**9) for o in HISTORY[2:]]
    d = run_dir(tmp_path, history=two, summary=STUCK)

    class Outcome:
        def __init__(self, n, replay):
            stuck = any(r.at == 8.0 for r in replay.faults)  # the second pause leaves the lock stuck
            self.summary = {"valid": not stuck, "violations": 0, "stuck": int(stuck), "starved": None}
            self.run_dir, self.interrupted, self.signal = tmp_path / f"replay{n}", False, None
            self.run_dir.mkdir()
    calls = []
    monkeypatch.setattr(runner, "run", lambda spec, progress, replay: calls.append(1) or Outcome(len(calls), replay))
    assert cmd.shrink.main([str(d), "--trials", "1", "--rate", "1"], standalone_mode=False) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert "looking for liveness:stuck" in out[0]
    assert out[-1].startswith("smallest: 1 fault: pause-holder at 8 s for 0.5 s")
    doc = json.loads((d / "shrink.json").read_text())
    assert doc["findings"] == ["liveness:stuck"] and doc["best"]["faults"][0]["at"] == 8.0


@pytest.mark.parametrize("summary", [{"valid": True, "violations": 0, "stuck": 0, "starved": 0},
                                     {"valid": "unknown", "violations": None, "stuck": None}])
def test_a_run_without_any_finding_is_still_refused_in_one_sentence(tmp_path, summary):
    r = chaos("shrink", str(run_dir(tmp_path, summary=summary)))
    assert r.returncode == 254 and len(r.stderr.strip().splitlines()) == 1
    assert "liveness finding or broken promise, so there is nothing to shrink" in r.stderr
