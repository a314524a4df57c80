"""Causes of violations on real runs with no fault at all (issue 16): a client with a bug gets
UNEXPLAINED, and a machine made slow on purpose (a CPU quota shared with busy loops) gets
"holder overran its lease (no fault)", never UNEXPLAINED. Runs with faults are checked where
they already run: pause-holder (nemesis/test_pause.py, the reference clients, gc-pause in
test_reproduce.py) and redlock under clock-skew (test_redlock_run.py)."""

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, chaos

pytestmark = pytest.mark.integration

LIAR = f"python3 {ROOT / 'tests/clients/liar.py'}"


def summary(r):
    assert "Traceback" not in r.stderr + r.stdout and r.stdout.strip(), r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("mode", ["long-validity", "skip-nx"])
def test_a_client_with_a_bug_gets_unexplained_with_no_fault(tmp_path, mode):
    s = summary(chaos("run", "--client", f"{LIAR} {mode}", "--servers", "valkey:1", "--time-limit", "5",
                      "--concurrency", "3", "--seed", "1", "--store", str(tmp_path), "--json"))
    # no fault, so nothing excuses them: every violation is UNEXPLAINED, or (skip-nx) follows from a
    # release by a process whose key a steal overwrote (two plain SETs answered in the same
    # millisecond: which came first is a tie the history cannot break), the client's own doing too
    causes = s["violations_by_cause"]
    assert s["violations"] >= 1 and s["unexplained"] >= 1 and set(causes) <= {"unexplained", "early-foreign-release"}, \
        causes
    text = chaos("check", s["run_dir"]).stdout
    assert "UNEXPLAINED" in text, text


def cpu_controller() -> tuple[str, Path] | None:
    """("v1", the cpu hierarchy's mount) or ("v2", the cgroup2 mount that has the cpu
    controller), from /proc/self/mounts; None where neither is (a kernel without CFS quotas).
    A hybrid host (this one) has both mounts, and cpu on v1: a controller bound to a v1
    hierarchy is absent from the v2 one's cgroup.controllers."""
    v2 = None
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _, where, fstype, opts, *_ = line.split()
        if fstype == "cgroup" and "cpu" in opts.split(",") and Path(where, "cpu.cfs_quota_us").exists():
            return "v1", Path(where)
        if fstype == "cgroup2" and "cpu" in Path(where, "cgroup.controllers").read_text().split():
            v2 = v2 or Path(where)
    return None if v2 is None else ("v2", v2)


CPU = cpu_controller()


@pytest.mark.skipif(CPU is None, reason="this kernel has no cgroup cpu controller (v1 or v2) to slow the run")
def test_a_slow_machine_overruns_leases_with_no_fault_and_nothing_is_unexplained(tmp_path):
    version, root = CPU
    cg = root / f"chaoslock-busy-{os.getpid()}"
    enabled = False
    if version == "v2" and "cpu" not in (root / "cgroup.subtree_control").read_text().split():
        (root / "cgroup.subtree_control").write_text("+cpu")  # the root cgroup may hold processes and enable it
        enabled = True
    cg.mkdir()
    env = dict(os.environ)
    try:
        # 25 % of one CPU, for the run and two busy loops, in 50 ms slices, each followed by
        # 150 ms throttled: longer than the 100 ms lease, so a holder caught by one comes back
        # past its lease (with 100 ms periods, 75 ms throttles rarely did: 0 violations in 2 of
        # 4 CI runs once recording stopped costing CPU)
        if version == "v1":
            (cg / "cpu.cfs_period_us").write_text("200000")
            (cg / "cpu.cfs_quota_us").write_text("50000")
        else:
            (cg / "cpu.max").write_text("50000 200000")
            # the run would move its servers and workers into its own cgroup in this same v2
            # hierarchy (harness/cluster/containment.py), out from under the quota; on v1 the cpu
            # hierarchy is apart from the one it contains them in, so they stay throttled
            env["CHAOSLOCK_CGROUP"] = "none"
        run = [sys.executable, "-m", "harness", "run", "--backend", "redis", "--ttl", "100", "--hold-max", "90",
               "--time-limit", "4", "--concurrency", "4", "--seed", "1", "--store", str(tmp_path), "--json"]
        busy = "timeout 120 python3 -c 'while True: pass' >/dev/null 2>&1"
        script = (f"echo $$ > {cg}/cgroup.procs; {busy} & b1=$!; {busy} & b2=$!; {shlex.join(run)}; rc=$?; "
                  f"kill $b1 $b2; exit $rc")
        r = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=180, cwd=ROOT, env=env)
        s = summary(r)
    finally:
        for pid in (cg / "cgroup.procs").read_text().split():
            os.kill(int(pid), signal.SIGKILL)
        deadline = time.monotonic() + 5
        while (cg / "cgroup.procs").read_text().strip() and time.monotonic() < deadline:
            time.sleep(0.05)
        cg.rmdir()
        if enabled:
            try:
                (root / "cgroup.subtree_control").write_text("-cpu")
            except OSError:  # another cgroup now uses it: leave it on
                pass
    assert s["unexplained"] == 0, s["violations_by_cause"]
    assert set(s["violations_by_cause"]) <= {"overran-no-fault"}, s["violations_by_cause"]
    assert s["violations"] >= 1, "starved of CPU, some holder should go on past its 100 ms lease"
