"""The swarm provider's pure parts: the nodes file, where each server goes and on which
ports, the stack it deploys, and the iptables rules a cut becomes (no engine needed)."""

from __future__ import annotations

import pytest

from harness.cluster.kinds import node_names, server_kind
from harness.cluster.provider import Group
from harness.cluster.swarm import SwarmCluster
from harness.cluster.swarm_engines import SwarmNode, read_nodes
from harness.cluster.valkey import ValkeyKind
from harness.core.errors import BadArgument, NemesisError

ENGINES = [SwarmNode("e1", "unix:///run/e1.sock", "198.19.249.11"), SwarmNode("e2", "unix:///run/e2.sock", "198.19.249.12"),
           SwarmNode("e3", "tcp://198.19.249.13:2375", "198.19.249.13")]


def cluster(kind: str, count: int, *, fake: bool = False, engines=ENGINES) -> SwarmCluster:
    groups = [Group(kind=server_kind(kind, {}), names=node_names(kind, count), fake_clock=fake),
              Group(kind=ValkeyKind(), names=("store",), role="store")]
    return SwarmCluster("abc123", groups, engines, clients=2)


def test_the_nodes_file_is_read_and_bad_lines_get_one_sentence(tmp_path):
    f = tmp_path / "nodes"
    f.write_text("# engines\ne1 unix:///run/e1.sock 198.19.249.11\ne2 tcp://10.0.0.2:2375 198.19.249.12  # a worker\n")
    assert [n.name for n in read_nodes(str(f))] == ["e1", "e2"]
    f.write_text("e1 unix:///run/e1.sock\n")
    with pytest.raises(BadArgument, match="line 1: want `NAME ENGINE-URL ADDRESS`"):
        read_nodes(str(f))
    f.write_text("e1 unix:///run/e1.sock 198.19.249.11\n")
    with pytest.raises(BadArgument, match="two or more"):
        read_nodes(str(f))
    with pytest.raises(BadArgument, match="does not exist"):
        read_nodes(str(tmp_path / "missing"))


def test_lock_servers_go_round_robin_the_store_to_the_manager_each_on_its_own_ports():
    c = cluster("valkey", 5)
    assert [c.placed[n].name for n in ("n1", "n2", "n3", "n4", "n5", "store")] == ["e1", "e2", "e3", "e1", "e2", "e1"]
    assert [c.node(n).host for n in ("n1", "n2", "n4")] == ["198.19.249.11", "198.19.249.12", "198.19.249.11"]
    ports = [c.node(n).port for n in ("n1", "n2", "n3", "n4", "n5", "store")]
    assert len(set(ports)) == 6 and ports[0] == 21000
    e = cluster("etcd", 3)
    assert [(e.node(n).port, e.node(n).peer_port) for n in ("e1", "e2", "e3")] == [(21000, 21001), (21010, 21011), (21020, 21021)]
    assert e.node("store").peer_port == 0


def test_the_stack_places_each_server_on_its_engines_host_network_never_restarted():
    c = cluster("valkey", 3, fake=True)
    doc = c.document()
    assert doc["networks"] == {"hostnet": {"external": True, "name": "host"}}
    n2 = doc["services"]["n2"]
    assert n2["deploy"]["placement"]["constraints"] == ["node.labels.chaoslock.node == e2"]
    assert n2["deploy"]["restart_policy"] == {"condition": "none"} and n2["networks"] == ["hostnet"]
    assert n2["labels"] == n2["deploy"]["labels"] == {"chaoslock.run": "abc123"}
    assert n2["volumes"] == [f"{c.dir}:{c.dir}"]  # the run's state dir at the same path
    assert "--bind 198.19.249.12 --port 21010" in n2["command"][2] and "--proc-title-template" not in n2["command"][2]
    assert n2["environment"]["FAKETIME_TIMESTAMP_FILE"] == c.node("n2").clock_file
    assert "environment" not in doc["services"]["store"]


def test_etcd_members_share_one_cluster_token_that_carries_the_run_id():
    doc = cluster("etcd", 3).document()
    tokens = {s["command"][2].split("--initial-cluster-token ")[1].split()[0] for n, s in doc["services"].items() if n != "store"}
    assert tokens == {"chaoslock-abc123"}


def test_a_cut_between_servers_matches_their_addresses_and_ports_on_the_engine():
    c = cluster("etcd", 3)
    rules = c._cut_rules("e1", "e2")
    assert set(rules) == {("engine", "e1")}
    text = "\n".join(sorted(rules[("engine", "e1")]))
    assert "-A INPUT -s 198.19.249.12/32 -p tcp -m multiport --dports 21000,21001" in text
    assert "-A OUTPUT -d 198.19.249.12/32 -p tcp -m multiport --dports 21010,21011" in text
    assert all("--comment chaoslock-abc123 -j DROP" in r for r in rules[("engine", "e1")])


def test_servers_on_one_engine_cannot_be_cut_apart_nor_one_of_them_alone():
    c = cluster("valkey", 5)  # n1 and n4 share e1
    with pytest.raises(NemesisError, match="both run on engine e1"):
        c._cut_rules("n1", "n4")
    with pytest.raises(NemesisError, match="share engine e[12]: a cut of"):
        c.partition({"n1": ["n2"], "n2": ["n1"]})


def test_a_client_cut_needs_the_client_namespaces():
    c = cluster("etcd", 3)
    c.fallback_reason = "no bridge here"
    with pytest.raises(NemesisError, match="cannot cut client c1 alone: no bridge here"):
        c._cut_rules("c1", "e1")
    assert c._cut_rules("c1", "c2") == {}


def on_the_swarm(where: str) -> SwarmCluster:
    c = SwarmCluster("abc123", [Group(kind=server_kind("etcd", {}), names=node_names("etcd", 3)),
                                Group(kind=ValkeyKind(), names=("store",), role="store")],
                     ENGINES, clients=4, clients_on=where, client_image="my/client:1")
    c._pods = {f"c{i + 1}": (c.client_engine(i), f"pod{i + 1}" + "0" * 20) for i in range(c.n_clients)}
    return c


def test_clients_on_places_each_client_host_on_the_manager_or_round_robin():
    assert [on_the_swarm("manager").client_engine(i).name for i in range(4)] == ["e1", "e1", "e1", "e1"]
    assert [on_the_swarm("spread").client_engine(i).name for i in range(4)] == ["e1", "e2", "e3", "e1"]
    assert not cluster("etcd", 3).clients_elsewhere() and on_the_swarm("spread").clients_elsewhere()


def test_a_worker_on_the_swarm_runs_its_client_in_a_container_in_its_pods_network():
    from pathlib import Path

    from harness.cluster.swarm_clients import CHECKOUT

    place = on_the_swarm("spread").client(1)
    assert place.netns is None and [n.name for n in place.nodes] == ["e1", "e2", "e3"]
    w = list(place.wrap)
    assert w[:6] == ["docker", "-H", "unix:///run/e2.sock", "run", "-i", "--rm"]
    assert w[w.index("--network") + 1] == "container:pod2" + "0" * 20
    assert "chaoslock.run=abc123" in w and "chaoslock.worker=1" in w and w[-1] == "my/client:1"
    mounts = [w[i + 1] for i, a in enumerate(w) if a == "-v"]
    assert f"{CHECKOUT}:{CHECKOUT}" in mounts or any(CHECKOUT.is_relative_to(m.split(":")[0]) for m in mounts)
    assert w[w.index("-w") + 1] == str(Path.cwd().resolve())
    assert cluster("etcd", 3).client(1).wrap == ()  # clients_on=control: the worker's own process, here


def test_a_cut_of_a_client_on_the_swarm_goes_into_its_pod():
    c = on_the_swarm("spread")
    rules = c._cut_rules("c2", "e1")
    assert set(rules) == {("pod", "c2")}
    assert "-A OUTPUT -d 198.19.249.11/32 -p tcp -m multiport --dports 21000,21001" in "\n".join(rules[("pod", "c2")])


@pytest.mark.parametrize("argv, words", [
    (["--cluster", "local", "--client", "x", "--servers", "valkey:1", "-o", "clients_on=spread"], "goes with --cluster swarm"),
    (["--cluster", "swarm", "--backend", "redis", "-o", "clients_on=manager"], "give it as a client: --client 'python3 clients/python-relay/relay.py --backend redis'"),
    (["--cluster", "swarm", "--client", "x", "--servers", "valkey:1", "-o", "clients_on=spread", "-n", "slow-link",
      "-o", "rate_kbit=100"], "slow-link -o rate_kbit on the swarm limits only the links of clients on this machine"),
    (["--cluster", "swarm", "--backend", "etcd", "-n", "slow-link", "-o", "between=servers", "-o", "rate_kbit=100"],
     "slow-link -o rate_kbit on the swarm limits only"),
    (["--cluster", "swarm", "--client", "x", "--servers", "valkey:1", "-o", "clients_on=spread", "-n", "clock-skew",
      "-o", "clock_target=clients"], "use clock_target=servers or drop -o clients_on"),
    (["--cluster", "swarm", "--client", "x", "--servers", "valkey:1", "-o", "client_image=a/b"], "-o client_image goes with -o clients_on"),
])
def test_clients_on_refusals_come_from_the_spec_alone(argv, words):
    from harness.core.spec import TestSpec

    kw: dict = {"options": {}}
    it = iter(argv)
    for a in it:
        v = next(it)
        if a == "--cluster":
            kw["cluster"] = v
        elif a == "--backend":
            kw["backend"] = v
        elif a == "--client":
            kw["backend"], kw["options"]["command"] = "external", v
        elif a == "--servers":
            kw["options"]["servers"] = v
        elif a == "-n":
            kw["nemesis"] = (v,)
        else:
            k, _, val = v.partition("=")
            kw["options"][k] = val
    with pytest.raises(BadArgument, match=words.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        TestSpec(**kw).validate()
