"""`chaos audit` end to end on real valkey, a short audit each (--budget 0, a few scenarios): a
client that sets its key without a TTL (tests/clients/liar.py no-ttl) fails "expiry after the
holder's death" with its run dir, cause and replay command; the honest example passes every
tested row. A campaign test (about 3 minutes on 2 cores): `pytest -m campaign`."""

import json

import pytest

from tests.conftest import ROOT, chaos

pytestmark = [pytest.mark.integration, pytest.mark.campaign]

LIAR = f"python3 {ROOT / 'tests/clients/liar.py'} no-ttl"
HONEST = f"python3 {ROOT / 'clients/example-redis/client.py'}"


def audit(tmp_path, client: str, scenarios: str):
    r = chaos("audit", "--client", client, "--servers", "valkey:1", "--budget", "0", "--scenarios", scenarios,
              "--store", str(tmp_path),
              "--junit", str(tmp_path.with_suffix(".xml")), "--json", timeout=900)
    assert "Traceback" not in r.stderr and r.stdout.strip(), r.stderr[-3000:]
    card = json.loads(r.stdout.strip().splitlines()[-1])
    return r.returncode, {row["promise"]: row for row in card["rows"]}, card


def test_a_lock_without_ttl_fails_expiry_after_death_and_the_honest_example_passes(tmp_path):
    code, rows, card = audit(tmp_path / "liar", LIAR, "contention,kill-holder,partition")
    assert code == 1 and rows["outlived"]["status"] == "FAIL", rows["outlived"]
    f = rows["outlived"]["failures"][0]
    assert f["scenario"].startswith("kill") and f["replay"].startswith("chaos run --replay ") and f["cause"]
    assert (tmp_path / "liar" / "audit").is_dir() and "partition" in card["not_tested"]  # one server
    code, rows, card = audit(tmp_path / "honest", HONEST, "contention,pause-holder,kill-holder,lose-release-request")
    assert code == 0, rows
    assert not [r for r in rows.values() if r["status"] == "FAIL"]
    assert {k for k, r in rows.items() if r["status"] == "PASS"} >= {"mutex", "fencing", "outlived", "liveness", "alive",
                                                                       "truthful"}
