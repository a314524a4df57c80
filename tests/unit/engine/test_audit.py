"""The audit's pure parts (harness/engine/audit.py): the battery scaled to the client's numbers,
the budget spread over it, the card aggregated from results.json docs, and its exit code."""

from harness.engine import audit as plan

HONEST = plan.Client(ttl_ms=2000, acquire_timeout_s=2.0, fencing=True)


def by_name(scenarios):
    return {s.name: s for s in scenarios}


def test_the_battery_runs_one_fault_kind_per_scenario_and_names_each_once():
    b = plan.battery(HONEST)
    assert len({s.name for s in b}) == len(b)
    assert all(len(s.nemesis) <= 1 for s in b)
    assert by_name(b)["contention"].nemesis == ()
    names = set(by_name(b))
    assert {"pause-holder", "pause-waiter", "kill-holder", "kill-in-acquire", "lose-release-request",
            "lose-release-reply", "slow-link", "client-clock-back", "client-clock-bump", "server-clock",
            "partition"} <= names
    assert not any(n.endswith("renewed") or "renew-" in n for n in names)  # those need --renew


def test_pauses_cuts_and_jumps_scale_past_the_ttl_the_session_and_the_timeout():
    for ttl_ms, timeout, session in ((2000, 2.0, None), (500, 1.0, None), (10_000, 30.0, None), (1000, 2.0, 6.0)):
        c = plan.Client(ttl_ms=ttl_ms, acquire_timeout_s=timeout, session_s=session)
        b = by_name(plan.battery(c))
        ttl = ttl_ms / 1000
        pause = float(b["pause-holder"].options["pause_multiple"]) * ttl
        assert pause > ttl and pause > (session or 0), (ttl_ms, session)
        assert float(b["pause-waiter"].options["pause_multiple"]) * ttl > (session or ttl)
        assert float(b["lose-release-request"].options["cut_ms"]) > ttl_ms
        assert b["lose-release-reply"].options["lose"] == "reply" and b["lose-release-request"].options["lose"] == "request"
        for n in ("client-clock-back", "client-clock-bump", "server-clock"):
            assert b[n].clock_jump_s > max(ttl, timeout, session or 0)
        assert b["client-clock-back"].options == {"clock_target": "clients", "clock_mode": "back"}
        assert 2 * float(b["slow-link"].options["delay_ms"]) >= 0.3 * ttl_ms  # past the margin a client keeps
        assert 2 * float(b["slower-than-ttl"].options["delay_ms"]) > ttl_ms  # a round trip longer than the lease
        assert b["server-pause"].interval >= max(3.0, 1.5 * ttl) and b["contention"].concurrency == 2
        assert b["pause-holder"].time_limit >= pause + 5  # room for the pause and the recovery after it
        assert b["kill-in-acquire"].options == {"during": "acquire", "when": "free"}


def test_renew_adds_the_faults_that_bite_after_renews_and_drops_hold_until_expiry():
    b = by_name(plan.battery(plan.Client(ttl_ms=2000, acquire_timeout_s=2.0, renew=True)))
    assert b["pause-holder-renewed"].options["after_renews"] == "2"
    assert b["kill-holder-renewed"].options["after_renews"] == "2"
    assert b["lose-renew-request"].options["during"] == "renew"
    assert not b["slow-link"].hold_until_expiry  # --renew refuses --hold-until-expiry
    assert by_name(plan.battery(HONEST))["slow-link"].hold_until_expiry


def S(name, tl=10.0):
    return plan.Scenario(name=name, what=name, time_limit=tl)


def spread(scenarios, budget_s, hits=(), cost=lambda s: 10.0):
    done, spent = [], 0.0
    while (s := plan.next_run(scenarios, done, spent, budget_s, cost)) is not None:
        done.append((s.name, s.name in hits))
        spent += cost(s)
    return [n for n, _ in done]


def test_every_scenario_runs_once_even_when_the_budget_is_spent():
    bat = [S("a"), S("b"), S("c")]
    assert spread(bat, 0) == ["a", "b", "c"]
    assert spread(bat, 25) == ["a", "b", "c"]


def test_the_rest_of_the_budget_goes_to_the_scenarios_that_found_something():
    bat = [S("a"), S("b"), S("c")]
    order = spread(bat, 100, hits={"b"})
    assert order[:3] == ["a", "b", "c"] and set(order[3:]) == {"b"} and len(order) == 10


def test_with_no_finding_the_extra_seeds_are_shared_fewest_runs_first():
    bat = [S("a"), S("b"), S("c")]
    order = spread(bat, 90)
    assert order == ["a", "b", "c", "a", "b", "c", "a", "b", "c"]


def test_an_extra_run_that_does_not_fit_is_not_started():
    bat = [S("a"), S("b")]
    costs = {"a": 10.0, "b": 50.0}
    assert spread(bat, 75, hits={"a", "b"}, cost=lambda s: costs[s.name]) == ["a", "b", "a"]


# ---- the card -----------------------------------------------------------------------------

def doc(**checkers_and_summary):
    checkers = {k: {"valid": v} for k, v in checkers_and_summary.pop("checkers", {}).items()}
    return {"summary": checkers_and_summary, "checkers": checkers}


ALL_TRUE = {n: True for n in ("mutex", "writes", "outlived", "fresh-leases", "liveness", "timeouts", "noticed", "alive")}


def run(scenario, d, seed=1):
    return plan.Run(scenario=scenario, seed=seed, run_dir=f"/s/{scenario}/{seed}", doc=d,
                    replay=f"chaos run --replay /s/{scenario}/{seed}")


def rows_of(rows):
    return {r["promise"]: r for r in rows}


def test_a_clean_audit_passes_every_exercised_row_and_leaves_the_rest_not_tested():
    bat = plan.battery(HONEST)
    runs = [run("contention", doc(checkers=ALL_TRUE)), run("kill-holder", doc(checkers=ALL_TRUE, holder_deaths=2))]
    r = rows_of(plan.card(bat, runs, {}, fenced=True))
    for k in ("mutex", "fencing", "outlived", "fresh", "liveness", "timeouts", "alive"):
        assert r[k]["status"] == plan.PASS, (k, r[k])
    # truthful and noticed are judged only by the scenarios that can show them, which did not run
    assert r["noticed"]["status"] == plan.NOT_TESTED and "pause-holder" in r["noticed"]["why"]
    assert r["truthful"]["status"] == plan.NOT_TESTED
    assert plan.exit_code(list(r.values())) == 0


def test_a_kill_that_never_landed_does_not_pass_expiry_after_death():
    runs = [run("kill-holder", doc(checkers=ALL_TRUE, holder_deaths=0, acquirer_deaths=0))]
    r = rows_of(plan.card(plan.battery(HONEST), runs, {}, fenced=True))
    assert r["outlived"]["status"] == plan.NOT_TESTED and "no holder died" in r["outlived"]["why"]


def test_a_finding_fails_its_row_with_run_dir_cause_and_replay():
    bad = doc(checkers={**ALL_TRUE, "outlived": False, "liveness": False}, holder_deaths=1, stuck=1,
              liveness_bound_s=5.1, outlived_holder_s=8.0, outlived_bound_s=2.5)
    bad["checkers"]["outlived"]["details"] = {"findings": ["process c2 died holding 'k'; its lock lived on 8 s."]}
    runs = [run("contention", doc(checkers=ALL_TRUE)), run("kill-holder", bad)]
    rows = plan.card(plan.battery(HONEST), runs, {}, fenced=True)
    r = rows_of(rows)
    f = r["outlived"]["failures"][0]
    assert r["outlived"]["status"] == plan.FAIL and f["run_dir"] == "/s/kill-holder/1"
    assert f["cause"] == "process c2 died holding 'k'; its lock lived on 8 s" and f["replay"].startswith("chaos run --replay")
    assert r["liveness"]["status"] == plan.FAIL and "STUCK (free, asked for, not granted) 1 time(s)" in r["liveness"]["why"]
    assert r["mutex"]["status"] == plan.PASS
    assert plan.exit_code(rows) == 1
    assert plan.found(bad, True) and not plan.found(runs[0].doc, True)


def test_overlaps_the_fault_explains_are_noted_and_unexplained_ones_fail_no_two_holders():
    paused = doc(checkers={**ALL_TRUE, "mutex": False}, violations=3, violations_by_cause={"overran-paused": 3})
    r = rows_of(plan.card(plan.battery(HONEST), [run("pause-holder", paused)], {}, fenced=True))
    assert r["mutex"]["status"] == plan.PASS and "fencing is the defence" in r["mutex"]["notes"][0]
    early = doc(checkers={**ALL_TRUE, "mutex": False}, violations=2,
                violations_by_cause={"overran-paused": 1, "unexplained": 1})
    r = rows_of(plan.card(plan.battery(HONEST), [run("pause-holder", early)], {}, fenced=True))
    assert r["mutex"]["status"] == plan.FAIL and "UNEXPLAINED" in r["mutex"]["why"]


def test_a_release_that_said_ok_after_the_lease_was_lost_fails_truthful():
    lied = doc(checkers=ALL_TRUE, releases_ok_after_lease_lost=2)
    r = rows_of(plan.card(plan.battery(HONEST), [run("lose-release-request", lied)], {}, fenced=True))
    assert r["truthful"]["status"] == plan.FAIL and "2 release(s) said ok" in r["truthful"]["why"]
    honest = rows_of(plan.card(plan.battery(HONEST), [run("lose-release-request", doc(
        checkers=ALL_TRUE, releases_ok_after_lease_lost=0, renews_ok_after_lease_lost=0))], {}, fenced=True))
    assert honest["truthful"]["status"] == plan.PASS
    # an rw or semaphore run does not count them: not judged, never a silent PASS
    kinds = rows_of(plan.card(plan.battery(HONEST), [run("lose-release-request", doc(checkers=ALL_TRUE))], {},
                              fenced=True))
    assert kinds["truthful"]["status"] == plan.NOT_TESTED and "mutex only" in kinds["truthful"]["why"]


def test_unknown_verdicts_and_refusals_are_not_tested_with_their_reason():
    unjudged = doc(checkers={**ALL_TRUE, "noticed": "unknown"}, not_judged={"noticed": "the client answers held unsupported"})
    bat = plan.battery(HONEST)
    refused = {"partition": "partition cuts the lock servers from each other, and backend external runs one"}
    rows = plan.card(bat, [run("pause-holder", unjudged)], refused, fenced=False)
    r = rows_of(rows)
    assert r["noticed"]["status"] == plan.NOT_TESTED and "held unsupported" in r["noticed"]["why"]
    assert r["fencing"]["status"] == plan.NOT_TESTED and "no fencing tokens" in r["fencing"]["why"]
    assert plan.exit_code(rows) == 0  # every tested row passed


def test_nothing_judged_exits_2():
    rows = plan.card(plan.battery(HONEST), [], {"contention": "no"}, fenced=True)
    assert {r["status"] for r in rows} == {plan.NOT_TESTED}
    assert plan.exit_code(rows) == 2


def test_the_progress_count_is_the_runs_the_budget_allows_if_nothing_new_is_found():
    bat = [S("a"), S("b"), S("c")]
    cost = lambda s: 10.0  # noqa: E731
    assert plan.planned_runs(bat, [], 0, 0, cost) == 3
    assert plan.planned_runs(bat, [], 0, 55, cost) == 5
    assert plan.planned_runs(bat, [("a", True), ("b", False), ("c", False)], 30, 60, cost) == 6


def test_each_run_recovers_longer_than_the_liveness_bound_so_a_stuck_lock_shows():
    from harness.checker.liveness import MARGIN_S

    for c in (HONEST, plan.Client(ttl_ms=500, acquire_timeout_s=1.0), plan.Client(ttl_ms=8000, acquire_timeout_s=10.0)):
        bound = c.ttl_ms / 1000 + c.acquire_timeout_s + MARGIN_S
        for s in plan.battery(c):
            assert s.recovery > bound and s.time_limit > s.recovery + 1, (s.name, s.recovery, s.time_limit)


def test_the_exclusion_row_names_what_the_lock_kind_promises():
    runs = [run("contention", doc(checkers=ALL_TRUE))]
    for lock, title in (("mutex", "no two holders"), ("rw", "no writer beside another holder"),
                        ("semaphore:2", "at most 2 holders")):
        r = rows_of(plan.card(plan.battery(HONEST), runs, {}, fenced=True, lock=lock))
        assert r["mutex"]["title"] == title and r["mutex"]["status"] == plan.PASS


def test_each_fail_rows_first_run_is_shrunk_once_and_the_replay_must_fail_that_row():
    bad = doc(checkers={**ALL_TRUE, "outlived": False, "liveness": False}, holder_deaths=1, stuck=1)
    runs = [run("kill-holder", bad), run("kill-in-acquire", bad)]
    rows = plan.card(plan.battery(HONEST), runs, {}, fenced=True)
    picked = plan.to_shrink(rows)
    # outlived and liveness failed in the same two runs: the first run is shrunk once, for outlived
    assert [(p, f["run_dir"]) for p, f in picked] == [("outlived", "/s/kill-holder/1")]
    assert plan.fails("outlived", bad) and not plan.fails("outlived", doc(checkers=ALL_TRUE, holder_deaths=1))
    assert not plan.fails("mutex", bad)
    assert plan.to_shrink(plan.card(plan.battery(HONEST), [run("contention", doc(checkers=ALL_TRUE))], {},
                                    fenced=True)) == []


def test_a_stated_command_timeout_bounds_the_slow_link_and_sets_the_server_pause():
    b = by_name(plan.battery(plan.Client(ttl_ms=2000, acquire_timeout_s=2.0, command_timeout_s=0.5)))
    assert float(b["slower-than-ttl"].options["delay_ms"]) < 500  # else no command would ever complete
    assert b["server-pause"].interval == 3.0 and "command timeout" in b["server-pause"].what
    b = by_name(plan.battery(plan.Client(ttl_ms=2000, acquire_timeout_s=2.0, command_timeout_s=4.0)))
    assert b["server-pause"].interval == 6.0


def test_a_tokenless_client_leaves_fencing_not_tested_and_unjudged_overlaps_are_noted():
    nameless = doc(checkers={**ALL_TRUE, "mutex": False, "writes": False}, violations=2, stale_writes_accepted=1,
                   violations_by_cause={"unknown": 2}, writes_with_token=0, writes_ok=9)
    clean = doc(checkers=ALL_TRUE, writes_with_token=0, writes_ok=12)
    r = rows_of(plan.card(plan.battery(HONEST), [run("contention", clean), run("pause-holder", nameless)], {},
                          fenced=True))
    assert r["fencing"]["status"] == plan.NOT_TESTED and "no fencing token" in r["fencing"]["why"]
    # the overlaps whose cause is unknown (no validity recorded) do not vanish behind the PASS
    assert r["mutex"]["status"] == plan.PASS and "1 run(s) could not judge it" in r["mutex"]["why"]
    assert "pause-holder seed 1: not judged: 2 overlap(s) whose holder's validity" in r["mutex"]["notes"][0]
    tokened = doc(checkers={**ALL_TRUE, "writes": False}, stale_writes_accepted=1, writes_with_token=9, writes_ok=9)
    assert rows_of(plan.card(plan.battery(HONEST), [run("pause-holder", tokened)], {}, fenced=True))["fencing"][
        "status"] == plan.FAIL


def test_a_row_whose_checker_never_ran_says_so():
    builtin = doc(checkers={k: v for k, v in ALL_TRUE.items() if k != "alive"})  # a built-in design: no alive
    r = rows_of(plan.card(plan.battery(HONEST), [run("contention", builtin)], {}, fenced=True))
    assert r["alive"]["status"] == plan.NOT_TESTED and "its checker (alive) did not run" in r["alive"]["why"]


def test_an_interrupted_run_fails_rows_but_passes_none():
    prefix = plan.Run(scenario="contention", seed=1, run_dir="/s/c/1", doc=doc(checkers=ALL_TRUE), partial=True)
    r = rows_of(plan.card(plan.battery(HONEST), [prefix], {}, fenced=True))
    assert plan.PASS not in {x["status"] for x in r.values()}
    found = plan.Run(scenario="kill-holder", seed=1, run_dir="/s/k/1", partial=True,
                     doc=doc(checkers={**ALL_TRUE, "outlived": False}, holder_deaths=1))
    assert rows_of(plan.card(plan.battery(HONEST), [found], {}, fenced=True))["outlived"]["status"] == plan.FAIL


def test_a_run_where_no_holder_wrote_leaves_fencing_not_tested():
    idle = doc(checkers=ALL_TRUE, writes_with_token=0, writes_ok=0, writes_info=0)
    r = rows_of(plan.card(plan.battery(HONEST), [run("contention", idle)], {}, fenced=True))
    assert r["fencing"]["status"] == plan.NOT_TESTED and "no holder wrote" in r["fencing"]["why"]
