"""`--renew`: holders work longer than one TTL and renew in the foreground every TTL/3;
every renew is an op in the history, on every built-in backend that can renew."""

import json
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import chaos

pytestmark = pytest.mark.integration

# pottery allows 3 extend() calls per acquire by default and a hold of 1-2 TTLs renews 3-5
# times (more when a starved CPU shortens the slices), so its run raises the library's limit.
EXTRA = {"pottery": ["-o", "num_extensions=20"]}
RENEWING = ["redis", "redlock", "etcd", "etcd-recipe", "zookeeper", "zookeeper-recipe", "pottery", "python-redis-lock"]


def counts(run_dir: str) -> Counter:
    ops = [json.loads(line) for line in Path(run_dir, "history.jsonl").read_text().splitlines()]
    return Counter((o["f"], o["type"]) for o in ops if o["process"] != "nemesis")


@pytest.mark.parametrize("backend", RENEWING)
def test_renew_ops_are_recorded_and_a_clean_run_stays_valid(tmp_path, backend):
    r = chaos("run", "--backend", backend, "--renew", "--time-limit", "4.5", "--concurrency", "2", "--ttl", "1000",
              "--seed", "3", "--store", str(tmp_path), "--json", *EXTRA.get(backend, []))
    assert r.returncode == 0, r.stderr[-2000:]
    s = json.loads(r.stdout.strip().splitlines()[-1])
    c = counts(s["run_dir"])
    assert c[("renew", "ok")] >= 1, c
    assert s["critical_sections"] >= 1 and s["renewed_while_other_held"] == 0
    assert "-renew" in s["run_dir"]


@pytest.mark.parametrize("backend", ["redis-unsafe-release", "redis-setnx-expire"])
def test_a_design_without_renewal_fails_its_renew_and_does_no_work(tmp_path, backend):
    r = chaos("run", "--backend", backend, "--renew", "--time-limit", "4", "--concurrency", "1", "--ttl", "1000",
              "--seed", "3", "--store", str(tmp_path), "--json")
    s = json.loads(r.stdout.strip().splitlines()[-1])
    c = counts(s["run_dir"])
    assert c[("renew", "fail")] >= 1 and c[("renew", "ok")] == 0, c
    assert c[("write", "invoke")] == 0, "no write may follow a failed renew"
    assert s["valid"] == "unknown" and "no critical section" in s["unknown_reason"]
