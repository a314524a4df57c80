"""The shipped Python lock libraries (clients/py-redispy, py-pottery, py-redis-lock, py-kazoo),
each in its own venv with its pinned PyPI release, speak the client protocol against real
servers. Campaign tests: each needs its venv (scripts/clients/py-*.sh) and the audits of
docs/findings-python.md are their long form."""

import json

import pytest

from tests.conftest import ROOT, chaos, installed

pytestmark = [pytest.mark.integration, pytest.mark.campaign]

VALIDITY_STEP = "its reply carries the validity it believes (valid_ms)"


def launcher(name: str) -> str:
    path = ROOT / "clients" / name / "bin" / name
    installed((ROOT / "clients" / name / ".venv" / "bin" / "python").exists(),
              f"the venv of clients/{name} (scripts/clients/{name}.sh)")
    return str(path)


# (client, servers, states a validity): redis-py, python-redis-lock and kazoo state none, so
# client-check's valid_ms step fails for them by design (docs/findings-python.md)
@pytest.mark.parametrize("name, servers, states_validity", [
    ("py-redispy", "valkey:1", False), ("py-pottery", "valkey:5", True),
    ("py-redis-lock", "valkey:1", False), ("py-kazoo", "zookeeper:3", False)])
def test_it_passes_the_conformance_check(name, servers, states_validity):
    r = chaos("client-check", launcher(name), "--servers", servers)
    failed = [line for line in r.stdout.splitlines() if line.strip().startswith("FAIL")]
    if states_validity:
        assert r.returncode == 0 and r.stdout.count("PASS") == 12, r.stdout + r.stderr
    else:
        assert len(failed) == 1 and VALIDITY_STEP in failed[0], r.stdout + r.stderr
        assert r.stdout.count("PASS") == 11, r.stdout + r.stderr


@pytest.mark.parametrize("lock", ["rw", "semaphore:2"])
def test_kazoo_read_write_lock_and_semaphore_hold_without_faults(tmp_path, lock):
    r = chaos("run", "--client", launcher("py-kazoo"), "--servers", "zookeeper:3", "--lock", lock,
              "-o", "session_timeout_ms=3000", "--time-limit", "8", "--seed", "1", "--store", str(tmp_path), "--json")
    assert r.stdout.strip(), r.stderr[-2000:]
    s = json.loads(r.stdout.strip().splitlines()[-1])
    assert s["lock"] == lock and s["critical_sections"] >= 5, s
    assert s["violations"] == 0, s
    if lock == "rw":
        assert s["reader_overlaps"] >= 1, s  # readers did share
    else:
        assert s["max_holders"] == 2, s


@pytest.mark.parametrize("name", ["py-redispy", "py-pottery", "py-redis-lock"])
def test_a_redis_library_answers_unsupported_for_a_read_write_lock(tmp_path, name):
    """They have a mutex only: the run is refused at init, before its workload (exit 254)."""
    r = chaos("run", "--client", launcher(name), "--servers", "valkey:1", "--lock", "rw", "--time-limit", "4",
              "--store", str(tmp_path))
    assert r.returncode == 254 and "mutex" in r.stdout + r.stderr, r.stdout + r.stderr
