"""clock-skew with -o clock_target=clients reaches external client processes (issue 15): the
vDSO patch moves the wall clock of a Go, a Java, a Node and a Python client alike, each reads
its own clock back over the protocol (`clock`), a client restarted while skewed is skewed again,
and a client without `clock` gets an `info` that says so."""

import json
import math
from pathlib import Path

import pytest

from harness.cluster import timewarp
from tests.conftest import ROOT, chaos, eventually, installed
from harness.core.contracts.client import Clock
from workloads.external import ClientBroke, ExternalClient, reference_client

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(timewarp.supported() is not None, reason=f"{timewarp.supported()}")]

BROKEN = f"python3 {ROOT / 'tests/clients/broken.py'}"
# Python is covered by the restart test above (tests/clients/broken.py is a Python client).
CLIENTS = {"go": "go-etcd", "java": "java-curator", "node": "node-redlock"}


def wait_read(reads, timeout=5.0):
    """The offset the client read back, once it has (NaN: it has not, within `timeout`)."""
    try:
        return eventually(lambda: reads[0], timeout=timeout, step=0.02, until=lambda v: not math.isnan(v))
    except AssertionError:
        return reads[0]


def test_a_client_process_is_skewed_read_back_and_skewed_again_after_a_restart(tmp_path):
    reads = [math.nan]
    client = ExternalClient({"command": f"{BROKEN} exit", "clock_target": "clients"}, Clock([4.0], 0, reads))
    client.open([])
    try:
        assert abs(wait_read(reads) - 4.0) < 0.5, "the child's own clock is 4 s ahead, as it says itself"
        first = client.proc.pid
        with pytest.raises(ClientBroke):
            client.acquire("k", 1000, 1.0)  # this client exits on acquire: the next op starts a new one
        reads[0] = math.nan
        client._op({"op": "held"}, 5.0)
        assert client.proc.pid != first
        assert abs(wait_read(reads) - 4.0) < 0.5, "the new process is skewed like the old one"
    finally:
        client.close()


def bumps(run_dir):
    ops = [json.loads(line) for line in Path(run_dir, "history.jsonl").read_text().splitlines()]
    asked = {o["index"]: o for o in ops if o["f"] == "clock-bump" and o["type"] == "invoke"}
    done = [o for o in ops if o["f"] == "clock-bump" and o["type"] != "invoke"]
    return [(max((a for a in asked.values() if a["index"] < o["index"]), key=lambda a: a["index"]), o) for o in done]


def run(tmp_path, command, servers):
    r = chaos("run", "--client", command, "--servers", servers, "-n", "clock-skew", "-o", "clock_target=clients",
              "-o", "clock_mode=bump", "--time-limit", "5", "--nemesis-interval", "1.5", "--concurrency", "2",
              "--store", str(tmp_path), "--json", "--seed", "3", timeout=180)
    assert "Traceback" not in r.stderr + r.stdout and r.stdout.strip(), r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("lang", sorted(CLIENTS))
def test_each_reference_client_reads_back_the_skew_of_its_own_clock(tmp_path, lang):
    client = reference_client(CLIENTS[lang])
    installed(client.built.exists(), f"{client.built.relative_to(ROOT)} (built by make install)")
    s = run(tmp_path, client.command, client.servers)
    pairs = bumps(s["run_dir"])
    assert pairs, "the nemesis bumped the clients' clocks"
    for asked, done in pairs:
        assert done["type"] == "ok", done
        for c, want in asked["value"].items():
            assert abs(done["value"][c] - want) < 0.5, (c, want, done["value"])
    assert s["client_clock_reads"] and "vDSO" in s["client_clock_reads"][0]


def test_a_client_without_clock_gets_an_info_that_says_so(tmp_path):
    s = run(tmp_path, f"python3 {ROOT / 'clients/example-redis/client.py'}", "valkey:1")
    pairs = bumps(s["run_dir"])
    assert pairs and all(d["type"] == "info" and "did not report" in d["error"] for _, d in pairs), pairs
