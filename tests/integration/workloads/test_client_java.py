"""The Java reference client (clients/java-curator: Curator's InterProcessMutex) against a real
ZooKeeper ensemble: it speaks the protocol, is valid without faults, and under a GC pause past its
session it is unsafe without fencing and safe with the czxid as token (issue 15).

It tests Curator 5.4.0 as shipped (issue 27): the one check the library does not make, a read of
its lock node after acquire(), runs only with -o recheck_node_after_acquire=true; the token is the
czxid from the reply to Curator's own create. A waiter whose session expired while it waited is
not granted on its dead node: Curator's lock loop finds its node gone and creates a new one, so
pause-waiter is valid with the check and without it."""

import json
import os
import signal
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from harness.cluster import zookeeper
from harness.cluster.provider import Group
from harness.core.errors import BadArgument
from tests.conftest import ROOT, chaos, eventually, installed
from tests.integration.clusters import start_cluster
from tests.integration.workloads.reference_clients import Child, said_at_start

pytestmark = pytest.mark.integration

LAUNCHER = ROOT / "clients/java-curator/bin/java-curator"


@pytest.fixture(autouse=True)
def java_client():
    """Unbuilt is a failure, as for the Go and Node clients: `make install` builds it."""
    installed(LAUNCHER.exists(), f"{LAUNCHER.relative_to(ROOT)} (built by scripts/clients/java-curator.sh)")


def run(tmp_path, *args):
    r = chaos("run", "--client", str(LAUNCHER), "--servers", "zookeeper:3", *args,
              "--store", str(tmp_path), "--json", "--seed", "1")
    assert "Traceback" not in r.stderr + r.stdout, r.stderr[-2000:]
    assert r.stdout.strip(), r.stderr[-2000:]
    return r, json.loads(r.stdout.strip().splitlines()[-1])


def test_curator_passes_the_conformance_check():
    r = chaos("client-check", str(LAUNCHER), "--servers", "zookeeper:3")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("PASS") == 12 and "all steps passed" in r.stdout


def test_curator_is_valid_without_faults(tmp_path):
    r, s = run(tmp_path, "--time-limit", "5", "--concurrency", "3")
    assert s["valid"] is True and s["critical_sections"] >= 1, r.stderr[-1000:]


# fenced is a campaign test: the store's fence is the harness's, shown fenced by the relay's test
@pytest.mark.parametrize("fencing, valid", [([], False), pytest.param(["--fencing"], True, marks=pytest.mark.campaign)])
def test_curator_under_a_pause_past_its_session(tmp_path, fencing, valid):
    """Paused 2.5 x the 1 s TTL with a 1 s session: ZooKeeper deletes the lock node, the next
    client takes the lock, the paused one wakes, writes, and its release() still returns ok."""
    r, s = run(tmp_path, "-n", "pause-holder", "-o", "pause_multiple=2.5", "-o", "session_timeout_ms=1000",
               "--ttl", "1000", "--time-limit", "9", "--concurrency", "3", *fencing)
    assert s["valid"] is valid and s["violations"] >= 1, r.stderr[-1000:]
    ops = [json.loads(line) for line in Path(s["run_dir"], "history.jsonl").read_text().splitlines()]
    paused, = [o["value"]["process"] for o in ops if o["f"] == "pause-holder" and o["type"] == "ok"]
    resumed = next(i for i, o in enumerate(ops) if o["f"] == "resume-holder" and o["type"] == "ok")
    release = next(o for o in ops[resumed:] if o["process"] == paused and o["f"] == "release" and o["type"] != "invoke")
    assert release["type"] == "ok", f"Curator's release() after its node was deleted: {release}"
    assert set(s["violations_by_cause"]) == {"overran-paused"}, s["violations_by_cause"]
    assert s["releases_ok_after_lease_lost"] >= 1, "the report shows that Curator's release() cannot tell"


def started_with(tmp_path, monkeypatch, **options):
    """What the client says of recheck_node_after_acquire when the harness starts it with these -o options."""
    return said_at_start(tmp_path, monkeypatch, str(LAUNCHER), "zookeeper:3", "recheck_node_after_acquire",
                         lambda line: line.split(" ", 1)[1], **options)


@pytest.mark.parametrize("options, said", [({}, "recheck_node_after_acquire=false"),
                                           ({"recheck_node_after_acquire": "true"}, "recheck_node_after_acquire=true"),
                                           ({"recheck_node_after_acquire": "off"}, "recheck_node_after_acquire=false")])
def test_the_recheck_is_off_unless_asked_for_with_o(tmp_path, monkeypatch, options, said):
    assert started_with(tmp_path, monkeypatch, **options) == [said]


def test_a_recheck_value_that_is_not_a_flag_stops_the_client_at_its_start(tmp_path, monkeypatch):
    with pytest.raises(BadArgument, match="recheck_node_after_acquire=maybe: recheck_node_after_acquire is a flag"):
        started_with(tmp_path, monkeypatch, recheck_node_after_acquire="maybe")


def java_child(nodes, **options) -> Child:
    """One java-curator process on `nodes` (its JVM takes a while to start)."""
    servers = [{"kind": "zookeeper", "name": n.name, "host": n.host, "port": n.port} for n in nodes]
    return Child([str(LAUNCHER)], servers, init_timeout=20, **options)


@pytest.mark.parametrize("recheck", [False, True])
def test_a_waiter_whose_session_expired_while_it_waited(request, recheck):
    """A holds the lock; B waits behind it; B is stopped past its 1 s session, and ZooKeeper
    deletes B's node with the session. B resumes (a new session) and A releases. Curator as
    shipped does not grant B on its dead node (etcd 3.4's Mutex does, test_client_go.py): its
    lock loop finds the node gone (NoNode), creates a new one and waits on that, so B answers
    ok on a node that exists, with that node's czxid as token (from the create's reply), and
    `held` false (the listener saw the session lost during the acquire). The re-check agrees."""
    clients = []
    cluster = start_cluster(request, None, Group(kind=zookeeper.ZooKeeperKind(), names=("z1", "z2", "z3")),
                            netns=False, before_down=lambda: [c.stop() or c.close() for c in clients])
    nodes = cluster.nodes  # three: one alone would be standalone, which the kind does not serve
    zk = KazooClient(hosts=",".join(n.endpoint for n in nodes), timeout=5)
    zk.start(timeout=10)
    clients.append(zk)
    options = {"recheck_node_after_acquire": "true"} if recheck else {}
    a, b = java_child(nodes), java_child(nodes, session_timeout_ms="1000", **options)
    assert (a.init["recheck_node_after_acquire"], b.init["recheck_node_after_acquire"]) == (False, recheck)

    def lock_nodes():  # under /chaos/k, by czxid
        return {zk.get(f"/chaos/k/{n}")[1].czxid: n for n in zk.get_children("/chaos/k")}

    try:
        held = a.call({"op": "acquire", "key": "k", "ttl_ms": 1000, "timeout_s": 5})
        assert held["type"] == "ok" and list(lock_nodes()) == [held["token"]], (held, lock_nodes())
        b.send({"op": "acquire", "key": "k", "ttl_ms": 1000, "timeout_s": 30})
        first = eventually(lambda: set(lock_nodes()) - {held["token"]}, timeout=10)
        os.kill(b.p.pid, signal.SIGSTOP)
        try:  # the session expires on the server, which deletes B's node
            eventually(lambda: set(lock_nodes()) == {held["token"]}, timeout=10)
        finally:
            os.kill(b.p.pid, signal.SIGCONT)
        second = eventually(lambda: set(lock_nodes()) - {held["token"]}, timeout=15)  # B's new node, new session
        assert min(second) > max(first), (first, second)
        assert a.call({"op": "release", "key": "k", "value": held["value"]})["type"] == "ok"
        got = b.reply(timeout=15)
        assert got["type"] == "ok", got
        assert {got["token"]} == second == set(lock_nodes()), (got, second, lock_nodes())
        assert b.call({"op": "held", "key": "k", "value": got["value"]}) == {"id": b.id, "type": "ok", "held": False}
    finally:
        a.close()
        b.close()


@pytest.mark.campaign  # the deterministic session-expiry steps above prove the same in the suite
@pytest.mark.parametrize("recheck", ["false", "true"])
def test_under_pause_waiter_curator_stays_valid_with_the_recheck_or_without(tmp_path, recheck):
    """The run-level view of the test above: a waiter stopped for 3 TTLs (6 s, past its 3 s
    session) resumes, and Curator creates a new node rather than granting it on its dead one.
    Unlike etcd 3.4 (test_client_go.py), there is nothing for the re-check to catch."""
    r, s = run(tmp_path, "-n", "pause-waiter", "-o", "pause_multiple=3", "-o", f"recheck_node_after_acquire={recheck}",
               "--acquire-timeout", "10", "--time-limit", "20", "--concurrency", "3")
    assert s["valid"] is True, (s["violations_by_cause"], r.stderr[-1000:])
    ops = [json.loads(line) for line in Path(s["run_dir"], "history.jsonl").read_text().splitlines()]
    assert [o for o in ops if o["f"] == "pause-waiter" and o["type"] == "ok"], "no waiter was stopped"
