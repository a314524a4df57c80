"""What the spec alone decides (harness/core/refusals.py): a spec no run can serve is refused by
TestSpec.validate, before any server starts, in one sentence naming the setting and the fix;
a fault phase too short for any fault is refused unless a replay brings the faults' timing;
a flag without effect on the design gets one line of note, and the run goes on."""

from __future__ import annotations

import pytest

from harness.core import refusals
from harness.core.errors import BadArgument
from harness.core.spec import TestSpec


def spec(**kw) -> TestSpec:
    return TestSpec(**{"backend": "redis", **kw}).validate()


@pytest.mark.parametrize("kw, words", [
    ({"nemesis": ("pause-waiter",), "concurrency": 1}, "pause-waiter needs a waiter and a holder: use --concurrency 2"),
    ({"nemesis": ("partition-waiter",), "concurrency": 1}, "partition-waiter needs a waiter and a holder"),
    ({"nemesis": ("pause-waiter",), "options": {"after_renews": "2"}}, "drop -o after_renews=2"),
    ({"nemesis": ("pause-holder",), "options": {"after_renews": "2"}}, "pause-holder -o after_renews=2 needs holders "
                                                                        "that renew: add --renew"),
    ({"nemesis": ("kill-holder",), "options": {"after_renews": "1"}}, "kill-holder -o after_renews=1 needs holders"),
    ({"nemesis": ("kill-holder",), "concurrency": 1, "options": {"during": "acquire"}}, "use --concurrency 2"),
    ({"nemesis": ("kill-holder",), "renew": True, "options": {"during": "acquire", "after_renews": "1"}},
     "kills a waiter, which has renewed nothing: drop -o after_renews"),
    ({"nemesis": ("cut-in-flight",), "options": {"during": "renew"}}, "-o during=renew needs holders that renew"),
    ({"nemesis": ("partition",)}, "backend redis runs one (valkey:1); use partition-client"),
    ({"backend": "redlock", "nemesis": ("partition-client",), "options": {"cut_servers": "6"}},
     "-o cut_servers=6 is more than the 5 lock server(s) of redlock"),
    ({"nemesis": ("slow-link",), "options": {"delay_ms": "0"}}, "changes nothing"),
    ({"nemesis": ("slow-link",), "options": {"between": "servers"}}, "needs at least two lock servers (redis runs 1)"),
    ({"backend": "redlock", "nemesis": ("slow-link",), "netns": False}, "slow-link needs network namespaces, and "
                                                                         "--no-netns runs everything on loopback"),
    ({"nemesis": ("partition-waiter",), "concurrency": 2, "netns": False}, "drop --no-netns"),
    ({"nemesis": ("clock-skew",), "options": {"clock_mode": "drift", "drift_rate": "1"}}, "moves no clock"),
    ({"nemesis": ("clock-skew",), "options": {"clock_mode": "strobe", "strobe_ms": "2250"}}, "never flip back"),
    ({"nemesis": ("pause-holder",), "options": {"load_clients": "2"}}, "needs one process per client"),
    ({"hold_until_expiry": True, "options": {"margin_ms": "2000"}}, "leaves no time to hold a lease"),
    ({"ttl_ms": 60_000, "hold_max_ms": 30_000, "time_limit": 10}, "--hold-max (30000 ms) must be shorter than "
                                                                   "--time-limit (10 s)"),
])
def test_what_the_spec_alone_rules_out_is_refused_by_validate(kw, words):
    with pytest.raises(BadArgument) as e:
        spec(**kw)
    assert words in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("kw", [
    {"nemesis": ("pause-waiter",), "concurrency": 2},
    {"nemesis": ("pause-waiter", "pause-holder"), "concurrency": 2, "renew": True, "options": {"after_renews": "2"}},
    {"nemesis": ("slow-link",), "options": {"delay_ms": "0", "jitter_ms": "30"}},  # jitter alone delays
    {"backend": "etcd", "nemesis": ("partition",), "options": {"partition_shape": "bridge"}},
    {"backend": "redlock", "nemesis": ("partition-client",), "options": {"cut_servers": "5"}},
    {"nemesis": ("clock-skew",), "options": {"clock_mode": "strobe", "strobe_ms": "2000"}},
    {"nemesis": ("clock-skew",), "options": {"clock_mode": "mixed", "drift_rate": "1"}},
    {"nemesis": ("cut-in-flight",), "renew": True, "options": {"during": "renew"}},
    {"hold_until_expiry": True, "options": {"margin_ms": "1999"}},
])
def test_what_a_run_can_do_is_not_refused(kw):
    spec(**kw)


def test_a_bridge_needs_three_servers_and_one_server_has_no_partition():
    with pytest.raises(BadArgument, match="partition_shape=bridge needs at least 3 lock servers"):
        spec(backend="external", options={"command": "./x", "servers": "etcd:2", "partition_shape": "bridge"},
             nemesis=("partition",))


def test_a_fault_phase_too_short_for_any_fault_is_refused_unless_replayed():
    short = spec(nemesis=("pause-holder",), time_limit=3, recovery=0.75)  # validate accepts it: a replay may run it
    why = refusals.fit(short)
    assert why.startswith("--nemesis pause-holder: no fault fits in the fault phase of 2.25 s") and "lasts 4 s" in why
    assert refusals.fit(spec(nemesis=("pause-holder",), time_limit=6, recovery=0.5)) is not None  # 1.5 + 4 = 5.5
    assert refusals.fit(spec(nemesis=("pause-holder",), time_limit=6.5, recovery=0.5)) is None  # 1.5 + 4 < 6
    assert "half of --nemesis-interval" in refusals.fit(spec(backend="redlock", nemesis=("partition",), time_limit=4,
                                                             recovery=1, nemesis_interval=8))
    assert refusals.fit(spec(backend="redlock", nemesis=("partition",), time_limit=4, recovery=1,
                             nemesis_interval=5)) is None  # 2.5 < 3: the first cut may start


def test_the_runner_asks_fit_only_of_a_run_that_plans_its_own_faults():
    from harness.engine.runner import refuse_early

    short = spec(nemesis=("pause-holder",), time_limit=3, recovery=0.75, store="/nonexistent/never-made")
    with pytest.raises(BadArgument, match="no fault fits"):
        refuse_early(short)
    from harness.core.errors import ChaosError

    try:  # a replay gets past fit; only the server binaries (preflight) may still stop it here
        refuse_early(short, replay=object())
    except ChaosError as e:
        assert "no fault fits" not in str(e)


@pytest.mark.parametrize("kw, line", [
    ({"backend": "redlock", "fencing": True}, "--fencing has no effect on backend redlock: it hands out no fencing tokens"),
    ({"clock_jump_s": 5.0}, "--clock-jump has no effect without --nemesis clock-skew"),
    ({"nemesis_interval": 5.0}, "--nemesis-interval has no effect without a nemesis"),
    ({"options": {"margin_ms": "50"}}, "-o margin_ms has no effect without --hold-until-expiry"),
    ({"renew": True, "hold_max_ms": 500}, "--hold-max has no effect with --renew"),
    ({"hold_until_expiry": True, "hold_max_ms": 500}, "--hold-max has no effect with --hold-until-expiry"),
    ({"options": {"watchdog": "true", "watchdog_interval_ms": "2000"}}, "the watchdog renews only after the lease"),
    ({"backend": "etcd", "options": {"keepalive_interval_ms": "2500"}}, "the keepalive renews only after the lease"),
    ({"options": {"own_key": "yes"}}, "-o own_key has no effect with one lock key"),
])
def test_a_flag_without_effect_is_said_in_one_line(kw, line):
    notes = spec(**kw).notes()
    assert any(line in n for n in notes) and all("\n" not in n for n in notes), notes


def test_a_plain_run_has_no_notes():
    assert spec().notes() == [] and spec(backend="redis", fencing=True, nemesis=("pause-holder",)).notes() == []
    assert spec(options={"watchdog": "false", "watchdog_interval_ms": "2000"}).notes() == []
    assert spec(keys=4, options={"own_key": "yes"}).notes() == []
