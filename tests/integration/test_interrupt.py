"""Ctrl-C during a run: faults healed, workers and servers stopped, the history kept and checked."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.integration


def test_sigint_mid_run_cleans_up_and_keeps_the_history(tmp_path):
    p = subprocess.Popen([sys.executable, "-m", "harness", "run", "--backend", "redlock", "--nemesis",
                          "clock-skew,partition", "--time-limit", "60", "--seed", "2", "--store", str(tmp_path),
                          "--json"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    time.sleep(9)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, err[-2000:]
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary.get("interrupted") is True and summary["ops"] > 0
    run_dir = Path(summary["run_dir"])
    history = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    assert any(o["process"] == "final" for o in history), "the final read must still be recorded"
    assert (run_dir / "results.json").exists() and (run_dir / "report.html").exists()
    # Servers are checked by the no_leftovers fixture; workers carry our owner mark too.
    assert not descendants_with_owner(), "a worker or server of the interrupted run survived"


def descendants_with_owner() -> list[int]:
    import os

    from tests.conftest import OWNER

    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and int(d.name) != os.getpid():
            try:
                if f"CHAOSLOCK_OWNER={OWNER}".encode() in (d / "environ").read_bytes():
                    found.append(int(d.name))
            except OSError:
                pass
    return found


def test_sigint_while_the_workers_start_still_tears_down(tmp_path):
    """Ctrl-C lands while the worker processes are opening their clients: their READY
    messages are still in the queue when the runner drains it on the way out."""
    p = subprocess.Popen([sys.executable, "-m", "harness", "run", "--backend", "zookeeper", "--nemesis", "none",
                          "--time-limit", "30", "--seed", "1", "--store", str(tmp_path), "--json"],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 60
    while not spawned_workers(p.pid) and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.02)
    assert spawned_workers(p.pid), "the workers never appeared"
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=90)
    assert p.returncode == 130, err[-2000:]
    assert "Traceback" not in err and "missing field" not in err, err[-2000:]
    assert json.loads(out.strip().splitlines()[-1]).get("interrupted") is True
    assert not descendants_with_owner(), "a worker or server of the interrupted run survived"


def spawned_workers(parent: int) -> list[int]:
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text().rsplit(")", 1)[1].split()
                if int(stat[1]) == parent and b"spawn_main" in (d / "cmdline").read_bytes():
                    found.append(int(d.name))
            except (OSError, ValueError, IndexError):
                pass
    return found
