"""The client protocol (workloads/external.py) against real servers: the relay reaches the
in-process verdicts, and a client that breaks the protocol gets a clear message and a
restart, never a traceback (issue 15)."""

import json
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import ROOT, chaos

pytestmark = pytest.mark.integration

RELAY = f"python3 {ROOT / 'clients/python-relay/relay.py'}"
BROKEN = f"python3 {ROOT / 'tests/clients/broken.py'}"


def run(tmp_path, *args):
    r = chaos("run", *args, "--store", str(tmp_path), "--json", "--seed", "1")
    assert "Traceback" not in r.stderr + r.stdout, r.stderr[-2000:]
    return r, (json.loads(r.stdout.strip().splitlines()[-1]) if r.stdout.strip() else None)


@pytest.mark.parametrize("fencing, valid", [([], False), (["--fencing"], True)])
def test_the_relay_reaches_the_in_process_verdicts_under_a_gc_pause(tmp_path, fencing, valid):
    # 1.5 x TTL: the pause must start after 1.5 s and end before the recovery (2.5 s of 10), a 3 s window
    args = ["-n", "pause-holder", "-o", "pause_multiple=1.5", "--time-limit", "10", *fencing]
    r, s = run(tmp_path, "--client", f"{RELAY} --backend redis", "--servers", "valkey:1", *args)
    assert s["valid"] is valid and s["violations"] >= 1, r.stderr[-1000:]
    if not fencing:  # the same scenario in process reaches the same verdict (once is enough)
        r2, inproc = run(tmp_path / "in-process", "--backend", "redis", *args)
        assert inproc["valid"] is valid, "the same scenario in process must reach the same verdict"


def test_the_relay_is_valid_without_faults_on_etcd(tmp_path):
    r, s = run(tmp_path, "--client", f"{RELAY} --backend etcd", "--servers", "etcd:3", "--time-limit", "6",
               "--concurrency", "2", "--renew")
    assert s["valid"] is True and s["critical_sections"] >= 1, r.stderr[-1000:]
    ops = [json.loads(line) for line in Path(s["run_dir"], "history.jsonl").read_text().splitlines()]
    assert any(o["f"] == "renew" and o["type"] == "ok" for o in ops), "the relay renews over the protocol"


def test_a_client_that_cannot_start_is_one_sentence(tmp_path):
    r, _ = run(tmp_path, "--client", f"{BROKEN} nostart", "--servers", "valkey:1", "--time-limit", "3")
    assert r.returncode == 254, r.stderr
    line, = [l for l in r.stderr.strip().splitlines() if not l.startswith("chaos run ")]  # --json puts the header there
    assert "did not start" in line and "broken.py nostart" in line and "status 3" in line and "boom" in line


@pytest.mark.parametrize("mode, says", [("badjson", "not JSON"), ("hang", "no reply to acquire"),
                                        ("exit", "exited with status 7"), ("wrongid", "is not one"),
                                        ("badtoken", "not an integer")])
def test_a_client_that_breaks_the_protocol_is_info_and_restarted(tmp_path, mode, says):
    r, s = run(tmp_path, "--client", f"{BROKEN} {mode}", "--servers", "valkey:1", "--time-limit", "6",
               "--concurrency", "1", "--acquire-timeout", "0.5")
    assert s is not None, r.stderr[-1000:]
    ops = [json.loads(line) for line in Path(s["run_dir"], "history.jsonl").read_text().splitlines()]
    acquires = Counter(o["type"] for o in ops if o["f"] == "acquire" and o["process"] != "nemesis")
    assert acquires["info"] >= 2 and acquires["ok"] == 0, acquires  # every acquire is in doubt
    processes = {o["process"] for o in ops if o["f"] == "acquire"}
    assert len(processes) >= 2, "after each broken op the worker goes on as a new process"
    log = Path(s["run_dir"], "nodes", "worker-c1.log").read_text()
    assert says in log and log.count("ended:") >= 2, log[-1000:]
    if mode == "exit":  # it died untold, every time: a finding (the alive checker), not only ops in doubt
        assert s["valid"] is False and s["checkers"]["alive"] is False and s["client_deaths"] >= 2, s
    elif mode == "hang":  # no answer by its timeout: the harness cut it off, a timeout not honoured
        assert s["valid"] is False and s["checkers"]["timeouts"] is False and s["acquires_late"] >= 2, s
        assert s["client_deaths"] == 0 and s["checkers"]["alive"] is True, s
    else:  # the harness ended it (a bad line): alive, and every acquire in doubt
        assert s["valid"] == "unknown" and s["client_deaths"] == 0, s


@pytest.mark.parametrize("command, servers", [(f"{RELAY} --backend redis", "valkey:1"),
                                              (f"{RELAY} --backend zookeeper", "zookeeper:1"),
                                              (f"python3 {ROOT / 'clients/example-redis/client.py'}", "valkey:1")])
def test_the_reference_clients_pass_the_conformance_check(command, servers):
    r = chaos("client-check", command, "--servers", servers)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("PASS") == 12 and "all steps passed" in r.stdout


@pytest.mark.parametrize("mode", ["badjson", "wrongid"])
def test_a_broken_client_fails_the_conformance_check_with_one_sentence_per_step(mode):
    r = chaos("client-check", f"{BROKEN} {mode}", "--servers", "valkey:1")
    assert r.returncode == 1 and "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
    fails = [line for line in r.stdout.splitlines() if line.strip().startswith("FAIL")]
    assert fails and all(": " in line for line in fails)
    assert "step(s) failed" in r.stdout
