"""The thin Node shells of npm's current lock libraries (clients/node-redlock5,
clients/node-redis-semaphore, clients/node-etcd3) speak the client protocol against real
servers. A campaign test: the audits of these libraries (docs/findings-node-go-java.md) are
their real test; this only keeps the shells from rotting.

The two that state no validity (redis-semaphore and etcd3 omit valid_ms, as their libraries
state none) get a NOTE at client-check's valid_ms step, which the protocol allows: every step
passes."""

import shutil

import pytest

from tests.conftest import ROOT, chaos, installed

pytestmark = [pytest.mark.integration, pytest.mark.campaign]

VALID_MS_STEP = "its reply carries the validity it believes (valid_ms)"


@pytest.mark.parametrize("name, package, servers, states_validity", [
    ("node-redlock5", "redlock", "valkey:3", True),
    ("node-redis-semaphore", "redis-semaphore", "valkey:1", False),
    ("node-etcd3", "etcd3", "etcd:3", False),
])
def test_the_shell_speaks_the_protocol(name, package, servers, states_validity):
    client = ROOT / "clients" / name
    installed(shutil.which("node") is not None and (client / "node_modules" / package).is_dir(),
              f"node or the client's npm packages (scripts/clients/{name}.sh)")
    r = chaos("client-check", f"node {client / 'client.js'}", "--servers", servers)
    out = r.stdout + r.stderr
    noted = [line for line in r.stdout.splitlines() if line.strip().startswith("NOTE")]
    assert r.returncode == 0 and "FAIL" not in r.stdout, out
    if states_validity:
        assert r.stdout.count("PASS") == 12 and not noted, out
    else:
        assert r.stdout.count("PASS") == 11 and len(noted) == 1 and VALID_MS_STEP in noted[0], out
