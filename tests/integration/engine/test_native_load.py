"""Native load mode (`-o load_driver=native`, harness/engine/native.py, clients/load-driver): the
worker's cycle run by Go goroutines against real servers, every op in the history and judged by
the same checkers; the lock cycle alone on a key per client (compare's throughput probe); a Ctrl-C
ends it at once with its ops kept and no driver left; what it cannot run is refused."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import ROOT, chaos, eventually

pytestmark = pytest.mark.integration


def _run(tmp_path, *args: str) -> tuple[dict, list[dict]]:
    r = chaos("run", "-o", "load_driver=native", "--store", str(tmp_path), "--json", *args)
    assert r.returncode == 0, r.stderr[-2000:]
    s = json.loads(r.stdout.strip().splitlines()[-1])
    ops = [json.loads(line) for line in (Path(s["run_dir"]) / "history.jsonl").read_text().splitlines()]
    return s, ops


@pytest.mark.parametrize("backend", ["redis", "etcd", "zookeeper"])
def test_contended_fenced_cycles_are_recorded_and_judged(tmp_path, backend):
    """8 clients on 2 keys with holds: waiters poll or watch, and the counter's final value is
    exactly the writes the store accepted (lost updates judged), each client under its own ids."""
    s, ops = _run(tmp_path, "--backend", backend, "--concurrency", "8", "--keys", "2", "--fencing",
                  "--time-limit", "4", "--seed", "5")
    assert s["valid"] is True and s["critical_sections"] > 0, s
    assert [o["index"] for o in ops] == list(range(len(ops)))
    assert all(a["time_ns"] <= b["time_ns"] for a, b in zip(ops, ops[1:]))
    assert {o["process"] % 8 for o in ops if o["f"] == "acquire"} == set(range(8))  # each goroutine, its own id
    assert len({o["process"] for o in ops if o["f"] == "release" and o["type"] == "ok"}) >= 2
    written = Counter(o["key"] for o in ops if o["f"] == "write" and o["type"] == "ok" and o["process"] != "final")
    final = {o["key"]: o["value"] for o in ops if o["process"] == "final" and o["type"] == "ok"}
    assert final == dict(written), (final, written)
    tokens = [(o["key"], o["token"]) for o in ops if o["f"] == "acquire" and o["type"] == "ok"]
    assert len(tokens) == len(set(tokens)) and all(isinstance(t, int) for _, t in tokens)  # unique per key
    assert sum(o["f"] == "acquire" and o["type"] == "fail" for o in ops) > 0  # a waiter that gave up


@pytest.mark.parametrize("backend", ["redis", "redlock"])
def test_the_lock_cycle_alone_on_a_key_per_client(tmp_path, backend):
    """Compare's throughput probe: no counter work, client i on key i; every hold is a critical section.
    The history cap (1 MB, ~9,000 ops) stops the driver early, and the run says so: without it a
    native run records half a million ops in 3 s, which takes the checkers longer than the run."""
    # a 1 s request timeout: on a starved machine a late release is `info`, and this test counts releases
    s, ops = _run(tmp_path, "--backend", backend, "--concurrency", "16", "--keys", "16", "-o", "own_key=yes",
                  "-o", "node_timeout_ms=1000", "-o", "max_history_mb=1",
                  "-o", "resource=none", "--hold-max", "0", "--time-limit", "3", "--recovery", "0", "--seed", "1")
    assert s["valid"] is True, s
    assert not [o for o in ops if o["f"] in ("read", "write") and o["process"] != "final"]
    assert s["critical_sections"] == s["acquires_ok"] > 500, s
    assert [e for e in s["errors"] if "stopped at" in e and "max_history_mb=1" in e], s["errors"]
    assert len(ops) < 12_000
    assert all(o["key"].endswith(f"-{o['process'] % 16}") for o in ops if o["f"] == "acquire")


@pytest.mark.parametrize("backend, driver", [("redis", "clients/load-driver/bin/load-driver"),
                                             ("zookeeper", "ZkLoadDriver")])
def test_ctrl_c_ends_the_driver_at_once_and_keeps_its_ops(tmp_path, backend, driver):
    p = subprocess.Popen([sys.executable, "-m", "harness", "run", "--backend", backend, "-o", "load_driver=native",
                          "--time-limit", "60", "--concurrency", "4", "--seed", "2", "--store", str(tmp_path)],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    driver = ["pgrep", "-f", driver]
    eventually(lambda: p.poll() is not None or subprocess.run(driver, capture_output=True).returncode == 0,
               timeout=60)
    assert p.poll() is None, p.communicate()[1][-2000:]
    time.sleep(1)
    t = time.monotonic()
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130 and "Traceback" not in err, err[-2000:]
    assert time.monotonic() - t < 30  # not the 60 s the driver was asked to run
    assert subprocess.run(driver, capture_output=True).returncode == 1  # no driver left
    run_dir = next(d for d in tmp_path.glob(f"{backend}-*/*") if d.is_dir())
    ops = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    assert sum(o["f"] == "release" and o["type"] == "ok" for o in ops) > 0
    assert json.loads((run_dir / "results.json").read_text())["summary"]["interrupted"] is True


def test_a_design_it_does_not_run_is_refused_before_any_server_starts(tmp_path):
    r = chaos("run", "--backend", "pottery", "-o", "load_driver=native", "--time-limit", "2", "--store", str(tmp_path))
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert "use -o load_clients=K" in r.stderr, r.stderr
    assert not list(tmp_path.glob("pottery-*/*"))


def test_redlocks_yardstick_drives_all_five_masters_through_both_full_paths(tmp_path):
    """The ceiling compare holds Redlock's figures against: redis-benchmark on the five masters at
    once, its acquire taking free keys and its release finding locks of its own to delete."""
    from harness.commands.compare.battery import run_yardstick

    ys = run_yardstick("redlock", str(tmp_path))
    assert ys.tool.startswith("redis-benchmark on 5 masters") and ys.connections == 32
    assert ys.cycles_per_s > 0 and ys.acquired_share >= 0.99 and 0.7 <= ys.deleted_share <= 1.0, ys.line()
