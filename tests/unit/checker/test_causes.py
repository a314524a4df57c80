"""Why each violation happened (harness/checker/causes.py), on golden histories: one per cause
and finding, each with the near miss that must not get it (issue 16)."""

from __future__ import annotations

import random
import tomllib
from types import SimpleNamespace

import pytest

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.checker.causes import cause_text
from harness.checker.lock import check_mutex, check_writes
from harness.core.history import NEMESIS, Op, read_history
from tests.paths import TESTS

S = 1_000_000_000  # ns per second


class H:
    """A golden history, written as a timeline in seconds."""

    def __init__(self, backend="redis", concurrency=3, **options):
        self.ops: list[Op] = []
        self.spec = SimpleNamespace(backend=backend, concurrency=concurrency, options=options, fencing=False)

    def _add(self, t, process, type_, f, **kw):
        self.ops.append(Op(index=len(self.ops), time_ns=int(t * S), process=process, type=type_, f=f, **kw))
        return self

    def acquire(self, p, at, ok, valid=None, value=None):
        self._add(at, p, "invoke", "acquire", key="k")
        return self._add(ok, p, "ok", "acquire", key="k", value=value or f"v{p}-{ok}",
                         valid_until_ns=None if valid is None else int(valid * S))

    def release(self, p, at, done=None, type_="ok"):
        self._add(at, p, "invoke", "release", key="k")
        return self._add(done if done is not None else at + 0.001, p, type_, "release", key="k")

    def renew(self, p, at, valid, type_="ok"):
        self._add(at, p, "invoke", "renew", key="k")
        return self._add(at + 0.001, p, type_, "renew", key="k", valid_until_ns=int(valid * S) if type_ == "ok" else None)

    def write(self, p, at, value, type_="ok"):
        self._add(at, p, "invoke", "write", key="k:counter", value=value)
        return self._add(at + 0.001, p, type_, "write", key="k:counter", value=value)

    def fault(self, f, at, value, heal, heal_at, type_="ok"):
        self._add(at, NEMESIS, "invoke", f, value=value)
        self._add(at + 0.01, NEMESIS, type_, f, value=value)
        self._add(heal_at, NEMESIS, "invoke", heal)
        return self._add(heal_at + 0.01, NEMESIS, "ok", heal)

    def causes(self):
        r = check_mutex(self.spec, sorted(self.ops, key=lambda o: o.index))
        return [o["cause"] for o in r.details["overlaps"]], r

    def cause(self):
        got, _ = self.causes()
        assert len(got) == 1, got
        return got[0]


def overrun(h: H) -> H:
    """Process 0 holds (valid until 3 s) and releases at 5.5 s; process 1 is granted at 4 s."""
    return h.acquire(0, 0, 0.01, valid=3).acquire(1, 1, 4.0, valid=7).release(0, 5.5).release(1, 6.5)


def early(h: H) -> H:
    """Process 0 is valid until 5 s; process 1 is granted at 2 s; both release after."""
    return h.acquire(0, 0, 0.01, valid=5).acquire(1, 1.5, 2.0, valid=7).release(0, 3).release(1, 4)


# -- the golden histories (tests/golden/causes/): each file and the causes it must get ----------
GOLDEN = TESTS / "golden" / "causes"
CASES_TOML = tomllib.loads((GOLDEN / "cases.toml").read_text())


@pytest.mark.parametrize("name", sorted(CASES_TOML))
def test_a_golden_history_gets_its_causes(name):
    case = CASES_TOML[name]
    history = read_history(GOLDEN / f"{name}.jsonl")
    spec = SimpleNamespace(backend=case["backend"], concurrency=3, options={}, fencing=False)
    got = sorted({o["cause"]["cause"] for o in check_mutex(spec, history).details["overlaps"]})
    assert got == sorted(case["causes"]), f"{name} ({case['what']}): {got}"


def test_every_golden_history_is_listed():
    assert {p.stem for p in GOLDEN.glob("*.jsonl")} == set(CASES_TOML)


# -- the holder overran its lease ------------------------------------------------------------
def test_a_paused_holder_overran_its_lease_and_fencing_is_named_as_the_defence():
    c = overrun(H().fault("pause-holder", 1.0, {"process": 0, "worker": 0, "seconds": 4}, "resume-holder", 5.0)).cause()
    assert c["cause"] == "overran-paused" and c["past_lease_s"] == 2.5 and "fencing" in c["detail"]


def test_a_pause_of_another_worker_does_not_explain_the_overrun():
    c = overrun(H().fault("pause-holder", 1.0, {"process": 2, "worker": 2, "seconds": 4}, "resume-holder", 5.0)).cause()
    assert c["cause"] == "overran-no-fault"


def test_an_overrun_with_no_fault_is_a_slow_machine_never_unexplained():
    assert overrun(H()).cause()["cause"] == "overran-no-fault"


def test_a_holder_cut_off_from_the_servers():
    h = overrun(H()).fault("partition-client", 1.0, {"client": "c1", "worker": 0, "servers": ["n1"]}, "heal-client", 5)
    assert h.cause()["cause"] == "overran-cut-off"


def test_a_renew_moves_the_deadline_so_the_same_timeline_is_granted_early():
    h = H().acquire(0, 0, 0.01, valid=3).renew(0, 2.0, valid=5).acquire(1, 1, 4.0, valid=6).release(0, 5.5).release(1, 6.5)
    assert h.cause()["cause"] == "unexplained"


# -- granted while the lease was still valid ----------------------------------------------------
def test_granted_early_with_no_fault_is_unexplained():
    c = early(H()).cause()
    assert c["cause"] == "unexplained" and c["lease_left_s"] == 3.0 and "bug" in c["detail"]


def test_a_server_clock_jump_on_a_majority_explains_an_early_grant_under_redlock():
    jump = {f"n{i}": 5.0 for i in (1, 2, 3)}
    assert early(H("redlock")).fault("clock-bump", 1.0, jump, "clock-reset", 4).cause()["cause"] == "early-server-clock"


def test_a_clock_jump_on_a_minority_of_redlock_servers_does_not():
    jump = {"n1": 5.0, "n2": 5.0}
    assert early(H("redlock")).fault("clock-bump", 1.0, jump, "clock-reset", 4).cause()["cause"] == "unexplained"


def test_a_clock_jump_on_etcd_explains_nothing_its_leases_use_the_monotonic_clock():
    jump = {"e1": 5.0, "e2": 5.0, "e3": 5.0}
    assert early(H("etcd")).fault("clock-bump", 1.0, jump, "clock-reset", 4).cause()["cause"] == "unexplained"


def test_a_fault_elsewhere_in_the_run_explains_nothing():
    h = early(H("redlock")).fault("clock-bump", 10.0, {f"n{i}": 5.0 for i in (1, 2, 3)}, "clock-reset", 12)
    assert h.cause()["cause"] == "unexplained"


def test_a_fault_op_that_failed_did_not_happen():
    h = early(H("redlock")).fault("clock-bump", 1.0, {f"n{i}": 5.0 for i in (1, 2, 3)}, "clock-reset", 4, type_="fail")
    assert h.cause()["cause"] == "unexplained"


def test_a_restart_explains_an_early_grant_only_when_the_server_keeps_no_data():
    kill = ["n1"]
    assert early(H("redis")).fault("kill", 1.0, kill, "restart", 1.2).cause()["cause"] == "early-restart"
    assert early(H("redis", appendonly=True)).fault("kill", 1.0, kill, "restart", 1.2).cause()["cause"] == "unexplained"
    assert early(H("etcd")).fault("kill", 1.0, ["e1"], "restart", 1.2).cause()["cause"] == "unexplained"


def test_a_partition_explains_an_early_grant_only_for_a_session_based_design():
    grudge = {"shape": "halves", "grudge": {"z1": ["z2"]}}
    assert early(H("zookeeper")).fault("partition", 1.0, grudge, "heal", 3).cause()["cause"] == "early-partition"
    assert early(H("redis")).fault("partition", 1.0, grudge, "heal", 3).cause()["cause"] == "unexplained"


def test_a_skew_of_either_holder_s_own_clock():
    assert early(H()).fault("clock-bump", 1.0, {"c2": -5.0}, "clock-reset", 3).cause()["cause"] == "early-client-clock"
    assert early(H()).fault("clock-bump", 1.0, {"c3": -5.0}, "clock-reset", 3).cause()["cause"] == "unexplained"


def test_a_release_by_a_process_that_had_lost_the_lock_explains_the_next_early_grant():
    # 2 holds until 1 s, is paused; 0 takes over (valid until 5); 2 wakes and releases ok (a
    # plain DEL of 0's key); 1 is granted at 2.5 s while 0's lease is still valid.
    h = (H("redis-unsafe-release").acquire(2, 0, 0.01, valid=1).acquire(0, 1.1, 1.2, valid=5).release(2, 2.0)
         .acquire(1, 2.2, 2.5, valid=7).release(0, 3).release(1, 4))
    got = {c["cause"] for c in h.causes()[0]}
    assert got == {"overran-no-fault", "early-foreign-release"}, got


def test_a_cascade_of_plain_dels_explains_the_grant_a_release_in_flight_let_in():
    """Seen on the swarm (chaos reproduce unsafe-release, seed 1): 3 had lost the lock and its
    DEL, in flight, took 4's fresh key; 4's own DEL, in flight when 0 was then granted, landed on
    0's key, and 1 was granted while 0's lease was valid. Without the foreign release before it,
    or with releases that delete only their own lock, 4's late DEL explains nothing."""
    def story(checks_owner, cascade: bool = True) -> H:
        h = H("redis-unsafe-release").acquire(3, 0, 0.01, valid=3)
        if cascade:  # 4 granted while 3 holds; 3 releases after it lost the lock, in flight when 4 is granted again
            h.acquire(4, 0.1, 0.2, valid=3).release(4, 0.3, done=0.35).release(3, 0.5, done=0.7)
        else:
            h.release(3, 0.5, done=0.52)
        h.acquire(4, 0.55, 0.6, valid=3).release(4, 1.0, done=1.5)
        h.acquire(0, 1.1, 1.2, valid=5).acquire(1, 1.55, 1.6, valid=6).release(0, 3).release(1, 4)
        h.spec.facts = {"release_checks_owner": checks_owner}
        return h

    def last(h: H) -> dict:
        return next(c for c in h.causes()[1].details["overlaps"] if c["first"]["process"] == 0)["cause"]

    assert last(story(False))["cause"] == "early-foreign-release", last(story(False))
    assert "process 4, which had lost the lock" in last(story(False))["detail"]
    assert last(story(True))["cause"] == "unexplained"
    assert last(story(False, cascade=False))["cause"] == "unexplained"


def test_a_release_that_timed_out_in_a_partition_may_land_late_and_explain_an_early_grant():
    def story(cut: bool) -> H:
        h = H("redis-unsafe-release").acquire(2, 0, 0.01, valid=3).release(2, 1.0, done=1.5, type_="info")
        if cut:  # the holder's worker is cut off while it releases: its DEL arrives after the heal
            h.fault("partition-client", 0.5, {"client": "c3", "worker": 2, "servers": ["n1"]}, "heal-client", 4)
        return h.acquire(0, 4.2, 4.5, valid=7).acquire(1, 4.6, 5.0, valid=8).release(0, 6).release(1, 6.5)

    assert story(cut=True).cause()["cause"] == "early-foreign-release"
    assert story(cut=False).cause()["cause"] == "unexplained", "a timeout with no network fault explains nothing"


def test_a_clock_jump_not_the_release_of_the_holder_it_let_in_explains_the_next_early_grant():
    # the clock-jump pattern: 1 is granted early (a clock jump) and releases in good faith; 2 is
    # then granted while 0 is still valid: the jump explains both (the release comes second)
    jump = {f"n{i}": 5.0 for i in (1, 2, 3)}
    h = (H("redlock").acquire(0, 0, 0.01, valid=5).fault("clock-bump", 0.5, jump, "clock-reset", 3.5)
         .acquire(1, 0.9, 1.0, valid=3).release(1, 1.5).acquire(2, 1.6, 2.0, valid=4).release(0, 3).release(2, 3.2))
    assert {c["cause"] for c in h.causes()[0]} == {"early-server-clock"}


def test_without_recorded_validity_the_cause_is_unknown():
    h = H().acquire(0, 0, 0.01).acquire(1, 1.5, 2.0).release(0, 3).release(1, 4)
    assert h.cause()["cause"] == "unknown"


# -- releases and renews that said ok after the lock was lost ----------------------------------
def test_a_release_ok_after_its_own_validity_but_before_anyone_else_acquired_is_not_a_finding():
    # the validity is the client's conservative estimate: the server may still have held the key
    _, r = H().acquire(0, 0, 0.01, valid=2).release(0, 3.0).causes()
    assert r.summary["releases_ok_after_lease_lost"] == 0


def test_a_release_ok_after_another_process_acquired_is_a_finding_but_not_the_new_holder_s():
    _, r = overrun(H()).causes()
    late = r.details["releases_ok_after_lease_lost"]
    assert [e["op"]["process"] for e in late] == [0] and "process 1 had acquired" in late[0]["why"]
    assert "after its own lease had ended" in late[0]["why"]
    _, r = overrun(H()).release(0, 7.0, type_="fail").causes()
    assert len(r.details["releases_ok_after_lease_lost"]) == 1, "a release that says fail can tell"


def test_a_renew_ok_after_another_process_acquired_is_a_finding():
    h = H().acquire(0, 0, 0.01, valid=2).acquire(1, 1, 2.5, valid=5).renew(0, 3.0, valid=6).release(0, 3.5).release(1, 4)
    _, r = h.causes()
    assert r.summary["renews_ok_after_lease_lost"] == 1
    assert "process 1 had acquired" in r.details["renews_ok_after_lease_lost"][0]["why"]


# -- the data, and the words -----------------------------------------------------------------
def test_each_stale_write_is_tied_to_its_violation_and_cause():
    h = H().acquire(0, 0, 0.01, valid=3).fault("pause-holder", 1.0, {"process": 0, "worker": 0}, "resume-holder", 5)
    h.acquire(1, 1, 4.0, valid=6).write(0, 5.2, 1).release(0, 5.5).release(1, 6.5)
    h._add(7, "final", "invoke", "read", key="k:counter")._add(7.1, "final", "ok", "read", key="k:counter", value=1)
    r = check_writes(h.spec, sorted(h.ops, key=lambda o: o.index))
    (stale,) = r.details["stale_accepted"]
    assert stale["violation"]["cause"] == "overran-paused"
    grants = [o.index for o in h.ops if o.f == "acquire" and o.type == "ok"]
    assert [stale["violation"]["first"], stale["violation"]["second"]] == grants


def test_the_summary_counts_by_cause_and_says_it_in_one_line():
    h = overrun(H().fault("pause-holder", 1.0, {"process": 0, "worker": 0}, "resume-holder", 5.0))
    _, r = h.causes()
    assert r.summary["violations_by_cause"] == {"overran-paused": 1} and r.summary["unexplained"] == 0
    assert cause_text(r.summary) == "1 holder overran its lease (paused, 2.5 s past it)"
    _, r = early(H()).causes()
    assert r.summary["unexplained"] == 1 and cause_text(r.summary) == "1 UNEXPLAINED"


# -- a property: faults that do not cover the moment never change an explained cause ---------
UNRELATED = [("clock-bump", {"c3": 9.0}, "clock-reset"), ("pause-holder", {"process": 2, "worker": 2}, "resume-holder"),
             ("partition-client", {"client": "c3", "worker": 2, "servers": ["n1"]}, "heal-client"),
             ("kill", ["n1"], "restart"), ("clock-bump", {f"n{i}": 5.0 for i in range(1, 6)}, "clock-reset"),
             ("partition", {"grudge": {}}, "heal")]
CASES = {
    "overran-paused": lambda h: overrun(h.fault("pause-holder", 1.0, {"process": 0, "worker": 0}, "resume-holder", 5.0)),
    "early-server-clock": lambda h: early(h.fault("clock-bump", 1.0, {f"n{i}": 5.0 for i in (1, 2, 3)}, "clock-reset", 4)),
    "early-client-clock": lambda h: early(h.fault("clock-bump", 1.0, {"c2": -5.0}, "clock-reset", 3)),
}


@settings(max_examples=60, deadline=None)
@given(case=st.sampled_from(sorted(CASES)), seed=st.integers(0, 2**32), n=st.integers(1, 6))
def test_faults_outside_the_moment_or_on_others_never_change_an_explained_cause(case, seed, n):
    rng = random.Random(seed)
    h = CASES[case](H("redlock"))
    before = h.cause()["cause"]
    assert before == case
    for _ in range(n):  # each after the whole story (t > 7 s), or on the third worker only
        f, value, heal = rng.choice(UNRELATED)
        while True:  # the nemesis is one process: its ops never interleave (an invoke, then its completion)
            at = rng.uniform(8, 30) if not (isinstance(value, dict) and value.get("worker") == 2) else rng.uniform(0, 8)
            heal_at = at + rng.uniform(0.1, 3)
            busy = [o.time_ns / S for o in h.ops if o.process == NEMESIS]
            if all(abs(t - b) > 0.02 for t in (at, at + 0.01, heal_at, heal_at + 0.01) for b in busy):
                break
        h.fault(f, at, value, heal, heal_at)
    h.ops.sort(key=lambda o: o.time_ns)
    h.ops = [Op(index=i, time_ns=o.time_ns, process=o.process, type=o.type, f=o.f, key=o.key, value=o.value,
                token=o.token, valid_until_ns=o.valid_until_ns) for i, o in enumerate(h.ops)]
    assert h.cause()["cause"] == before


def test_the_validity_survives_a_stored_history_and_a_wrong_one_is_refused(tmp_path):
    import json

    import pytest

    from harness.core.errors import BadHistory
    from harness.core.history import read_history

    line = {"index": 0, "time_ns": 5, "process": 0, "type": "invoke", "f": "acquire"}
    ok = dict(line, index=1, type="ok", valid_until_ns=99)
    p = tmp_path / "history.jsonl"
    p.write_text(json.dumps(line) + "\n" + json.dumps(ok) + "\n")
    assert read_history(p)[1].valid_until_ns == 99
    p.write_text(json.dumps(line) + "\n" + json.dumps(dict(ok, valid_until_ns="soon")) + "\n")
    with pytest.raises(BadHistory, match="valid_until_ns must be a non-negative integer"):
        read_history(p)


def test_a_partition_of_the_servers_cuts_off_a_session_holder_that_overran():
    grudge = {"shape": "halves", "grudge": {"z1": ["z2"]}}
    assert overrun(H("zookeeper")).fault("partition", 1.0, grudge, "heal", 5).cause()["cause"] == "overran-cut-off"
    assert overrun(H("redis")).fault("partition", 1.0, grudge, "heal", 5).cause()["cause"] == "overran-no-fault"


def test_a_release_in_flight_is_no_excuse_when_releases_delete_only_their_own_lock():
    def story(checks_owner) -> H:
        h = H("redis-unsafe-release").acquire(2, 0, 0.01, valid=3).release(2, 1.0, done=1.5, type_="info")
        h.spec.facts = {"release_checks_owner": checks_owner}
        h.fault("partition-client", 0.5, {"client": "c3", "worker": 2, "servers": ["n1"]}, "heal-client", 4)
        return h.acquire(0, 4.2, 4.5, valid=7).acquire(1, 4.6, 5.0, valid=8).release(0, 6).release(1, 6.5)

    assert story(None).cause()["cause"] == "early-foreign-release"
    assert story(False).cause()["cause"] == "early-foreign-release"
    assert story(True).cause()["cause"] == "unexplained"


def test_string_process_ids_meeting_a_cut_off_fault_and_an_overrun_keep_the_violation():
    """Issue 37: a process id may be any JSON scalar; a string one crashed the attribution where
    a cut-off fault met an overrun (worker None + 1), and the mutex verdict became unknown with
    its violation gone."""
    from harness.checker.policy import summarize, verdicts
    from harness.core.spec import TestSpec

    history = read_history(GOLDEN / "overran-cut-off-string-ids.jsonl")
    r = check_mutex(SimpleNamespace(backend="redis", concurrency=3, options={}, fencing=False), history)
    assert r.valid is False and r.error is None and r.summary["violations"] == 1
    (overlap,) = r.details["overlaps"]
    assert overlap["cause"]["cause"] == "overran-no-fault"  # whose worker c1 is, a string id does not say
    spec = TestSpec(backend="redis", facts={"validity": "from-grant"})
    s = summarize(spec, verdicts(spec, history), None, {"started": True})
    assert s["valid"] is False and s["violations"] == 1 and s["checkers"]["mutex"] is False
