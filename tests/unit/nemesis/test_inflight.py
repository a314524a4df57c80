"""cut-in-flight (nemesis/inflight.py): a holder armed at its ok acquire is cut from every lock
server at its release (or, with --renew and -o during=renew, its renew) invoke, before the
request leaves; healed after cut_ms. Without servers: the workers and the network are the
stand-ins of tests/unit/nemesis/test_client.py and test_partition.py."""

from __future__ import annotations

import pytest

from harness.core.contracts.nemesis import NemesisContext
from harness.core.errors import BadArgument
from harness.core.history import NEMESIS
from nemesis.inflight import CutInFlight
from tests.unit.nemesis.test_client import FAULT_PHASE, Workers, acquired, make, op, see, spec
from tests.unit.nemesis.test_partition import SERVERS, Net


def armed_cut(workers=None, net=None, t=1.5, **options):
    """A CutInFlight that armed a holder's worker at its ok acquire (seed 2 arms the first one)."""
    workers, net = workers or Workers(holding={1}), net or Net()
    nem = make(CutInFlight, workers, cluster=net, seed=2, **options)
    for _ in range(20):  # the seeded coin: arm at one of the ok acquires
        if see(nem, t, *acquired(1)) or nem.armed is not None:
            break
    assert nem.armed == 1 and workers.armed == (1, options.get("during", "release"))
    return nem, workers, net


def test_cut_in_flight_needs_namespaces_workers_it_can_park_and_renews_for_during_renew():
    with pytest.raises(BadArgument, match="cut-in-flight needs network namespaces"):
        make(CutInFlight, cluster=type("Loopback", (), {"fallback_reason": None})())
    with pytest.raises(BadArgument, match="cut-in-flight needs the runner's client workers"):
        CutInFlight().setup(NemesisContext(spec=spec("cut-in-flight"), cluster=Net(), workers=object()))
    with pytest.raises(BadArgument, match="during=renew needs holders that renew: add --renew"):
        make(CutInFlight, cluster=Net(), during="renew")


def test_the_armed_holders_release_invoke_cuts_its_namespace_then_lets_it_go_and_heals_after_cut_ms():
    nem, workers, net = armed_cut(cut_ms=800)
    assert see(nem, 1.6, op(1, "ok", "read", value=1), op(1, "ok", "write", value=2)) == []
    (p,) = see(nem, 1.7, op(1, "invoke", "release"))
    assert (p.f, p.value["worker"], p.value["client"], p.value["during"], p.phase) == ("cut-in-flight", 1, "c2", "release", "fault")
    done = nem.invoke(op(NEMESIS, "invoke", "cut-in-flight", p.value))
    assert done.type == "ok" and done.value["servers"] == SERVERS
    assert net.cuts == [{"c2": set(SERVERS), **{s: {"c2"} for s in SERVERS}}] and net.probed == [("c2", "n1")]
    assert workers.calls[-1] == ("let_go", 1)  # only once the cut is proven does the request leave
    (h,) = see(nem, 1.8, done)
    assert (h.at, h.f, h.phase) == (2.6, "heal-in-flight", "heal")
    assert nem.invoke(op(NEMESIS, "invoke", "heal-in-flight", h.value)).type == "ok" and net.heals == 1
    nem.teardown()
    assert net.heals == 1


def test_an_invoke_the_worker_does_not_wait_at_plans_nothing_and_it_stays_armed():
    workers = Workers(holding={1})
    nem, workers, net = armed_cut(workers)
    workers.park_lands = False  # an invoke from before it was armed, delivered late in its batch
    assert see(nem, 1.7, op(1, "invoke", "release")) == [] and nem.armed == 1
    workers.park_lands = True
    assert [p.f for p in see(nem, 1.8, op(1, "invoke", "release"))] == ["cut-in-flight"]


def test_an_invoke_read_while_later_ops_of_the_parked_worker_are_on_the_way_plans_nothing():
    workers = Workers()
    nem, workers, net = armed_cut(workers)
    workers.recorded[1] += 1  # the invoke it waits at: recorded, not yet read
    assert see(nem, 1.7, op(1, "invoke", "release")) == [] and nem.armed == 1
    workers.recorded[1] -= 1
    (c,) = see(nem, 1.7, op(1, "invoke", "release"))
    assert c.f == "cut-in-flight"


def test_a_worker_that_did_not_wait_for_the_cut_is_a_miss_and_the_next_holder_is_armed():
    workers = Workers(holding={1})
    nem, workers, net = armed_cut(workers)
    (p,) = see(nem, 1.7, op(1, "invoke", "release"))
    workers.park_lands = False  # it waited PARK_MAX_S and went on before the nemesis came
    done = nem.invoke(op(NEMESIS, "invoke", "cut-in-flight", p.value))
    assert done.type == "fail" and done.error.startswith("missed: worker 1 had sent its release") and net.cuts == []
    assert see(nem, 1.8, done) == []
    assert nem.cut is None and nem.next_allowed == 1.8


def test_a_cut_whose_probe_still_reaches_is_in_doubt():
    nem, workers, net = armed_cut(net=Net(reaches=True))
    (p,) = see(nem, 1.7, op(1, "invoke", "release"))
    done = nem.invoke(op(NEMESIS, "invoke", "cut-in-flight", p.value))
    assert done.type == "info" and "still reaches" in done.error and workers.calls[-1] == ("let_go", 1)


def test_with_during_renew_the_renew_invoke_is_cut_and_the_release_is_not():
    nem, workers, net = armed_cut(during="renew", renew=True)
    assert see(nem, 1.6, op(1, "invoke", "release")) == []
    (p,) = see(nem, 1.7, op(1, "invoke", "renew"))
    assert p.value["during"] == "renew"


def test_an_armed_op_too_late_in_the_fault_phase_is_let_go_uncut():
    nem, workers, net = armed_cut(cut_ms=2000)
    assert see(nem, FAULT_PHASE - 1.0, op(1, "invoke", "release")) == []
    assert workers.calls[-1] == ("let_go", 1) and nem.armed is None and nem.cut is None


def test_teardown_disarms_the_armed_worker():
    nem, workers, net = armed_cut()
    nem.teardown()
    assert workers.calls[-1] == ("arm", 1, None) and net.heals == 0


# -- -o lose=request|reply: one direction cut, the servers' state read back --------------------
class OneWayNet(Net):
    """A Net that can cut one direction (CutsOneWay); the key's state comes from `states`."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.one_way: list[tuple] = []

    def cut_one_way(self, client, servers, lose) -> None:
        self.one_way.append((client, sorted(servers), lose))


def test_lose_needs_a_provider_that_cuts_one_direction_and_is_refused_on_ssh():
    with pytest.raises(BadArgument, match="lose=request needs a provider that can cut one direction"):
        make(CutInFlight, cluster=Net(), lose="request")
    from dataclasses import replace

    assert CutInFlight.refusal(spec("cut-in-flight", lose="reply")) is None

    s = replace(spec("cut-in-flight", lose="reply"), cluster="ssh")
    assert "ssh provider cannot" in CutInFlight.refusal(s)
    with pytest.raises(BadArgument, match="lose=sideways: choose one of both, request, reply"):
        make(CutInFlight, cluster=OneWayNet(), lose="sideways")


@pytest.mark.parametrize("lose", ["request", "reply"])
def test_a_one_way_cut_cuts_only_that_direction_and_records_what_the_servers_did(monkeypatch, lose):
    from nemesis import inflight, readback

    reads = iter([{"n1": {"value": "v", "pttl_ms": 900}, "t": 0.0},
                  {"n1": None if lose == "reply" else {"value": "v", "pttl_ms": 600}, "t": 0.3}])
    monkeypatch.setattr(readback, "readable", lambda nodes: None)
    monkeypatch.setattr(readback, "read", lambda nodes, key: next(reads))
    monkeypatch.setattr(inflight, "WATCH_STEP_S", 0)
    net = OneWayNet()
    nem, workers, _ = armed_cut(net=net, lose=lose)
    (p,) = see(nem, 1.7, op(1, "invoke", "release", value="v"))
    assert p.value["lose"] == lose
    done = nem.invoke(op(NEMESIS, "invoke", "cut-in-flight", p.value))
    assert net.cuts == [] and net.one_way == [("c2", SERVERS, lose)] and net.probed == [("c2", "n1")]
    assert done.type == "ok", done.error
    assert done.value["acted"] is (lose == "reply")
    assert done.value["server"] == ("released (key gone)" if lose == "reply" else "not released (key present)")
    assert done.value["server_state"] == ("n1: key absent" if lose == "reply" else "n1: key present (expires in 600 ms)")


def test_a_one_way_cut_whose_servers_did_the_opposite_is_in_doubt(monkeypatch):
    from nemesis import inflight, readback

    reads = iter([{"n1": {"value": "v", "pttl_ms": 900}, "t": 0.0}, {"n1": None, "t": 0.01}])
    monkeypatch.setattr(readback, "readable", lambda nodes: None)
    monkeypatch.setattr(readback, "read", lambda nodes, key: next(reads))
    monkeypatch.setattr(inflight, "WATCH_STEP_S", 0)
    nem, workers, net = armed_cut(net=OneWayNet(), lose="request")
    (p,) = see(nem, 1.7, op(1, "invoke", "release", value="v"))
    done = nem.invoke(op(NEMESIS, "invoke", "cut-in-flight", p.value))
    assert done.type == "info" and "acted on the release whose request was to be lost" in done.error


def test_a_one_way_cut_on_servers_without_a_reader_says_not_verified(monkeypatch):
    from nemesis import readback

    monkeypatch.setattr(readback, "readable", lambda nodes: "not verified: no read-back for etcd yet")
    nem, workers, net = armed_cut(net=OneWayNet(), lose="reply")
    (p,) = see(nem, 1.7, op(1, "invoke", "release", value="v"))
    done = nem.invoke(op(NEMESIS, "invoke", "cut-in-flight", p.value))
    assert done.type == "ok" and done.value["server_state"].startswith("not verified") and done.value["acted"] is None
