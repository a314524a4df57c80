"""What each kind of fault is, as readers of a history need it: which op starts it, which op
heals it, whom its value names, and which causes of a violation it can explain.

A nemesis declares its own kinds next to its code (`FAULTS` on the class, nemesis/*.py); the
runner records them into the run's facts (`spec.facts["faults"]`), so a checker, the CSV and
the report read them from the run itself and never load nemesis code. `BUILTIN` is the record
of the built-in nemeses' declarations, for histories stored before facts were recorded
(tests/unit/core/test_facts.py holds it equal to the declarations). A fault whose kind is in
neither explains nothing: its violations read UNEXPLAINED, as they should until it says why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

TARGETS = ("nodes", "worker", "client", "everyone")
# What a fault can explain: the cause slugs of harness/checker/causes.py a fault grounds, plus
# "in-flight-release" (a release that timed out while it was on may reach the server late).
EXPLAINS = ("overran-paused", "overran-cut-off", "early-server-clock", "early-restart", "early-partition",
            "early-client-clock", "in-flight-release")


@dataclass(frozen=True, slots=True, kw_only=True)
class FaultKind:
    """One kind of fault. `targets` says how its op's value names whom it hits: "nodes" (a
    list of node or client names, or {"nodes": [...]}, or {name: offset}), "worker" (a
    {"worker": index} of a client process), "client" ({"client": "c1"}, else any client),
    "everyone" (the whole cluster). `explains` names what this fault, when it covers the
    moment, can account for (EXPLAINS)."""

    f: str
    heal: str
    targets: str = "nodes"
    explains: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {"f": self.f, "heal": self.heal, "targets": self.targets, "explains": list(self.explains)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "FaultKind":
        return cls(f=str(d["f"]), heal=str(d["heal"]), targets=str(d.get("targets", "nodes")),
                   explains=tuple(str(x) for x in d.get("explains", ())))


_CLOCK = ("early-server-clock", "early-client-clock")
BUILTIN: dict[str, FaultKind] = {k.f: k for k in (
    FaultKind(f="clock-bump", heal="clock-reset", explains=_CLOCK),
    FaultKind(f="clock-strobe", heal="clock-reset", explains=_CLOCK),
    FaultKind(f="clock-drift", heal="clock-reset", explains=_CLOCK),
    FaultKind(f="pause", heal="resume"),
    FaultKind(f="kill", heal="restart", explains=("early-restart",)),
    FaultKind(f="pause-holder", heal="resume-holder", targets="worker", explains=("overran-paused",)),
    FaultKind(f="pause-waiter", heal="resume-waiter", targets="worker"),
    FaultKind(f="kill-holder", heal="respawn-holder", targets="worker"),
    FaultKind(f="cut-in-flight", heal="heal-in-flight", targets="client", explains=("overran-cut-off", "in-flight-release")),
    FaultKind(f="partition-waiter", heal="heal-waiter", targets="client"),
    FaultKind(f="slow-link", heal="fast-link", targets="client", explains=("overran-cut-off", "in-flight-release")),
    FaultKind(f="partition", heal="heal", targets="everyone", explains=("early-partition", "in-flight-release")),
    FaultKind(f="partition-client", heal="heal-client", targets="client",
              explains=("overran-cut-off", "early-partition", "in-flight-release")),
)}


def table(facts: Mapping[str, Any] | None = None) -> dict[str, FaultKind]:
    """The fault kinds a run recorded (facts["faults"]), over the built-in record."""
    out = dict(BUILTIN)
    recorded = facts.get("faults") if isinstance(facts, Mapping) else None
    for d in recorded if isinstance(recorded, list) else ():
        try:
            k = FaultKind.from_dict(d)
        except (KeyError, TypeError, ValueError, AttributeError):
            continue  # a malformed record explains nothing
        out[k.f] = k
    return out


def record(kinds: Iterable[FaultKind]) -> list[dict]:
    """Fault kinds as the runner writes them into facts["faults"]."""
    return [k.to_dict() for k in kinds]


def heals(kinds: Mapping[str, FaultKind]) -> dict[str, tuple[str, ...]]:
    """heal f -> the start fs it ends."""
    out: dict[str, tuple[str, ...]] = {}
    for k in kinds.values():
        out[k.heal] = out.get(k.heal, ()) + (k.f,)
    return out


def targets_of(kind: FaultKind | None, value: Any) -> list:
    """Whom a fault's op value names, read by its kind's `targets` rule."""
    rule = kind.targets if kind is not None else "nodes"
    if rule == "worker":
        return [value.get("worker")] if isinstance(value, dict) else []
    if rule == "client":
        return [value["client"]] if isinstance(value, dict) and isinstance(value.get("client"), str) else ["@any-client"]
    if rule == "everyone":
        return ["@all"]
    if isinstance(value, list):
        return [str(n) for n in value]
    if isinstance(value, dict) and isinstance(value.get("nodes"), list):
        return [str(n) for n in value["nodes"]]
    if isinstance(value, dict):  # {name: offset}
        return [str(n) for n in value]
    return []


def in_effect(history: Sequence, kinds: Mapping[str, FaultKind] | None = None) -> list[dict]:
    """The one account of when each recorded fault was in effect, for the checkers (causes,
    liveness, leases), the report's bands and ops.csv alike: [{f, start_ns, end_ns | None,
    value}], one per fault, in start order.

    A fault is in effect from its start op's invoke, unless that op failed (`fail`: not
    applied); an `info` or a start that never completed may be in effect, so it counts. It
    ends at the completion of the first op that heals its kind (its `heal`) completing after
    its invoke; a heal that failed healed nothing. Never healed: `end_ns` None (in effect to
    the end of the history). Two faults of one kind that overlap stay two."""
    import bisect

    from harness.core.history import NEMESIS, pair_ops

    kinds = kinds if kinds is not None else BUILTIN
    heal_of = {k.f: k.heal for k in kinds.values()}
    ops = sorted((o for o in history if o.process == NEMESIS), key=lambda o: (o.time_ns, o.index))
    pairs = list(pair_ops(ops))
    heal_fs = set(heal_of.values())
    healed: dict[str, list[int]] = {}
    for inv, done in pairs:
        if inv.f in heal_fs and done is not None and done.type != "fail":
            healed.setdefault(inv.f, []).append(done.time_ns)
    for ends in healed.values():
        ends.sort()
    out = []
    for inv, done in pairs:
        if inv.f not in heal_of or (done is not None and done.type == "fail"):
            continue
        ends = healed.get(heal_of[inv.f], [])
        k = bisect.bisect_right(ends, inv.time_ns)
        value = done.value if done is not None and done.value is not None else inv.value
        out.append({"f": inv.f, "start_ns": inv.time_ns, "end_ns": ends[k] if k < len(ends) else None, "value": value})
    return out


def fault_intervals(history: Sequence, kinds: Mapping[str, FaultKind] | None = None) -> list[dict]:
    """The report's and ops.csv's bands, [{f, start_ns, end_ns | None, value}]: `in_effect`,
    with faults of one kind that overlap joined into one band (None: never healed)."""
    out: list[dict] = []
    last: dict[str, dict] = {}
    for iv in in_effect(history, kinds):
        band = last.get(iv["f"])
        if band is not None and (band["end_ns"] is None or iv["start_ns"] <= band["end_ns"]):
            band["end_ns"] = None if band["end_ns"] is None or iv["end_ns"] is None else max(band["end_ns"], iv["end_ns"])
            continue
        last[iv["f"]] = band = dict(iv)
        out.append(band)
    return out
