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


@pytest.mark.parametrize("argv, when, sig, presses", [
    (["compare", "--quick", "--backends", "redis"], "workers", signal.SIGINT, 3),
    (["compare", "--quick", "--backends", "redis"], "workers", signal.SIGTERM, 1),
    (["explore", "--backend", "redis", "--time-limit", "6", "--steps", "1"], "workers", signal.SIGINT, 1),
    (["client-check", EXAMPLE, "--servers", "valkey:1"], 0.5, signal.SIGINT, 3),
    (["reproduce", "gc-pause", "--time-limit", "12"], 2.0, signal.SIGTERM, 1),  # 12: a pause fits (harness/core/refusals.py)
    (["matrix", "--backends", "redis", "--nemeses", "none", "--seeds", "1", "--time-limit", "6"], "workers",
     signal.SIGINT, 2),
], ids=["compare-3xINT", "compare-TERM", "explore-INT", "client-check-3xINT", "reproduce-TERM", "matrix-2xINT"])
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
    try:
        out, err = p.communicate(timeout=45)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        pytest.fail(f"{argv[0]} did not stop within 45 s of the signal: {err[-1500:]}")
    assert p.returncode == (130 if sig == signal.SIGINT else 143), err[-2000:]
    assert "Traceback" not in err, err[-2000:]
    after = eventually(everything_left, timeout=10, until=lambda a: not {k: a[k] - before[k] for k in a
                                                                         if a[k] - before[k]})
    assert {k: after[k] - before[k] for k in after if after[k] - before[k]} == {}
