"""kill-holder -o during=acquire -o when=free -o at_ms=A-B (nemesis/midacquire.py): the option
parsing, the refusals, which acquire is aimed at, the seeded moment, and its replay. The
workers are tests/unit/nemesis/test_client.py's double; real kills are in
tests/integration/nemesis/test_client_faults.py."""

from __future__ import annotations

import pytest

from harness.core.errors import BadArgument
from harness.core.history import NEMESIS
from harness.core.spec import TestSpec
from harness.engine.generator import Context, FaultSchedule
from harness.engine.replay import Recorded, recorded_faults
from harness.engine.replay_input import check_faults
from nemesis import client as client_module
from nemesis.client import KILLED_ACQUIRING, KillHolder
from nemesis.midacquire import parse_at_ms
from tests.unit.nemesis.test_client import Workers, acquired, make, op, see


def test_at_ms_is_a_range_or_one_number_and_anything_else_is_one_sentence():
    assert parse_at_ms("0-20") == (0.0, 20.0) and parse_at_ms(" 2.5 - 3 ") == (2.5, 3.0)
    assert parse_at_ms("7") == (7.0, 7.0) and parse_at_ms("") is None
    for bad in ("20-5", "x", "-1-3", "1-99999999", "1,2"):
        with pytest.raises(BadArgument, match=r"-o at_ms=.*give a range in ms, A-B"):
            parse_at_ms(bad)


@pytest.mark.parametrize("options, concurrency, why", [
    ({"when": "free"}, 3, "-o when=free aims inside an acquire: add -o during=acquire"),
    ({"at_ms": "0-5"}, 3, "-o at_ms=0-5 aims inside an acquire: add -o during=acquire"),
    ({"during": "acquire", "at_ms": "9-1"}, 3, "give a range in ms"),
    ({"during": "acquire"}, 1, "needs a waiter and a holder: use --concurrency 2 or more .* or -o when=free"),
    ({"during": "acquire", "when": "free", "after_renews": 2}, 3, "kills an acquirer, which has renewed nothing"),
])
def test_settings_that_aim_nowhere_are_refused_before_any_server_starts(options, concurrency, why):
    with pytest.raises(BadArgument, match=why):
        TestSpec(backend="redis", nemesis=("kill-holder",), concurrency=concurrency,
                 renew="after_renews" in options, options=options).validate()


def test_when_free_needs_no_second_client():
    TestSpec(backend="redis", nemesis=("kill-holder",), concurrency=1,
             options={"during": "acquire", "when": "free"}).validate()


def free_killer(workers=None, seed=2, **options):
    workers = workers or Workers()
    return make(KillHolder, workers, during="acquire", when="free", seed=seed, **options), workers


def test_when_free_arms_the_holder_and_its_next_acquire_of_a_free_lock_plans_the_kill_at_a_seeded_moment():
    nem, workers = free_killer(at_ms="2-8")
    assert see(nem, 1.5, *acquired(1)) == [] and workers.armed == (1, "acquire")  # the holder itself
    assert see(nem, 1.6, op(1, "invoke", "release"), op(1, "ok", "release")) == []
    (k,) = see(nem, 1.7, op(1, "invoke", "acquire"))
    v = k.value
    assert (k.f, v["process"], v["worker"], v["during"], v["when"], v["key"]) == ("kill-holder", 1, 1, "acquire", "free", "k")
    assert 2 <= v["after_ms"] <= 8
    again, _ = free_killer(at_ms="2-8")  # the same seed and events: the same moment
    see(again, 1.5, *acquired(1))
    see(again, 1.6, op(1, "invoke", "release"), op(1, "ok", "release"))
    assert see(again, 1.7, op(1, "invoke", "acquire"))[0].value["after_ms"] == v["after_ms"]


def test_when_free_lets_an_acquirer_of_a_held_lock_go_and_arms_the_next_holder():
    nem, workers = free_killer()
    see(nem, 1.5, *acquired(1))
    see(nem, 1.6, op(1, "invoke", "release"), op(1, "ok", "release"))
    workers.holding = {2}  # another worker took it before this one asked again
    assert see(nem, 1.7, op(1, "invoke", "acquire")) == [] and workers.calls[-1] == ("let_go", 1)
    assert nem.armed is None and nem.down == set()
    workers.holding = set()
    see(nem, 1.8, op(2, "ok", "acquire", value="w"))
    assert nem.armed == 2 and workers.armed == (2, "acquire")


def test_the_kill_lands_after_ms_after_the_request_left_and_closes_the_acquire_in_doubt(monkeypatch):
    slept = []
    monkeypatch.setattr(client_module.time, "sleep", slept.append)
    nem, workers = free_killer(workers=Workers(waiting={1}), at_ms="4")
    see(nem, 1.5, *acquired(1))
    see(nem, 1.6, op(1, "invoke", "release"), op(1, "ok", "release"))
    (k,) = see(nem, 1.7, op(1, "invoke", "acquire"))
    done = nem.invoke(op(NEMESIS, "invoke", "kill-holder", k.value))
    assert done.type == "ok", done.error
    assert slept[0] == 0.004 and [c[0] for c in workers.calls if c[0] in ("let_go", "pause", "kill")] == \
        ["let_go", "pause", "kill"]
    assert done.value["server_state"].startswith("not verified")  # no servers in this test
    ((_, ops),) = workers.sent
    assert [(o["f"], o["type"], o["error"]) for o in ops] == [("acquire", "info", KILLED_ACQUIRING)]


def test_when_held_without_at_ms_records_what_it_always_did():
    nem = make(KillHolder, Workers(), during="acquire", seed=2)
    see(nem, 1.5, *acquired(1))
    (k,) = see(nem, 1.7, op(nem.armed, "invoke", "acquire"))
    assert set(k.value) == {"process", "worker", "during"}


def test_a_replay_kills_at_the_recorded_moment_and_refuses_one_it_cannot_sleep():
    spec = TestSpec(backend="redis", nemesis=("kill-holder",), concurrency=3, time_limit=30, recovery=3,
                    options={"during": "acquire", "when": "free"}).validate()
    r = Recorded(f="kill-holder", at=1.0, duration=2.0, heal="respawn-holder",
                 value={"process": 1, "worker": 1, "during": "acquire", "when": "free", "key": "k", "after_ms": 3.25})
    assert check_faults(spec, [r], "RUN")[0].value["after_ms"] == 3.25
    for bad in (1e12, "soon", -1):
        with pytest.raises(BadArgument, match="after_ms must be a finite number"):
            check_faults(spec, [Recorded(f=r.f, at=1.0, duration=2.0, value={**r.value, "after_ms": bad})], "RUN")
    nem, workers = free_killer(at_ms="10-20")
    schedule = FaultSchedule(nem, 1, 27.0, 3.0, replay=[r])
    for e in (*acquired(1), op(1, "invoke", "release"), op(1, "ok", "release"), op(1, "invoke", "acquire")):
        workers.recorded[1] += 1
        schedule.update(Context(time=1.5), e)
    (k,) = schedule.reactive
    assert k.value["after_ms"] == 3.25  # not a new draw from 10-20


def test_the_recorded_kill_is_read_back_from_its_history():
    from harness.core.history import Op

    v = {"process": 1, "worker": 1, "during": "acquire", "when": "free", "key": "k", "after_ms": 3.25}
    h = [Op(index=0, time_ns=0, process=1, type="invoke", f="acquire", key="k"),
         Op(index=1, time_ns=10**9, process=NEMESIS, type="invoke", f="kill-holder", value=v),
         Op(index=2, time_ns=10**9 + 5, process=NEMESIS, type="ok", f="kill-holder", value={**v, "gone": True}),
         Op(index=3, time_ns=3 * 10**9, process=NEMESIS, type="invoke", f="respawn-holder", value={"worker": 1}),
         Op(index=4, time_ns=3 * 10**9 + 5, process=NEMESIS, type="ok", f="respawn-holder", value={"worker": 1})]
    (r,) = recorded_faults(h, kinds={k.f: k for k in KillHolder.FAULTS})
    assert (r.at, r.duration, r.value["after_ms"], r.heal) == (1.0, 2.0, 3.25, "respawn-holder")


def test_when_free_a_key_found_on_the_servers_before_the_request_leaves_is_a_miss(monkeypatch):
    """A holding flag is set only at a grant: another client between its SET and its reply (or
    between a two-step SET and EXPIRE) already has the key. The read-back says so: let go, missed."""
    from nemesis import readback

    monkeypatch.setattr(readback, "readable", lambda nodes: None)
    monkeypatch.setattr(readback, "read", lambda nodes, key: {"n1": {"value": "x", "pttl_ms": -1}, "t": 0.0})
    nem, workers = free_killer(workers=Workers(waiting={1}))
    see(nem, 1.5, *acquired(1))
    see(nem, 1.6, op(1, "invoke", "release"), op(1, "ok", "release"))
    (k,) = see(nem, 1.7, op(1, "invoke", "acquire"))
    done = nem.invoke(op(NEMESIS, "invoke", "kill-holder", k.value))
    assert done.type == "fail" and "not free" in done.error and "n1: key present (no expiry)" in done.error
    assert workers.calls[-1] == ("let_go", 1) and ("kill", 1) not in workers.calls
    assert see(nem, 1.8, done) == [] and nem.down == set() and nem.next_allowed == 1.8
