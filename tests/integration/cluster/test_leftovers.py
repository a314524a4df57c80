"""A run leaves the machine as it found it (issue 13): /dev/shm exactly, after the clock
nemesis too (libfaketime's shared memory), and a worker error is one sentence."""

import json
from pathlib import Path

import pytest

from tests.conftest import chaos, eventually

pytestmark = pytest.mark.integration


def shm() -> set[str]:
    return {p.name for p in Path("/dev/shm").iterdir()}


@pytest.mark.parametrize("backend", ["redlock", "redis"])
def test_clock_skew_leaves_dev_shm_exactly_as_it_was(tmp_path, backend):
    before = shm()
    r = chaos("run", "--backend", backend, "--nemesis", "clock-skew", "--time-limit", "5", "--nemesis-interval", "1",
              "--seed", "3", "--store", str(tmp_path), "--json")
    assert r.returncode in (0, 1), r.stderr[-2000:]
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    history = Path(summary["run_dir"], "history.jsonl").read_text()
    assert '"f":"clock-bump"' in history or '"f":"clock-strobe"' in history, "no clock fault ran"
    assert shm() == before, f"left in /dev/shm: {sorted(shm() - before)}; removed: {sorted(before - shm())}"


def test_a_worker_that_cannot_open_its_client_is_one_sentence(tmp_path):
    r = chaos("run", "--backend", "zookeeper", "-o", "connect_timeout_s=0.001", "--time-limit", "3",
              "--concurrency", "2", "--store", str(tmp_path))
    assert r.returncode == 255, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr + r.stdout, r.stderr
    assert "could not open its lock client" in lines[0] and "-o connect_timeout_s=0.001" in lines[0]
    log = Path(lines[0].rsplit("the traceback is in ", 1)[1])
    assert "Traceback" in log.read_text()
    run_dir = log.parent.parent
    summary = json.loads((run_dir / "results.json").read_text())["summary"]
    assert summary["valid"] == "unknown" and "did not finish" in summary["unknown_reason"]


def test_a_run_that_failed_to_start_does_not_move_latest(tmp_path, monkeypatch):
    monkeypatch.setenv("CHAOSLOCK_VALKEY_SERVER", "/bin/false")  # starts, then exits at once
    r = chaos("run", "--backend", "redis", "--time-limit", "3", "--store", str(tmp_path))
    assert r.returncode == 255 and "exited with code 1 during start" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "latest").exists()
    assert not list(tmp_path.iterdir()), "a run that never started leaves no run dir"


def test_a_run_after_a_killed_run_removes_its_leftovers_first(tmp_path):
    """A SIGKILLed chaos process leaves its servers and namespaces: the next run removes
    them first, in one line, and its workers died with it."""
    import os
    import signal
    import subprocess
    import sys

    from tests.conftest import ROOT
    from tests.integration.commands.test_interrupt import descendants_with_owner, leftovers

    before = leftovers()
    p = subprocess.Popen([sys.executable, "-m", "harness", "run", "--backend", "redlock", "--time-limit", "60",
                          "--store", str(tmp_path / "a")], cwd=ROOT, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    def going():
        hist = next((tmp_path / "a").glob("redlock-none/*/history.jsonl"), None)
        return p.poll() is not None or (hist is not None and '"type":"ok"' in hist.read_text())

    eventually(going, timeout=60)
    assert p.poll() is None, "the run ended before it was killed"
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    eventually(lambda: not any("spawn_main" in _cmdline(pid) for pid in descendants_with_owner()), timeout=10)
    left = leftovers()
    assert left["netns"] - before["netns"], "the killed run should have left its namespaces"
    r = chaos("run", "--backend", "redis", "--time-limit", "2", "--store", str(tmp_path / "b"))
    assert r.returncode == 0, r.stderr
    note, = [line for line in r.stderr.splitlines() if "leftovers" in line]
    assert "whose chaos process had died" in note
    after = leftovers()
    assert {k: after[k] - before[k] for k in after if after[k] - before[k]} == {}


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""
