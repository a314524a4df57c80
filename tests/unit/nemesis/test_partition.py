"""The pure part of partition-client (nemesis/partition.py PartitionClient): whom it takes
for the lock holder as the history goes by, and the grudge it asks the cluster to cut.

The cluster here is a plain test double of NetworkControl that records the grudges it is
given; real cuts between namespaces are tested by tests/integration/nemesis/test_partition.py."""

from __future__ import annotations

import random

import pytest

from harness.core.contracts.cluster import NetworkControl, Node
from harness.core.errors import BadArgument
from harness.core.history import NEMESIS, Op
from harness.core.spec import TestSpec
from harness.core.contracts.nemesis import NemesisContext
from nemesis.partition import Partition, PartitionClient

SERVERS = ["n1", "n2", "n3", "n4", "n5"]


class Net:
    """Records partition/heal; `reaches` answers what the probe of a cut finds."""

    fallback_reason = None

    def __init__(self, reaches: bool = False):
        self.nodes = [Node(name=n, kind="valkey", host=f"198.18.0.{i}", port=6379) for i, n in enumerate(SERVERS, 2)]
        self.nodes.append(Node(name="store", kind="valkey", role="store", host="198.18.0.9", port=6379))
        self.cuts: list[dict[str, set[str]]] = []
        self.heals = 0
        self.probed: list[tuple[str, str]] = []
        self._reaches = reaches

    def partition(self, grudge) -> None:
        self.cuts.append({k: set(v) for k, v in grudge.items()})

    def heal(self) -> None:
        self.heals += 1

    def reaches(self, src: str, dst: str) -> bool:
        self.probed.append((src, dst))
        return self._reaches


def client_nemesis(net: Net | None = None, nemesis=PartitionClient, **options):
    spec = TestSpec(backend="redlock", nemesis=(nemesis.name,), concurrency=3, options=options).validate()
    nem = nemesis()
    nem.setup(NemesisContext(spec=spec, cluster=net or Net()))
    return nem


def op(process, type_: str, f: str, value=None) -> Op:
    return Op(time_ns=1, process=process, type=type_, f=f, value=value)


def cut_op(servers, fallback: int = 0) -> Op:
    return op(NEMESIS, "invoke", "partition-client", {"client": "@holder", "servers": servers, "fallback": fallback})


def test_the_double_is_a_network_control():
    assert isinstance(Net(), NetworkControl)


def test_the_holder_is_whoever_acquired_last_until_it_releases():
    nem = client_nemesis()
    steps = [
        (op(4, "invoke", "acquire"), None), (op(4, "ok", "acquire"), 4),
        (op(5, "invoke", "acquire"), 4), (op(5, "fail", "acquire"), 4),  # a failed acquire changes nothing
        (op(4, "ok", "read"), 4), (op(5, "invoke", "release"), 4),  # someone else's release neither
        (op(4, "invoke", "release"), None),  # the holder's release invoke ends its hold
        (op(5, "ok", "acquire"), 5), (op("final", "ok", "acquire"), 5),  # not a worker
        (op(NEMESIS, "ok", "partition-client"), 5), (op(2, "ok", "acquire"), 2),
    ]
    for event, holder in steps:
        assert nem.on_event(None, event) == []  # it only watches; it plans nothing
        assert nem.holder == holder, event


def test_the_holders_client_is_cut_from_exactly_the_servers_drawn():
    net = Net()
    nem = client_nemesis(net)
    nem.on_event(None, op(7, "ok", "acquire"))  # process 7 of 3 workers: worker 1, client c2
    done = nem.invoke(cut_op(["n1", "n4", "n5"], fallback=0))
    assert net.cuts == [{"c2": {"n1", "n4", "n5"}, "n1": {"c2"}, "n4": {"c2"}, "n5": {"c2"}}]
    assert done.type == "ok" and done.error is None
    assert {k: done.value[k] for k in ("client", "worker", "holder", "island", "servers")} == \
        {"client": "c2", "worker": 1, "holder": 7, "island": None, "servers": ["n1", "n4", "n5"]}
    [(src, dst)] = net.probed  # before saying ok, it tried one pair the grudge cuts
    assert dst in net.cuts[0][src]


def test_without_a_holder_the_planned_fallback_worker_is_cut():
    net = Net()
    done = client_nemesis(net).invoke(cut_op(["n2", "n3", "n4"], fallback=2))
    assert done.value["client"] == "c3" and done.value["holder"] is None
    assert net.cuts[0]["c3"] == {"n2", "n3", "n4"}


def test_an_island_cuts_the_kept_servers_from_the_others_too():
    net = Net()
    nem = client_nemesis(net, island="true")
    nem.on_event(None, op(0, "ok", "acquire"))
    done = nem.invoke(cut_op(["n3", "n4", "n5"]))
    assert net.cuts == [{"c1": {"n3", "n4", "n5"},
                         "n3": {"c1", "n1", "n2"}, "n4": {"c1", "n1", "n2"}, "n5": {"c1", "n1", "n2"},
                         "n1": {"n3", "n4", "n5"}, "n2": {"n3", "n4", "n5"}}]
    assert done.value["island"] == ["c1", "n1", "n2"]


def test_a_cut_that_still_connects_is_info_naming_the_pair():
    done = client_nemesis(Net(reaches=True)).invoke(cut_op(["n1", "n2", "n3"]))
    assert done.type == "info" and done.error == "c1 still reaches n1"


def test_heal_and_teardown_heal_what_was_cut_and_only_that():
    net = Net()
    nem = client_nemesis(net)
    nem.teardown()
    assert net.heals == 0  # nothing cut, nothing to heal
    nem.invoke(cut_op(["n1", "n2", "n3"]))
    assert nem.invoke(op(NEMESIS, "invoke", "heal-client")).type == "ok" and net.heals == 1
    nem.teardown()
    assert net.heals == 1
    nem.invoke(cut_op(["n1", "n2", "n3"]))
    nem.teardown()
    nem.teardown()  # safe twice
    assert net.heals == 2


def test_the_planned_fault_is_seeded_and_cuts_a_majority_by_default():
    nem = client_nemesis()
    faults = [nem.next_fault(random.Random(11)) for _ in range(2)]
    assert faults[0] == faults[1] and faults[0].stop == ("heal-client", None)
    f, value = faults[0].start
    assert f == "partition-client" and value["client"] == "@holder" and value["fallback"] in range(3)
    assert len(value["servers"]) == 3 and set(value["servers"]) <= set(SERVERS)  # the store is never cut
    assert value["servers"] == sorted(value["servers"])
    assert len(client_nemesis(cut_servers=1).next_fault(random.Random(1)).start[1]["servers"]) == 1


def test_setup_refuses_what_it_cannot_do():
    # decided by the spec alone: refused by TestSpec.validate, before any server starts
    with pytest.raises(BadArgument, match=r"^-o cut_servers=6 is more than the 5 lock server\(s\) of redlock \(valkey\); "
                                          r"give 1 to 5$"):
        client_nemesis(cut_servers=6)

    class Loopback(Net):  # a provider without NetworkControl, saying why
        fallback_reason = "not root"
        reaches = None

    assert not isinstance(Loopback(), NetworkControl)
    with pytest.raises(BadArgument, match=r"^partition-client needs network namespaces, which are unavailable "
                                          r"here \(not root\); run as root$"):
        client_nemesis(Loopback())


def test_partition_cuts_the_planned_grudge_among_the_lock_servers():
    net = Net()
    nem = client_nemesis(net, nemesis=Partition, partition_shape="halves")
    fault = nem.next_fault(random.Random(3))
    assert fault.start[1]["describe"] == "n1 n2 n3 | n4 n5" and fault.stop == ("heal", None)
    assert nem.invoke(op(NEMESIS, "invoke", *fault.start)).type == "ok"
    assert net.cuts == [{k: set(v) for k, v in fault.start[1]["grudge"].items()}]
    assert all(k in SERVERS for k in net.cuts[0])  # never the store, never a client
