"""The facts a run records for its checkers (harness/core/facts.py) and the fault kinds its nemeses
declare (harness/core/faults.py): the records for older runs equal the code's declarations, a new
nemesis explains its violations through its own declaration (no edit in causes.py), and a
history whose servers are not known gets "unknown", never a pass."""

from __future__ import annotations

from types import SimpleNamespace

from harness.core import faults, plugins
from harness.core.facts import BUILTIN_SERVICE, service_facts, service_of
from harness.core.faults import FaultKind
from tests.unit.checker.test_causes import H


def test_the_builtin_fault_record_is_what_the_builtin_nemeses_declare():
    declared = {}
    for name in plugins.NEMESES:
        for k in plugins.nemesis_class(name).FAULTS:
            assert k.f not in declared, f"{k.f} declared twice"
            declared[k.f] = k
    assert declared == faults.BUILTIN
    for k in declared.values():
        assert k.targets in faults.TARGETS and set(k.explains) <= set(faults.EXPLAINS), k


def test_the_builtin_service_record_is_what_the_builtin_backends_declare():
    for name in plugins.BACKENDS:
        if name == "external":  # its servers come from --servers: always recorded, never derived
            assert name not in BUILTIN_SERVICE
            continue
        assert BUILTIN_SERVICE[name] == plugins.servers_of(name, {}), name


def test_the_runner_records_the_service_and_the_fault_kinds():
    from harness.engine.runner import run_facts
    from harness.core.spec import TestSpec

    spec = TestSpec(backend="zookeeper", nemesis=("partition", "kill")).validate()
    facts = run_facts(spec, [plugins.nemesis_class(n)() for n in spec.nemesis])
    assert {k: facts[k] for k in ("kind", "servers", "clock_expiry", "persists")} == \
        {"kind": "zookeeper", "servers": 3, "clock_expiry": False, "persists": True}
    assert facts["session_timeout_ms"] == 3000.0
    assert [k["f"] for k in facts["faults"]] == ["partition", "kill"]
    back = service_of(SimpleNamespace(backend="nonesuch", options={}, facts=facts))
    assert back.recorded and back.kind == "zookeeper" and back.servers == 3


def test_service_facts_per_kind():
    assert service_facts("valkey", 1, {})["persists"] is False
    assert service_facts("valkey", 1, {"appendonly": True})["persists"] is True
    assert service_facts("etcd", 3, {})["clock_expiry"] is False
    assert service_facts("etcd", 3, {}, 2500)["session_timeout_ms"] == 3000.0  # a lease of whole seconds
    assert service_facts("valkey", 5, {"session_timeout_ms": 9}, 2500)["session_timeout_ms"] is None
    assert service_facts("zookeeper", 3, {"zk_clock": "faketime"})["clock_expiry"] is True


def _storm(h: H, f: str = "storm", heal: str = "calm") -> H:
    """Process 1 is granted 5 s before process 0's lease ends, while fault f is on."""
    h.acquire(0, 0.0, 0.1, valid=10.0).acquire(1, 1.0, 5.0, valid=15.0)
    h.fault(f, 2.0, ["n1"], heal, 6.0)
    return h.release(0, 8.0).release(1, 9.0)


def test_a_new_nemesis_explains_through_its_own_declaration():
    h = _storm(H(backend="redis"))
    assert [c["cause"] for c in h.causes()[0]] == ["unexplained"]  # an undeclared fault explains nothing
    storm = FaultKind(f="storm", heal="calm", explains=("early-restart",))
    h.spec.facts = {"kind": "valkey", "servers": 1, "clock_expiry": True, "persists": False,
                    "faults": faults.record([storm])}
    assert [c["cause"] for c in h.causes()[0]] == ["early-restart"]


def test_a_fault_on_unknown_servers_is_an_unknown_cause_not_a_pass():
    h = _storm(H(backend="someone-elses-lock"), "kill", "restart")  # did the server keep its data?
    causes, r = h.causes()
    assert [c["cause"] for c in causes] == ["unknown"] and r.valid is False
    h.spec.backend = "redis"  # a built-in backend: its facts are derived from the spec
    assert [c["cause"] for c in h.causes()[0]] == ["early-restart"]


def test_malformed_facts_are_ignored_not_trusted():
    for facts in (None, 5, {"faults": 7}, {"faults": "ab"}, {"faults": [3, {"x": 1}]}):
        assert faults.table(facts) == faults.BUILTIN
    assert not service_of(SimpleNamespace(backend="nonesuch", options={}, facts={"kind": 5})).known
    assert service_of(SimpleNamespace(backend="redis", options={}, facts={"kind": 5})).kind == "valkey"  # derived
