"""`--lock` through the client protocol: an acquire carries `mode` / `permits` to the client
process, and a client that answers `unsupported` to them stops the run with one sentence."""

import sys

import pytest

from harness.core.errors import BadArgument
from workloads.external import ExternalClient

# A protocol client that grants every acquire, its value saying what the request carried,
# and has no semaphore (it answers unsupported to `permits`).
CLIENT = '''
import json, sys
for line in sys.stdin:
    req = json.loads(line)
    rep = {"type": "ok"}
    if req["op"] == "acquire":
        rep = ({"type": "unsupported"} if "permits" in req else
               {"type": "ok", "value": "mode=" + str(req.get("mode")), "token": None, "valid_ms": 1000})
    print(json.dumps({"id": req["id"], **rep}), flush=True)
    if req["op"] == "close":
        break
'''


@pytest.fixture
def client(tmp_path):
    script = tmp_path / "kinds_client.py"
    script.write_text(CLIENT)
    c = ExternalClient({"command": f"{sys.executable} {script}", "servers": "valkey:1"})
    c.open([])
    yield c
    c.close()


def test_the_mode_reaches_the_client_and_the_mutex_sends_none(client):
    assert client.acquire("k", 2000, 1.0, mode="read").value == "mode=read"
    assert client.acquire("k", 2000, 1.0).value == "mode=None"


def test_a_client_without_the_kind_is_refused_in_one_sentence(client):
    with pytest.raises(BadArgument, match="unsupported to an acquire with permits: it has no semaphore"):
        client.acquire("k", 2000, 1.0, permits=3)
