"""Every long command stops within seconds of one, two or three Ctrl-Cs or a SIGTERM, at the
worst moment (its workers starting), and leaves nothing: no process, namespace, cgroup,
state dir or rule.

The moment: a run's fork server is being started (its socket dir, mp/, appears in the run's
state dir). A press there used to leave a worker that the fork server had made but no
Process object knew, and the teardown waited on it for good (compare --quick hung in 2 of 3
tries)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.cluster.provider import state_root
from tests.conftest import ROOT, eventually
from tests.integration.commands.test_interrupt import leftovers

pytestmark = pytest.mark.integration

EXAMPLE = f"{sys.executable} {ROOT / 'clients/example-redis/client.py'}"


def everything_left() -> dict[str, set[str]]:
    found = leftovers()
    found["cgroups"] = {str(p) for p in Path("/sys/fs/cgroup").glob("*/chaoslock-*")}
    return found


def workers_starting(since: float) -> bool:
    """A run made after `since` has begun starting its workers (its fork server's socket dir)."""
    root = state_root()
    return root.is_dir() and any((d / "mp").is_dir() and d.stat().st_mtime >= since for d in root.iterdir())


def run_state(since: float) -> bool:
    root = state_root()
    return root.is_dir() and any((d / "state.json").is_file() and d.stat().st_mtime >= since for d in root.iterdir())


def stopped(p: subprocess.Popen, what: str) -> tuple[str, str]:
    """Its output once it ended, or a failure if it did not end within 45 s of the signal."""
    try:
        return p.communicate(timeout=45)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        err = p.communicate()[1]
        pytest.fail(f"{what} did not stop within 45 s of the signal: {err[-1500:]}")


@pytest.mark.parametrize("argv, when, sig, presses", [
    (["compare", "--quick", "--backends", "redis"], "workers", signal.SIGINT, 3),
    (["compare", "--quick", "--backends", "redis"], "workers", signal.SIGTERM, 1),
    (["explore", "--backend", "redis", "--time-limit", "6", "--steps", "1"], "workers", signal.SIGINT, 1),
    (["client-check", EXAMPLE, "--servers", "valkey:1"], 0.5, signal.SIGINT, 3),
    (["reproduce", "gc-pause", "--time-limit", "12"], 2.0, signal.SIGTERM, 1),  # 12: a pause fits (harness/core/refusals.py)
    (["matrix", "--backends", "redis", "--nemeses", "none", "--seeds", "1", "--time-limit", "6"], "workers",
     signal.SIGINT, 2),
    (["audit", "--client", EXAMPLE, "--servers", "valkey:1", "--scenarios", "contention", "--budget", "0"], "workers",
     signal.SIGINT, 2),
], ids=["compare-3xINT", "compare-TERM", "explore-INT", "client-check-3xINT", "reproduce-TERM", "matrix-2xINT",
        "audit-2xINT"])
def test_long_command_stops_and_leaves_nothing(tmp_path, argv, when, sig, presses):
    before = everything_left()
    since = time.time() - 1
    store = [] if argv[0] == "client-check" else ["--store", str(tmp_path)]
    p = subprocess.Popen([sys.executable, "-m", "harness", *argv, *store], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    if when == "workers":
        eventually(lambda: p.poll() is not None or workers_starting(since), timeout=120, step=0.005)
    else:
        eventually(lambda: p.poll() is not None or run_state(since), timeout=120, step=0.02)
        time.sleep(when)
    assert p.poll() is None, f"it ended before it was interrupted: {p.communicate()[1][-2000:]}"
    for _ in range(presses):
        os.killpg(p.pid, sig)  # a terminal's Ctrl-C reaches the whole foreground group
        time.sleep(0.3)
    out, err = stopped(p, argv[0])
    assert p.returncode == (130 if sig == signal.SIGINT else 143), err[-2000:]
    assert "Traceback" not in err, err[-2000:]
    if argv[0] == "audit":  # the card is written, covering what finished, and says it was interrupted
        import json

        card = json.loads(next((tmp_path / "audit").glob("*/audit.json")).read_text())
        assert card["interrupted"] == "Ctrl-C" and card["exit_code"] == 2 and not card["stopped"], card
        assert [r["valid"] for r in card["runs"]] in ([], ["unknown"]), card["runs"]  # the prefix of a run decides nothing
    after = eventually(everything_left, timeout=10, until=lambda a: not {k: a[k] - before[k] for k in a
                                                                         if a[k] - before[k]})
    assert {k: after[k] - before[k] for k in after if after[k] - before[k]} == {}


@pytest.mark.parametrize("script, sig", [("overhead.py", signal.SIGTERM)])  # every benchmark: benchmarks/stops.py
def test_a_benchmark_stops_on_the_first_signal_and_leaves_nothing(script, sig):
    """A benchmark runs clusters and whole runs for minutes: the first signal ends it (the run
    of the moment is torn down, the next one never starts), exit 128 + the signal, one line."""
    before = everything_left()
    since = time.time() - 1
    args = ["--seconds", "20", "--repeat", "3"] if script == "overhead.py" else ["--backends", "redis", "--quick",
                                                                                  "--seconds", "20"]
    p = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / script), *args], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    eventually(lambda: p.poll() is not None or run_state(since), timeout=120, step=0.02)
    time.sleep(1.0)
    assert p.poll() is None, f"it ended before it was interrupted: {p.communicate()[1][-2000:]}"
    started = time.monotonic()
    os.killpg(p.pid, sig)
    out, err = stopped(p, script)
    assert time.monotonic() - started < 30, "it went on to another run after the signal"
    code = 130 if sig == signal.SIGINT else 143
    assert p.returncode == code, out[-1000:] + err[-2000:]
    assert "Traceback" not in err, err[-2000:]
    assert err.strip().splitlines()[-1].endswith(f"exit code: {code} (interrupted by "
                                                 f"{'Ctrl-C' if code == 130 else 'SIGTERM'})"), err[-1000:]
    after = eventually(everything_left, timeout=10, until=lambda a: not {k: a[k] - before[k] for k in a
                                                                         if a[k] - before[k]})
    assert {k: after[k] - before[k] for k in after if after[k] - before[k]} == {}
