"""Issue 2 end to end on real valkey servers: clock jumps, a clean run, a broken run."""

import json
import secrets
import pytest

from harness.cluster.provider import Group
from harness.cluster.local import LocalCluster
from harness.cluster.valkey import ValkeyKind, connect
from tests.conftest import chaos
from tests.integration.clusters import clock_bumps

pytestmark = pytest.mark.integration

SUMMARY_FIELDS = {"valid", "violations", "ops", "acquires_ok", "acquires_fail", "acquires_info", "critical_sections",
                  "p50_acquire_ms", "p99_acquire_ms", "stale_writes_accepted", "stale_writes_rejected",
                  "lost_updates", "backend", "nemesis", "seed", "run_dir"}


def test_clock_jump_moves_time_and_expires_a_key_early(tmp_path):
    c = LocalCluster(secrets.token_hex(3), [Group(kind=ValkeyKind(), names=("n1", "n2"), fake_clock=True)],
                     log_dir=tmp_path)
    c.up()
    try:
        jumped, steady = (connect(c.node(n), 1.0) for n in ("n1", "n2"))
        for r in (jumped, steady):
            r.set("k", "v", px=10_000)
        assert abs(c.read_clock_offset("n1")) < 0.5
        c.set_clock("n1", 30)
        offsets = [c.read_clock_offset("n1") for _ in range(3)]  # valkey may answer once from its cache
        assert abs(offsets[-1] - 30) < 0.5
        assert jumped.get("k") is None, "the key should have expired early on the jumped node"
        assert steady.get("k") == "v", "the other node's clock and key must be untouched"
        c.set_clock("n1", 0)
        offsets = [c.read_clock_offset("n1") for _ in range(3)]
        assert abs(offsets[-1]) < 0.5
    finally:
        c.down()


def _summary(r) -> dict:
    lines = [line for line in r.stdout.splitlines() if line.startswith("{")]
    assert lines, f"no JSON summary; stderr: {r.stderr[-2000:]}"
    return json.loads(lines[-1])


def test_no_faults_is_valid(tmp_path):
    r = chaos("run", "--backend", "redlock", "--nemesis", "none", "--time-limit", "5", "--seed", "3",
              "--store", str(tmp_path), "--json")
    s = _summary(r)
    assert r.returncode == 0, r.stderr[-2000:]
    assert SUMMARY_FIELDS <= set(s)
    assert s["valid"] is True and s["violations"] == 0 and s["lost_updates"] == 0
    assert s["acquires_ok"] >= 10 and s["critical_sections"] == s["acquires_ok"]
    run_dir = tmp_path / s["run_dir"].split(str(tmp_path) + "/", 1)[-1]
    for f in ("history.jsonl", "results.json", "ops.csv", "spec.json"):
        assert (run_dir / f).exists()
    assert any((run_dir / "nodes").glob("n*.log"))


def test_clock_skew_breaks_redlock_with_a_fixed_seed(tmp_path):
    r = chaos("run", "--backend", "redlock", "--nemesis", "clock-skew", "--time-limit", "15", "--seed", "7",
              "--store", str(tmp_path), "--json")
    s = _summary(r)
    assert r.returncode == 1, r.stderr[-2000:]
    assert s["valid"] is False and s["violations"] >= 1
    assert set(s["violations_by_cause"]) == {"early-server-clock"} and s["unexplained"] == 0, s["violations_by_cause"]
    assert "granted early (server clock jump)" in chaos("check", s["run_dir"]).stdout, "chaos check says it too"
    history = [json.loads(line) for line in open(s["run_dir"] + "/history.jsonl")]
    bumps = clock_bumps(history)
    assert bumps and all(5.0 <= v <= 7.5 for asked, _ in bumps for v in asked.values()), bumps
    # read back as a server's TIME less the midpoint of the read: off by at most half its round
    # trip (0-2 ms here); 50 ms allows a 100 ms round trip on a loaded machine
    assert all(abs(read[n] - v) <= 0.05 for asked, read in bumps for n, v in asked.items()), bumps


def test_missing_server_binary_is_one_sentence_and_leaves_nothing(tmp_path):
    import os

    env_before = os.environ.get("CHAOSLOCK_VALKEY_SERVER")
    os.environ["CHAOSLOCK_VALKEY_SERVER"] = "/nonexistent/valkey-server"
    try:
        r = chaos("run", "--time-limit", "2", "--store", str(tmp_path))
    finally:
        if env_before is None:
            del os.environ["CHAOSLOCK_VALKEY_SERVER"]
        else:
            os.environ["CHAOSLOCK_VALKEY_SERVER"] = env_before
    assert r.returncode == 254 and "not an executable file" in r.stderr and "Traceback" not in r.stderr


def test_port_in_use_is_reported(tmp_path):
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    port = s.getsockname()[1]
    try:
        r = chaos("run", "--no-netns", "--base-port", str(port - 1), "--time-limit", "2", "--store", str(tmp_path))
    finally:
        s.close()
    assert r.returncode == 254 and f"port {port}" in r.stderr and "in use" in r.stderr
