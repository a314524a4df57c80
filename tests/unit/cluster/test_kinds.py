"""The server-kind registry (harness/cluster/kinds.py): every kind carries all a provider asks
of it, the facts a run records from a kind equal the ones derived for a stored run, and a
toy kind added as one class plus one registry line reaches every provider's plan."""

from __future__ import annotations

import shlex
import typing
from typing import Any, Mapping, Sequence

import pytest

from harness.cluster import compose_file as F
from harness.cluster import kinds, ssh
from harness.cluster.provider import clock_method, prepare_node
from harness.core.contracts.cluster import Node, ServerKind
from harness.core.facts import service_facts

ATTRIBUTES = [a for a in typing.get_type_hints(ServerKind) if not a.startswith("_")]
OPTIONS = [{}, {"appendonly": True}, {"zk_clock": "faketime"}, {"session_timeout_ms": 4000}]


@pytest.mark.parametrize("name", list(kinds.KINDS))
def test_every_kind_carries_what_the_providers_read(name):
    kind = kinds.server_kind(name)
    missing = [a for a in ATTRIBUTES if not hasattr(kind, a)]
    assert not missing, f"{name} lacks {missing}"
    assert kind.name == name and kind.clock_method in kind.clock_methods
    assert set(kind.clock_methods) <= {"faketime", "timewarp"}
    assert bool(kind.host_check) == bool(kind.debs)  # what is checked is what is installed
    for a in ATTRIBUTES:
        assert hasattr(type(kind), a) or a in ("clock_method", "clock_expiry", "persists"), \
            f"{name}.{a} is per-run; only the options-dependent attributes may be"


def test_prefixes_and_compose_addresses_are_each_kinds_own():
    classes = [kinds.kind_class(k) for k in kinds.KINDS]
    assert len({c.prefix for c in classes}) == len(classes)
    hosts = [h for c in classes for h in c.compose_hosts]
    assert len(set(hosts)) == len(hosts) and 10 not in hosts  # NET[10] is the store's


@pytest.mark.parametrize("name", list(kinds.KINDS))
@pytest.mark.parametrize("options", OPTIONS)
def test_the_recorded_facts_equal_the_derived_ones(name, options):
    """A stored run derives its facts in harness/core/facts.py without cluster code; a new run
    records the kind's own. For the built-in kinds they must agree."""
    own = kinds.recorded_facts(kinds.server_kind(name, options))
    assert service_facts(name, 3, options, 2500, own) == service_facts(name, 3, options, 2500)


def test_unknown_kind_names_the_known_ones():
    from harness.core.errors import BadArgument

    with pytest.raises(BadArgument, match="unknown server kind 'memcache'; .* valkey, etcd, zookeeper"):
        kinds.server_kind("memcache")


class Memcached:
    """The toy kind of docs/extending.md, as a test: one class, one registry line."""

    name = "memcached"
    prefix = "m"
    default_port = 11211
    peer_ports = (0, 0)
    binary = "memcached"
    image = "chaoslock-memcached:1.6"
    compose_hosts = range(41, 44)
    health = ("bash", "-c", ("exec 3<>/dev/tcp/{host}/{port} && printf 'version\\r\\n' >&3 && "
               "timeout 2 head -c 16 <&3 | grep -q VERSION"))
    debs = ("memcached",)
    host_check = "command -v memcached"
    strip_env = ()
    data_dir_mode = None
    clock_methods = ("faketime",)
    clock_method = "faketime"
    clock_expiry = True
    clock_read_error_s = 1.0
    persists = False
    sessions = False
    stops_together = True

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> Memcached:
        return cls()

    def check_installed(self) -> None:
        pass

    def config_files(self, node: Node, peers: Sequence[Node]) -> dict[str, str]:
        return {"memcached.conf": f"-l {node.host}\n-p {node.port}\n"}

    def argv(self, node: Node, peers: Sequence[Node], binary: str | None = None) -> list[str]:
        return [binary or "/usr/bin/memcached", "-l", node.host, "-p", str(node.port), "-U", "0"]

    def env(self, node: Node) -> dict[str, str]:
        return {}

    def node_ready(self, node: Node) -> bool:
        return True

    def cluster_ready(self, nodes: Sequence[Node]) -> bool:
        return True

    def read_clock(self, node: Node) -> float:
        return 0.0


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(kinds.KINDS, "memcached", f"{__name__}:Memcached")
    return kinds.server_kind("memcached")


def test_a_new_kind_is_one_class_and_one_registry_line(toy, tmp_path):
    assert kinds.node_names("memcached", 2) == ("m1", "m2")
    node = Node(name="m1", kind="memcached", host="10.0.0.1", port=11211, data_dir=str(tmp_path / "m1"))
    prepare_node(toy, node, [node])  # the local provider
    assert (tmp_path / "m1" / "memcached.conf").read_text() == "-l 10.0.0.1\n-p 11211\n"
    assert clock_method(node) is None  # no libfaketime file, and no vDSO patch for it
    assert ssh.needs_of([toy], faked=False)["memcached"] == ("command -v memcached", ("memcached",))
    s = F.Server(name="m1", kind="memcached", ordinal=1, ip=str(F.NET[41]))  # the compose provider
    svc = F.document([(s, toy)], run="abc123", state="/x", faketime=None)["services"]["m1"]
    assert svc["image"] == "chaoslock-memcached:1.6"
    assert svc["command"][2].endswith(f"exec {shlex.join(toy.argv(F.container_node(s), [], binary='memcached'))} "
                                      f">>{F.LOG_FILE} 2>&1")
    assert "printf %s '-l 198.19.250.41\n-p 11211\n' > /state/data/memcached.conf" in svc["command"][2]
    assert svc["healthcheck"]["test"][-1].startswith("exec 3<>/dev/tcp/198.19.250.41/11211 && printf 'version")
