"""Load mode (`-o load_clients=K`, harness/engine/load.py): K clients per worker process, each
with its own process id in the history, every op checked as in a run of one process per client;
and a fault run refuses it in one sentence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import chaos

pytestmark = pytest.mark.integration


def test_four_clients_in_two_processes_are_recorded_and_checked(tmp_path):
    r = chaos("run", "--backend", "redis", "-o", "load_clients=2", "--time-limit", "2", "--concurrency", "4",
              "--keys", "2", "--seed", "3", "--store", str(tmp_path), "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    s = json.loads(r.stdout.strip().splitlines()[-1])
    assert s["valid"] is True, s
    ops = [json.loads(line) for line in (Path(s["run_dir"]) / "history.jsonl").read_text().splitlines()]
    released = {o["process"] for o in ops if o["f"] == "release" and o["type"] == "ok"}
    assert {p % 4 for p in released} == {0, 1, 2, 3}, released  # every client cycled, under its own id
    logs = sorted(p.name for p in (Path(s["run_dir"]) / "nodes").glob("worker-c*.log"))
    assert len(logs) <= 2, logs  # one log per process: the first client's slot names it


def test_a_fault_run_refuses_load_mode(tmp_path):
    r = chaos("run", "--backend", "redis", "--nemesis", "pause-holder", "-o", "load_clients=2", "--time-limit", "2",
              "--store", str(tmp_path))
    assert (r.returncode, r.stdout) == (254, ""), r.stdout[-2000:] + r.stderr[-2000:]
    assert r.stderr == ("chaos: -o load_clients serves fault-free performance runs; a fault (pause-holder) needs one "
                        "process per client: drop -o load_clients or the nemesis\n"), r.stderr[-2000:]
    assert not any(tmp_path.iterdir()), "refused before the run dir is made"
