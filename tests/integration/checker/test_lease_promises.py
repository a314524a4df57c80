"""The lease's other promises on real runs with deliberately broken clients (tests/clients/liar.py,
clients/example-redis with one bug each): a validity counted from the reply under a slow link is
UNEXPLAINED, not excused by the link (in the suite); a key set without a TTL outlives its killed
holder and leaves the lock stuck, and an ok sent after the lease expired is "granted an expired
lease" (campaign: `pytest -m campaign`), each against the honest example under the same faults."""

import json

import pytest

from tests.conftest import ROOT, chaos

pytestmark = pytest.mark.integration

LIAR = f"python3 {ROOT / 'tests/clients/liar.py'}"
HONEST = f"python3 {ROOT / 'clients/example-redis/client.py'}"
# 300 ms each way on the clients' links: an acquire takes >= 600 ms, 30 % of the 2 s TTL, more
# than the 10 % the example keeps in hand, so a claim counted from the reply outlasts the key
SLOW = ("--servers", "valkey:1", "-n", "slow-link", "-o", "delay_ms=300", "-o", "release_checks_owner=yes",
        "--hold-until-expiry", "--time-limit", "15")


def summary(r) -> dict:
    assert "Traceback" not in r.stderr + r.stdout and r.stdout.strip(), r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def run(tmp_path, client: str, *args: str, seed: int = 1) -> dict:
    return summary(chaos("run", "--client", client, *args, "--seed", str(seed), "--store", str(tmp_path), "--json"))


def test_a_validity_counted_from_the_reply_outlasts_the_key_and_the_slow_link_is_no_excuse(tmp_path):
    s = run(tmp_path, f"{LIAR} from-reply", *SLOW)
    assert s["valid"] is False and s["violations"] >= 1, s
    assert s["unexplained"] == s["violations"], s["violations_by_cause"]  # never "early-foreign-release"


@pytest.mark.campaign
def test_the_honest_example_under_the_same_slow_link_holds(tmp_path):
    s = run(tmp_path, HONEST, *SLOW)
    assert s["valid"] is True and not s["violations"] and not s["expired_grants"], s


@pytest.mark.campaign
def test_a_key_without_ttl_outlives_its_killed_holder_and_the_lock_is_stuck(tmp_path):
    s = run(tmp_path, f"{LIAR} no-ttl", "--servers", "valkey:1", "-n", "kill-holder", "--time-limit", "15")
    assert s["valid"] is False and s["outlived_holder"] >= 1 and s["stuck"] >= 1, s
    assert s["outlived_holder_s"] > s["outlived_bound_s"]
    honest = run(tmp_path, HONEST, "--servers", "valkey:1", "-n", "kill-holder", "--time-limit", "15")
    assert honest["outlived_holder"] == 0 and honest["stuck"] == 0 and honest["holder_deaths"] >= 1, honest


@pytest.mark.campaign
def test_an_ok_for_an_acquire_slower_than_its_lease_is_an_expired_grant(tmp_path):
    # 400 ms of delay against a 300 ms TTL: every acquire the slow link catches ends past its lease
    slower = ("--servers", "valkey:1", "-n", "slow-link", "-o", "delay_ms=400", "--ttl", "300", "--time-limit", "12")
    s = run(tmp_path, f"{LIAR} late-ok", *slower)
    assert s["valid"] is False and s["expired_grants"] >= 1 and s["checkers"]["fresh-leases"] is False, s
    honest = run(tmp_path, HONEST, *slower)
    assert honest["expired_grants"] == 0, honest  # it refuses the lease it got too late


LAST_LOOK = ("-n", "pause-holder", "-o", "held_check=both", "--time-limit", "10")


def test_a_client_that_says_it_holds_a_lock_it_lost_is_named_and_an_honest_one_notices(tmp_path):
    """The last look before the write (-o held_check=both): the paused holder wakes after its
    lease; a client whose `held` says true whatever happened is "the client did not notice it
    lost the lock"; the built-in redis design (its validity tracked) says false, writes nothing,
    and is not named (its overrun is still a violation: a pause past the lease is one)."""
    s = run(tmp_path, f"{LIAR} held-always", "--servers", "valkey:1", *LAST_LOOK)
    assert s["checkers"]["noticed"] is False and s["held_true_after_lost"] >= 1, s
    h = summary(chaos("run", "-b", "redis", *LAST_LOOK, "--seed", "1", "--store", str(tmp_path), "--json"))
    assert h["checkers"]["noticed"] is True and h["held_true_after_lost"] == 0, h
    assert h["held_false_before_write"] >= 1 and h["stale_writes_accepted"] == 0, h


def test_a_client_that_dies_of_its_own_error_is_a_finding_and_the_honest_one_is_not(tmp_path):
    """A client process that exits untold (an unhandled error after a release, every third one)
    is "client died", with its last stderr line, and the run is invalid; the honest example
    under the same run is alive throughout."""
    s = run(tmp_path, f"{LIAR} dies-after-release", "--servers", "valkey:1", "--time-limit", "5")
    assert s["valid"] is False and s["checkers"]["alive"] is False and s["client_deaths"] >= 1, s
    h = run(tmp_path, HONEST, "--servers", "valkey:1", "--time-limit", "4")
    assert h["valid"] is True and h["checkers"]["alive"] is True and h["client_deaths"] == 0, h


# -- handover and timeouts (issue 38) -----------------------------------------------------------
QUIET = ("--servers", "valkey:1", "--time-limit", "8", "--concurrency", "2")


def test_a_waiter_that_misses_its_wake_up_stalls_the_handover_and_one_that_gives_up_early_is_named(tmp_path):
    """No fault at all, two clients: one that sleeps 1.9 s between the tries of an acquire (not
    0.05 s) leaves the lock free after a release while its waiter sleeps ("handover stalled"), and
    sleeps past its deadline ("answered late"); one that gives up after a tenth of its timeout
    while the lock is taken "gave up long before it". The honest example under the same load is
    silent on both (and every other honest client's run in the suite is judged by both checkers)."""
    lazy = run(tmp_path, f"{LIAR} misses-wakeup", *QUIET)
    assert lazy["valid"] is False and lazy["handover_stalls"] >= 1 and lazy["handover_max_s"] > lazy["handover_bound_s"], lazy
    assert lazy["checkers"]["liveness"] is False and lazy["stuck"] == 0, lazy  # a stall, not a stuck lock
    hasty = run(tmp_path, f"{LIAR} gives-up-early", *QUIET)
    assert hasty["valid"] is False and hasty["acquires_early"] >= 1 and hasty["checkers"]["timeouts"] is False, hasty
    honest = run(tmp_path, HONEST, *QUIET)
    assert honest["valid"] is True and honest["handovers_judged"] >= 3, honest
    assert honest["handover_stalls"] == 0 and honest["acquires_late"] == honest["acquires_early"] == 0, honest


@pytest.mark.campaign
def test_a_deadline_on_the_wall_clock_waits_on_after_the_client_clock_jumps_back(tmp_path):
    """A client clock jumped back 2.5 x TTL (the vDSO patch on the client process): a client that
    measures its acquire deadline with time.time() waits on until the harness cuts it off; the
    clock fault excuses nothing. The honest example (time.monotonic()) is silent."""
    skew = ("--servers", "valkey:1", "-n", "clock-skew", "-o", "clock_target=clients", "-o", "clock_mode=back",
            "--time-limit", "12", "--concurrency", "2")
    s = run(tmp_path, f"{LIAR} wall-clock-deadline", *skew)
    assert s["valid"] is False and s["acquires_late"] >= 1 and s["checkers"]["timeouts"] is False, s
    honest = run(tmp_path, HONEST, *skew)
    assert honest["valid"] is True and honest["acquires_late"] == 0, honest
