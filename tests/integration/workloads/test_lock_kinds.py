"""`--lock rw` and `--lock semaphore:N` on real servers: valid without faults (readers did
share, N holders did hold at once), and a TTL semaphore broken by pause-holder."""

import json

import pytest

from tests.conftest import chaos

pytestmark = pytest.mark.integration


def run(tmp_path, *args) -> tuple[int, dict]:
    r = chaos("run", *args, "--seed", "1", "--store", str(tmp_path), "--json")
    assert r.stdout.strip(), r.stderr[-2000:]
    return r.returncode, json.loads(r.stdout.strip().splitlines()[-1])


def test_kazoo_read_write_lock_lets_readers_share_and_stays_valid(tmp_path):
    code, s = run(tmp_path, "--backend", "zookeeper-recipe", "--lock", "rw", "--time-limit", "7")
    assert code == 0 and s["valid"] is True, s
    assert s["lock"] == "rw" and s["reader_overlaps"] >= 1 and s["read_windows"] >= 1, s
    assert s["checkers"]["linearizable-mutex"] is True


def test_etcd_semaphore_holds_at_most_n_and_reaches_n(tmp_path):
    code, s = run(tmp_path, "--backend", "etcd", "--lock", "semaphore:2", "--time-limit", "6")
    assert code == 0 and s["valid"] is True, s
    assert s["lock"] == "semaphore:2" and s["max_holders"] == 2, s


def test_redis_ttl_semaphore_breaks_when_a_holder_sleeps_past_its_ttl(tmp_path):
    code, s = run(tmp_path, "--backend", "redis", "--lock", "semaphore:2", "-n", "pause-holder", "--ttl", "1000",
                  "--time-limit", "8")
    assert code == 1 and s["valid"] is False, s
    assert s["max_holders"] >= 3 and s["violations"] >= 1, s
    assert set(s["violations_by_cause"]) == {"overran-paused"}, s  # the holder overran its lease, paused
