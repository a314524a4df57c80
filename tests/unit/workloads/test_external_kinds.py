"""`--lock` through the client protocol: an acquire carries `mode` / `permits` to the client
process, and a client that answers `unsupported` to them stops the run with one sentence."""

import sys

import pytest

from harness.core.errors import BadArgument
from tests.unit.workloads.scripted import scripted_client
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
    with scripted_client(tmp_path, CLIENT, "kinds_client.py") as c:
        yield c


def test_the_mode_reaches_the_client_and_the_mutex_sends_none(client):
    assert client.acquire("k", 2000, 1.0, mode="read").value == "mode=read"
    assert client.acquire("k", 2000, 1.0).value == "mode=None"


def test_a_client_without_the_kind_is_refused_in_one_sentence(client):
    with pytest.raises(BadArgument, match="unsupported to an acquire with permits: it has no semaphore"):
        client.acquire("k", 2000, 1.0, permits=3)


# -- init carries the kind: a client without it refuses there, before the workload ---------
# A client that echoes its init (as the value of its first acquire) and has only the mutex.
ECHO = '''
import json, sys
init = None
for line in sys.stdin:
    req = json.loads(line)
    rep = {"type": "ok"}
    if req["op"] == "init":
        init = req
        if req.get("lock") != "mutex":
            rep = {"type": "unsupported", "error": "mutex only"}
    elif req["op"] == "acquire":
        rep = {"type": "ok", "value": json.dumps({"lock": init.get("lock"), "options": init["options"]}), "token": 1}
    print(json.dumps({"id": req["id"], **rep}), flush=True)
    if req["op"] == "close":
        break
'''


def external(tmp_path, script: str, lock: str, **options) -> ExternalClient:
    from harness.core.spec import TestSpec

    path = tmp_path / "echo_client.py"
    path.write_text(script)
    spec = TestSpec(backend="external", lock=lock, options={"command": f"{sys.executable} {path}", "servers": "valkey:1",
                                                            **options}).validate()
    return ExternalClient(spec.options)


def test_init_tells_the_client_the_lock_kind_apart_from_the_options(tmp_path):
    import json

    c = external(tmp_path, ECHO, "mutex", release_checks_owner="yes")
    c.open([])
    try:
        told = json.loads(c.acquire("k", 2000, 1.0).value)
    finally:
        c.close()
    assert told["lock"] == "mutex" and "lock" not in told["options"] and told["options"]["release_checks_owner"] == "yes"


def test_a_client_that_answers_unsupported_to_init_is_refused_before_any_acquire(tmp_path):
    c = external(tmp_path, ECHO, "semaphore:2")
    with pytest.raises(BadArgument, match=r"answered unsupported to init with lock semaphore:2 \(mutex only\): it has "
                                          r"no such lock; run it with --lock mutex$"):
        c.open([])
    assert c.proc is None  # ended, not left running


def test_the_reference_clients_kinds_are_known_before_anything_starts():
    from harness.core.spec import TestSpec
    from workloads.external import reference_kinds

    def validate(command: str, lock: str):
        return TestSpec(backend="external", lock=lock, options={"command": command, "servers": "etcd:3"}).validate()

    for command in ("/elsewhere/clients/go-etcd/bin/go-etcd", "node clients/node-redlock/client.js --x",
                    "java-curator/bin/java-curator"):
        with pytest.raises(BadArgument, match=r"^the reference client [a-z-]+ has no rw lock \(it has: mutex\); run it "
                                              r"with --lock mutex$"):
            validate(command, "rw")
        assert validate(command, "mutex").lock == "mutex"
    relay = "python3 clients/python-relay/relay.py --backend {}"
    with pytest.raises(BadArgument, match=r"relaying backend etcd has no rw lock .*relay a backend that has one "
                                          r"\(zookeeper-recipe\)"):
        validate(relay.format("etcd"), "rw")
    assert validate(relay.format("zookeeper-recipe"), "rw").options["lock"] == "rw"
    assert validate(relay.format("etcd"), "semaphore:2").options["lock"] == "semaphore:2"
    assert validate("./my-own-client", "rw").lock == "rw"  # only its init can tell
    assert reference_kinds("./my-own-client") is None and reference_kinds("'unbalanced") is None


def test_lock_is_set_by_the_flag_not_by_an_option():
    from harness.core.spec import TestSpec

    with pytest.raises(BadArgument, match="^-o lock is set by --lock; give --lock rw instead$"):
        TestSpec(backend="external", options={"command": "./x", "servers": "valkey:1", "lock": "rw"}).validate()


def test_the_relay_refuses_at_init_a_kind_its_backend_lacks():
    from pathlib import Path

    relay = Path(__file__).resolve().parents[3] / "clients" / "python-relay" / "relay.py"
    c = ExternalClient({"command": f"{sys.executable} {relay} --backend redis", "servers": "valkey:1", "lock": "rw"})
    with pytest.raises(BadArgument, match=r"unsupported to init with lock rw \(backend redis has no rw lock\)"):
        c.open([])
