"""The Go reference client (clients/go-etcd: etcd's own clientv3/concurrency Mutex) against a
real etcd cluster over the client protocol: it passes the conformance check, a fault-free run is
valid, and under pause-holder it reaches the in-process etcd verdicts (etcd-lock-pause): unsafe
without fencing, data safe with its token (Mutex.Header().Revision) (issue 15).

It tests etcd 3.4 as shipped (issue 27): the one check the library does not make, a re-read of
the key after Lock, runs only with -o reread_after_lock=true. Without it, a waiter whose session
expired while it waited is told by Lock that it holds the lock; with it, it answers fail."""

import json
import shutil
import subprocess

import pytest

from harness.cluster import etcd
from harness.cluster.provider import Group
from harness.core.errors import BadArgument
from tests.conftest import ROOT, chaos, eventually, installed
from tests.integration.clusters import start_cluster
from tests.integration.workloads.reference_clients import Child, said_at_start

pytestmark = pytest.mark.integration

BINARY = ROOT / "clients/go-etcd/bin/go-etcd"


@pytest.fixture(scope="module")
def client():
    installed(shutil.which("go") is not None or BINARY.exists(),
              "Go, and so clients/go-etcd (scripts/clients/go-etcd.sh installs golang-go and golang-etcd-server-dev "
              "and builds it),")
    if shutil.which("go") is not None:  # up to date in a few ms; rebuilds after main.go changed
        r = subprocess.run([str(ROOT / "scripts/clients/go-etcd.sh")], check=False, capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, f"scripts/clients/go-etcd.sh failed: {r.stdout}{r.stderr}"
    assert BINARY.exists()
    return str(BINARY)


def run(tmp_path, client, *args):
    r = chaos("run", "--client", client, "--servers", "etcd:3", *args, "--store", str(tmp_path), "--json",
              "--seed", "1", timeout=120)
    assert "Traceback" not in r.stderr + r.stdout, r.stderr[-2000:]
    assert r.stdout.strip(), r.stderr[-2000:]
    return r, json.loads(r.stdout.strip().splitlines()[-1])


def test_the_go_client_passes_the_conformance_check(client):
    r = chaos("client-check", client, "--servers", "etcd:3", timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("PASS") == 12 and "all steps passed" in r.stdout


def test_the_go_client_is_valid_without_faults(tmp_path, client):
    r, s = run(tmp_path, client, "--time-limit", "5", "--concurrency", "3")
    assert s["valid"] is True and s["critical_sections"] >= 2, r.stderr[-1000:]


# fenced is a campaign test: the store's fence is the harness's, shown fenced by the relay's test
@pytest.mark.parametrize("fencing, valid", [([], False), pytest.param(["--fencing"], True, marks=pytest.mark.campaign)])
def test_the_go_client_reaches_the_in_process_etcd_verdicts_under_a_gc_pause(tmp_path, client, fencing, valid):
    r, s = run(tmp_path, client, "-n", "pause-holder", "-o", "pause_multiple=3", "--time-limit", "12", *fencing)
    assert s["valid"] is valid and s["violations"] >= 1, r.stderr[-1000:]
    assert set(s["violations_by_cause"]) == {"overran-paused"}, s["violations_by_cause"]


def started_with(tmp_path, monkeypatch, client, **options):
    """What the client says of reread_after_lock when the harness starts it with these -o options."""
    return said_at_start(tmp_path, monkeypatch, client, "etcd:3", "reread_after_lock",
                         lambda line: line.split("go-etcd: ", 1)[1], **options)


@pytest.mark.parametrize("options, said", [({}, "reread_after_lock=false"),
                                           ({"reread_after_lock": "true"}, "reread_after_lock=true"),
                                           ({"reread_after_lock": "off"}, "reread_after_lock=false")])
def test_the_reread_is_off_unless_asked_for_with_o(tmp_path, monkeypatch, client, options, said):
    assert started_with(tmp_path, monkeypatch, client, **options) == [said]


def test_a_reread_value_that_is_not_a_flag_stops_the_client_at_its_start(tmp_path, monkeypatch, client):
    with pytest.raises(BadArgument, match="reread_after_lock=maybe: reread_after_lock is a flag"):
        started_with(tmp_path, monkeypatch, client, reread_after_lock="maybe")


def go_child(client, node, **options) -> Child:
    """One go-etcd process on `node`, its init checked to say the re-read is on exactly when asked."""
    c = Child([client], [{"kind": "etcd", "name": node.name, "host": node.host, "port": node.port}], **options)
    assert c.init["reread_after_lock"] == bool(options), c.init
    return c


@pytest.mark.parametrize("reread, answer", [(False, "ok"), (True, "fail")])
def test_a_waiter_whose_session_expired_while_it_waited(request, tmp_path, client, reread, answer):
    """A holds the lock; B waits behind it; B's lease ends (revoked here, as a pause or a
    partition past its TTL would end it) and its key goes with it; A releases. etcd 3.4's
    Lock returns nil to B: as shipped, B answers ok and holds a lock whose key is gone (a
    finding about the library: 3.5 checks its key after the wait). With the re-read, fail."""
    cluster = start_cluster(request, None, Group(kind=etcd.EtcdKind(), names=("e1",)), netns=False)
    node, = cluster.nodes
    options = {"reread_after_lock": "true"} if reread else {}
    a, b = go_child(client, node), go_child(client, node, **options)
    kv = etcd.client(node)
    try:
        held = a.call({"op": "acquire", "key": "k", "ttl_ms": 10_000, "timeout_s": 5})
        assert held["type"] == "ok", held
        b.send({"op": "acquire", "key": "k", "ttl_ms": 10_000, "timeout_s": 15})
        waiting = eventually(lambda: [m for _, m in kv.get_prefix("/chaos/k/") if m.key.decode() != held["value"]],
                             timeout=5, until=bool)
        kv.revoke_lease(waiting[0].lease_id)
        assert a.call({"op": "release", "key": "k", "value": held["value"]})["type"] == "ok"
        got = b.reply(timeout=10)
        assert got["type"] == answer, got
        assert [m.key for _, m in kv.get_prefix("/chaos/k/")] == [], "B's key is gone either way"
        if answer == "ok":
            assert got["value"] == waiting[0].key.decode() and got["token"] > held["token"], got
    finally:
        kv.close()
        a.close()
        b.close()


# the re-read's run is a campaign test (the nightly runs it): the unit-level test above shows the re-read fails it
@pytest.mark.parametrize("reread, valid", [("false", False), pytest.param("true", True, marks=pytest.mark.campaign)])
def test_under_pause_waiter_etcd_3_4_grants_a_waiter_whose_session_expired(tmp_path, client, reread, valid):
    """The run-level view of the test above: a waiter stopped for 3 TTLs (its acquire may wait
    10 s) resumes, and Lock tells it the lock is its own while another process holds it. A
    stopped waiter explains nothing, so the overlap is UNEXPLAINED: a bug of etcd 3.4's Mutex,
    which the re-read (etcd 3.5's check) turns into a fail. The client reports the validity etcd
    last confirmed (before the pause), so the grant is also "granted an expired lease"."""
    r, s = run(tmp_path, client, "-n", "pause-waiter", "-o", "pause_multiple=3", "-o", f"reread_after_lock={reread}",
               "--acquire-timeout", "10", "--time-limit", "12")
    assert s["valid"] is valid, (s["violations_by_cause"], r.stderr[-1000:])
    if not valid:
        assert set(s["violations_by_cause"]) == {"unexplained"}, s["violations_by_cause"]
        # and the lease it was handed had lapsed: etcd last confirmed it before the pause
        assert s["expired_grants"] >= 1, s
