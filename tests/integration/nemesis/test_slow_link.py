"""slow-link (no netem here: an NFQUEUE delayer, iptables statistic, htb): the delay asked for
shows in the measured round trip and in the run's acquire latency, loss shows as failed
connects, bandwidth is read back from tc, and nothing of it is left after."""

from __future__ import annotations

import json
import os
import re
import signal
import statistics
import subprocess
import sys

import pytest

from harness.core.contracts.cluster import Shape
from nemesis.link import SlowLink
from tests.conftest import ROOT, chaos, eventually
from tests.integration.nemesis.probes import MARKS, ctx, inv, namespaces, nemesis_ops, on, run_json

pytestmark = MARKS


def shape_rules(cluster) -> list[str]:
    out = []
    for ns in namespaces(cluster):
        save = subprocess.run(["ip", "netns", "exec", ns, "iptables-save"], capture_output=True, text=True).stdout
        out += [f"{ns}: {l}" for l in save.splitlines() if "chaosshape-" in l]
    return out


def delayers() -> list[str]:
    ps = subprocess.run(["pgrep", "-af", "harness.cluster.delayer"], capture_output=True, text=True).stdout
    return [l for l in ps.splitlines() if "pgrep" not in l]


@on("valkey")
class TestValkey:
    def test_delay_is_measured_and_removed(self, cluster):
        nem = SlowLink()
        nem.setup(ctx(cluster, delay_ms=120, jitter_ms=0))
        try:
            op = nem.invoke(inv("slow-link", None))
            assert op.type == "ok", op
            added = op.value["rtt_after_ms"] - op.value["rtt_before_ms"]
            assert 120 * 0.8 <= added <= 120 * 1.2 + 30, op.value  # a connect is one round trip
            assert shape_rules(cluster) and delayers()
        finally:
            healed = nem.invoke(inv("fast-link", None))
            nem.teardown()
        assert healed.type == "ok"
        assert shape_rules(cluster) == [] and delayers() == []

    def test_loss_fails_connects_and_rate_is_read_back(self, cluster):
        got = cluster.shape_links([("c1", "n1")], Shape(loss=0.5, rate_kbit=300), probes=40)
        try:
            failed, n = map(int, got["connects_failed"].split("/"))
            assert 0.25 <= failed / n <= 0.75, got  # a SYN lost half the time (n=40: p < 0.002 outside)
            qd = subprocess.run(["ip", "netns", "exec", cluster.network.host("c1").netns, "tc", "class", "show",
                                 "dev", "eth0"], capture_output=True, text=True).stdout
            assert "rate 300Kbit" in qd, qd
        finally:
            cluster.unshape_links()
        assert shape_rules(cluster) == []

    def test_slow_link_without_a_change_is_refused(self, cluster):
        with pytest.raises(Exception, match="changes nothing"):
            SlowLink().setup(ctx(cluster, delay_ms=0))


def test_the_delay_shows_in_the_acquire_latency_of_a_run(tmp_path):
    """redis with one client: an acquire is one round trip on an open connection, so during the
    slow link it takes the delay longer (+-20 %). The client's socket timeout (100 ms by
    default, so a 150 ms link times every call out: that too is what a slow link does) is
    raised above the delay."""
    s, history = run_json(tmp_path, "--backend", "redis", "--nemesis", "slow-link", "-o", "delay_ms=150",
                          "-o", "node_timeout_ms=1000",
                          "--time-limit", "12", "--concurrency", "1", "--nemesis-interval", "3", "--hold-max", "200", "--seed", "5")
    assert s["valid"] is True, s
    # A band runs from the slow-link's ok (the rules are in, measured) to the fast-link's
    # invoke (they start to go).
    bands, start = [], None
    for o in sorted((o for o in history if o["process"] == "nemesis"), key=lambda o: o["time_ns"]):
        if o["f"] == "slow-link" and o["type"] == "ok":
            start = o["time_ns"]
        elif o["f"] == "fast-link" and o["type"] == "invoke" and start is not None:
            bands.append((start, o["time_ns"]))
            start = None
    assert bands, nemesis_ops(history, "ok")
    # acquire and release are one round trip each to the lock server (SET NX PX, the script)
    inside, outside = [], []
    pending = {}
    for o in history:
        if o["f"] not in ("acquire", "release") or o["process"] == "nemesis":
            continue
        if o["type"] == "invoke":
            pending[(o["process"], o["f"])] = o["time_ns"]
        elif o["type"] == "ok" and (o["process"], o["f"]) in pending:
            t0 = pending.pop((o["process"], o["f"]))
            ms = (o["time_ns"] - t0) / 1e6
            (inside if any(a <= t0 and o["time_ns"] <= b for a, b in bands) else outside).append(ms)
    assert len(inside) >= 3 and len(outside) >= 3, (inside, outside)
    added = statistics.median(inside) - statistics.median(outside)
    print(json.dumps({"inside_ms": statistics.median(inside), "outside_ms": statistics.median(outside)}))
    assert 150 * 0.8 <= added <= 150 * 1.2, (added, inside, outside)


def test_a_killed_run_leaves_its_delayer_to_cluster_down(tmp_path):
    """SIGKILL the run while a link is slow: its delayer (in the run's cgroup) and its rules
    (in the run's namespaces) go with `chaos cluster down <id>`. The kill waits for the rules,
    which are added once the delayer said it is ready: a delayer killed before that (its
    "ready" then meets a closed pipe) dies with the run and has left nothing (seen 1 in 6 under
    load when the kill came as soon as the process showed)."""

    def shaping() -> str | None:
        line = next(iter(delayers()), None)
        ns = line and re.search(r"cl-[0-9a-f]{6}-c1", line)
        save = ns and subprocess.run(["ip", "netns", "exec", ns.group(0), "iptables-save"],
                                     capture_output=True, text=True).stdout
        return line if save and "chaosshape-" in save else None

    p = subprocess.Popen([sys.executable, "-m", "harness", "run", "--backend", "redis", "--nemesis", "slow-link",
                          "-o", "delay_ms=80", "--time-limit", "30", "--nemesis-interval", "2", "--store", str(tmp_path)],
                         cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        line = eventually(shaping, timeout=30, step=0.05)
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=10)
    run_id = re.search(r"cl-([0-9a-f]{6})-c1", line).group(1)
    assert delayers(), "the delayer must outlive a SIGKILLed run until cluster down"
    r = chaos("cluster", "down", run_id, timeout=120)
    assert r.returncode == 0, r.stderr
    assert delayers() == [], delayers()
    spaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert f"cl-{run_id}" not in spaces
