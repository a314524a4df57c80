"""clock-skew: bump, back, strobe and drift on the servers (libfaketime for valkey, the vDSO
patch for etcd and ZooKeeper), read back by the servers themselves; and on the clients."""

from __future__ import annotations

import time

from harness.cluster import etcd, zookeeper
from harness.cluster.valkey import connect
from nemesis.clock import ClockSkew
from tests.integration.clusters import clock_bumps, etcd_get, etcd_put, zk_read, zk_write
from tests.integration.nemesis.probes import (MARKS, assert_clean, clock_samples, ctx, figure, inv, lock_nodes,
                                              need_timewarp, nemesis_ops, on, run_json, zk_roles)

pytestmark = MARKS


@on("etcd")
class TestEtcd:
    def test_clock_skew_timewarp(self, cluster):
        need_timewarp()
        nodes = lock_nodes(cluster)
        nem = ClockSkew()
        nem.setup(ctx(cluster))
        assert sorted(nem.targets) == ["e1", "e2", "e3"]
        op = nem.invoke(inv("clock-bump", {"e1": 5.0, "e2": 5.0}))
        try:
            assert op.type == "ok", op.error
            assert all(abs(v - 5.0) <= 1.5 for v in op.value.values()), op.value  # (a) Date header moved
            precise = etcd.read_clock_precise(cluster.node("e1")) - time.time()
            assert abs(precise - 5.0) < 0.3, precise
            # (b) etcd keeps serving puts (Raft runs on the monotonic clock)
            for n in nodes:
                etcd_put(n, f"skewed-{n.name}", "ok")
            assert etcd_get(cluster.node("e3"), "skewed-e1") == "ok"
        finally:
            reset = nem.invoke(inv("clock-reset", ["e1", "e2"]))
            nem.teardown()
        assert reset.type == "ok", reset.error
        after = etcd.read_clock_precise(cluster.node("e1")) - time.time()
        assert abs(after) < 0.3
        figure("clock-skew etcd (timewarp)", f"asked +5 s: Date header read back {op.value}, precise "
                                             f"{precise:+.3f} s; puts served on all 3; reset reads {after:+.3f} s")
        nem = ClockSkew()
        nem.setup(ctx(cluster))
        back = nem.invoke(inv("clock-bump", {"e2": -5.0}))
        try:
            assert back.type == "ok", back.error
            behind = etcd.read_clock_precise(cluster.node("e2")) - time.time()
            assert abs(behind + 5.0) < 0.3, behind
            etcd_put(cluster.node("e2"), "behind", "ok")
        finally:
            reset = nem.invoke(inv("clock-reset", ["e2"]))
            nem.teardown()
        assert reset.type == "ok", reset.error
        figure("clock-skew back etcd (timewarp)", f"asked -5 s: Date header {back.value}, precise {behind:+.3f} s; "
                                                  f"puts served; reset reads {reset.value}")
        assert_clean(cluster)


@on("valkey")
class TestValkey:
    def test_clock_bump_and_back(self, cluster):
        nem = ClockSkew()
        nem.setup(ctx(cluster))
        assert sorted(nem.targets) == [f"n{i}" for i in range(1, 6)]
        n1, n2, n4 = cluster.node("n1"), cluster.node("n2"), cluster.node("n4")
        with connect(n1) as r:
            r.set("early", "x", px=4000)
        with connect(n4) as r:
            r.set("control", "x", px=4000)
        op = nem.invoke(inv("clock-bump", {"n1": 5.0, "n2": 5.0, "n3": 5.0}))
        try:
            assert op.type == "ok", op.error
            assert all(abs(v - 5.0) <= 0.5 for v in op.value.values())  # (a) TIME moved
            with connect(n1) as r:
                s, us = r.time()
                time_off = s + us / 1e6 - time.time()
                gone = r.get("early") is None  # (b) 4 s left, clock +5 s: expired at once
            with connect(n4) as r:
                control = r.pttl("control")
            assert abs(time_off - 5.0) < 0.5 and gone and control > 3000
        finally:
            reset = nem.invoke(inv("clock-reset", ["n1", "n2", "n3"]))
        assert reset.type == "ok" and all(abs(v) <= 0.5 for v in reset.value.values())
        figure("clock-skew bump valkey", f"asked +5 s, TIME read back {op.value} (direct {time_off:+.3f} s); "
                                         f"a key with 4 s left expired at once, control on n4 PTTL {control} ms; "
                                         f"reset reads {reset.value}")
        with connect(n2) as r:
            r.set("late", "x", px=3000)
        back = nem.invoke(inv("clock-bump", {"n2": -5.0}))
        try:
            assert back.type == "ok", back.error
            with connect(n2) as r:
                pttl = r.pttl("late")
            assert pttl > 7000  # lives ~5 s longer than its TTL
        finally:
            reset = nem.invoke(inv("clock-reset", ["n2"]))
            nem.teardown()
        assert reset.type == "ok"
        figure("clock-skew back valkey", f"asked -5 s, read back {back.value}; a 3 s key's PTTL became {pttl} ms; "
                                         f"reset reads {reset.value}")
        assert_clean(cluster)

    def test_clock_strobe(self, cluster):
        nem = ClockSkew()
        nem.setup(ctx(cluster))
        op = nem.invoke(inv("clock-strobe", {"nodes": ["n1", "n2", "n3"], "delta": 3.0, "period_s": 0.2}))
        samples = []
        try:
            assert op.type == "ok" and set(op.value["measured"]) == {"n1", "n2", "n3"}
            samples = clock_samples(cluster, "n1", 1.5)
        finally:
            reset = nem.invoke(inv("clock-reset", ["n1", "n2", "n3"]))
            nem.teardown()
        high = [s for s in samples if abs(s - 3.0) < 0.5]
        low = [s for s in samples if abs(s) < 0.5]
        assert high and low and len(high) + len(low) == len(samples), samples
        assert reset.type == "ok" and all(abs(v) <= 0.5 for v in reset.value.values())
        after = clock_samples(cluster, "n1", 0.6)  # three periods: the strobe thread is gone, the clock stays at 0
        assert all(abs(s) < 0.5 for s in after), after
        figure("clock-skew strobe valkey", f"op measured {op.value['measured']}; n1 sampled {len(samples)}x in 1.5 s: "
                                           f"{len(high)} at ~+3 s, {len(low)} at ~0; reset reads {reset.value}")
        assert_clean(cluster)

    def test_clock_drift(self, cluster):
        nem = ClockSkew()
        nem.setup(ctx(cluster))
        t0 = time.monotonic()
        op = nem.invoke(inv("clock-drift", {"nodes": ["n1", "n2", "n3"], "rate": 1.5}))
        try:
            assert op.type == "ok", op.error
            assert all(0.05 < v < 0.5 for v in op.value["measured"].values()), op.value
            time.sleep(1.5)
            later = cluster.read_clock_offset("n1")
            elapsed = time.monotonic() - t0
            want = elapsed * 0.5
            assert abs(later - want) < 0.3, (later, want)
        finally:
            reset = nem.invoke(inv("clock-reset", ["n1", "n2", "n3"]))
            nem.teardown()
        assert reset.type == "ok" and all(abs(v) <= 0.5 for v in reset.value.values())
        figure("clock-skew drift valkey", f"rate 1.5: op measured {op.value['measured']}; "
                                          f"{later:+.3f} s after {elapsed:.2f} s (expected {want:+.3f}); "
                                          f"reset reads {reset.value}")
        assert_clean(cluster)


@on("zookeeper")
class TestZooKeeper:
    def test_clock_skew_timewarp(self, cluster):
        need_timewarp()
        leader, followers = zk_roles(cluster)
        nem = ClockSkew()
        nem.setup(ctx(cluster))
        assert sorted(nem.targets) == ["z1", "z2", "z3"]
        want = {leader.name: 5.0, followers[0].name: 5.0}
        op = nem.invoke(inv("clock-bump", want))
        try:
            assert op.type == "ok", op.error
            assert all(abs(v - 5.0) <= 0.5 for v in op.value.values())  # (a) the JVM's own log stamps moved
            zk_write(leader, "/skewed", b"1")  # (b) the ensemble keeps serving
            assert zk_read(followers[1], "/skewed") == b"1"
            time.sleep(2.5)  # longer than syncLimit: nobody drops out over a wall-clock jump
            modes = sorted(zookeeper.mode(n) for n in lock_nodes(cluster))
            assert modes == ["follower", "follower", "leader"], modes
        finally:
            reset = nem.invoke(inv("clock-reset", list(want)))
            nem.teardown()
        assert reset.type == "ok" and all(abs(v) <= 0.5 for v in reset.value.values())
        figure("clock-skew zookeeper (timewarp)", f"asked +5 s on leader and a follower, read back {op.value}; "
                                                  f"writes and reads served, modes {modes}; reset reads {reset.value}")
        assert_clean(cluster)

    def test_clock_back_strobe_drift_timewarp(self, cluster):
        need_timewarp()
        leader, followers = zk_roles(cluster)
        f = followers[0].name
        nem = ClockSkew()
        nem.setup(ctx(cluster))
        try:
            back = nem.invoke(inv("clock-bump", {leader.name: -5.0}))
            assert back.type == "ok" and abs(back.value[leader.name] + 5.0) <= 0.5, back
            zk_write(leader, "/behind", b"1")
            assert nem.invoke(inv("clock-reset", [leader.name])).type == "ok"
            strobe = nem.invoke(inv("clock-strobe", {"nodes": [f], "delta": 3.0, "period_s": 0.2}))
            assert strobe.type == "ok"
            samples = clock_samples(cluster, f, 1.5)
            high = [x for x in samples if abs(x - 3.0) < 0.5]
            low = [x for x in samples if abs(x) < 0.5]
            assert high and low and len(high) + len(low) == len(samples), samples
            t0 = time.monotonic()
            drift = nem.invoke(inv("clock-drift", {"nodes": [f], "rate": 1.5}))
            assert drift.type == "ok", drift.error
            time.sleep(1.5)
            later, elapsed = cluster.read_clock_offset(f), time.monotonic() - t0
            assert abs(later - elapsed * 0.5) < 0.3, (later, elapsed)
            assert zookeeper.mode(cluster.node(f)) == "follower"
        finally:
            reset = nem.invoke(inv("clock-reset", [leader.name, f]))
            nem.teardown()
        assert reset.type == "ok" and all(abs(v) <= 0.5 for v in reset.value.values())
        figure("clock-skew back/strobe/drift zookeeper (timewarp)",
               f"back: leader read back {back.value}, writes served; strobe +3 s/200 ms on {f}: {len(samples)} samples, "
               f"{len(high)} at ~+3 s, {len(low)} at ~0; drift 1.5: {later:+.3f} s after {elapsed:.2f} s "
               f"(expected {elapsed * 0.5:+.3f}); reset reads {reset.value}")
        assert_clean(cluster)


def test_client_clock_skew_run(tmp_path):
    summary, history = run_json(tmp_path, "--backend", "redlock", "--nemesis", "clock-skew",
                                "-o", "clock_target=clients", "-o", "validity_clock=wall",
                                "--time-limit", "8", "--concurrency", "3", "--seed", "4")
    assert summary.get("client_clock_reads"), summary
    bumps = clock_bumps(history)
    assert bumps and all(k.startswith("c") for asked, _ in bumps for k in asked), bumps
    assert all(5.0 <= v <= 7.5 for asked, _ in bumps for v in asked.values()), bumps
    # an in-process client's offset is read back as the one it uses, not measured: exact
    assert all(read == asked for asked, read in bumps), bumps
    resets = [o for o in nemesis_ops(history, "ok") if o["f"] == "clock-reset"]
    assert resets and all(v == 0.0 for v in resets[-1]["value"].values())
    figure("clock-skew clients", f"client_clock_reads {summary['client_clock_reads']}; offsets read back "
                                 f"{[read for _, read in bumps]}; violations {summary['violations']}")
