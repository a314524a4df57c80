"""No invented facts (issue 37): a protocol client whose acquire or renew reply carries no
`valid_ms` has no validity on record. The harness paces the holder by the TTL, but the history
records `valid_until_ns` null for that grant (it recorded reply + TTL, and fresh-leases passed the
invented number), so fresh-leases is unknown for it."""

import pytest

from harness.checker.leases import check_fresh_leases
from harness.core.contracts.client import recorded_validity
from harness.core.history import Op
from harness.core.spec import TestSpec
from tests.unit.workloads.scripted import scripted_client

# grants every acquire and renew; with "silent" in the key, says nothing of its validity
CLIENT = '''
import json, sys
for line in sys.stdin:
    req = json.loads(line)
    rep = {"type": "ok"}
    if req["op"] in ("acquire", "renew"):
        rep = {"type": "ok", "value": "v", "token": None}
        if "silent" not in req["key"]:
            rep["valid_ms"] = 1500
    print(json.dumps({"id": req["id"], **rep}), flush=True)
    if req["op"] == "close":
        break
'''


@pytest.fixture
def client(tmp_path):
    with scripted_client(tmp_path, CLIENT, "validity_client.py") as c:
        yield c


def test_a_grant_without_valid_ms_records_no_validity(client):
    said = client.acquire("k", 2000, 1.0)
    assert said.reported and recorded_validity(said) == said.valid_until_ns
    assert 1_400_000_000 < said.valid_until_ns - said.acquired_ns <= 1_500_000_000
    silent = client.acquire("silent", 2000, 1.0)
    assert not silent.reported and recorded_validity(silent) is None  # was: reply + TTL, recorded as the client's
    assert silent.valid_until_ns > silent.acquired_ns  # still paces the holder's work


def test_a_renew_without_valid_ms_records_no_validity(client):
    lease = client.acquire("k", 2000, 1.0)
    from dataclasses import replace

    import time

    old = replace(lease, key="silent-k", valid_until_ns=time.monotonic_ns() - 1)  # its last validity ran out
    quiet = client.renew(old)
    assert recorded_validity(quiet) is None
    # the next renew is paced by the TTL from now: with the old expiry kept, a renewing holder
    # renewed in a busy loop (27k-54k renews a run, found by an audit of redis-py's Lock --renew)
    assert 1_900_000_000 < quiet.valid_until_ns - time.monotonic_ns() <= 2_000_000_000


def test_fresh_leases_is_unknown_for_a_grant_without_validity():
    spec = TestSpec(backend="external", ttl_ms=2000, facts={"validity": "from-grant"})
    h = [Op(index=0, time_ns=0, process=0, type="invoke", f="acquire", key="k"),
         Op(index=1, time_ns=10, process=0, type="ok", f="acquire", key="k", valid_until_ns=None)]
    r = check_fresh_leases(spec, h)
    assert r.valid == "unknown" and r.summary["grants_without_validity"] == 1
