"""The recorded schedule of a run: the faults it applied, read back from its history.

A run's history holds every nemesis op it invoked (docs/history-format.md), so the faults it
applied can be replayed without re-planning them: each `Recorded` fault is its kind (the op
that started it), its offset in seconds from the workload's start (its invoke), how long it
lasted (to the invoke of the op that healed it, a final heal included) and the value it was
invoked with (what was asked, which names targets by role where the nemesis did: "@leader",
"@holder").

Two ways to replay a fault (harness/engine/generator.py does both):
  - periodic faults (clock-skew, pause, kill, partition, partition-client, slow-link) are
    planned by the schedule alone: the same op and value at the same offset, healed by the
    recorded heal op and value `duration` seconds later;
  - reactive faults aimed at a moment of a client's life (REACTIVE: pause-holder,
    kill-holder, pause-waiter, partition-waiter, cut-in-flight) cannot be placed by time
    alone: the nemesis is let start one only when a recorded one of its kind is due, i.e.
    at its first trigger at or after the recorded offset, and the schedule heals it
    `duration` seconds after it started. The target is the role (the holder, a waiter), not
    the worker number of the original.

The workload's start is not in the history; the earliest op stands for it (workers record
their first invoke as the runner starts its clock, a few ms apart).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from harness.core import faults as F
from harness.core.errors import BadArgument

# Faults whose moment is a client's (an ok read, a waiter's acquire in flight, a release invoked).
REACTIVE = frozenset({"pause-holder", "kill-holder", "pause-waiter", "partition-waiter", "cut-in-flight"})


@dataclass(frozen=True, slots=True, kw_only=True)
class Recorded:
    """One fault a run applied, as a replay needs it."""

    f: str  # the op that started it
    at: float  # seconds from the workload's start to its invoke
    duration: float  # seconds from its invoke to its heal's invoke
    value: Any = None  # the start op's invoke value
    heal: str = ""  # the op that heals it
    heal_value: Any = None  # the heal op's invoke value (None: heal everything of this kind)

    @property
    def reactive(self) -> bool:
        return self.f in REACTIVE

    def to_dict(self) -> dict:
        return {"f": self.f, "at": self.at, "duration": self.duration, "value": self.value, "heal": self.heal,
                "heal_value": self.heal_value}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Recorded":
        return cls(f=str(d["f"]), at=float(d["at"]), duration=float(d["duration"]), value=d.get("value"),
                   heal=str(d.get("heal") or ""), heal_value=d.get("heal_value"))

    def words(self) -> str:
        return f"{self.f}{_aim(self)} at {self.at:g} s for {self.duration:g} s"


def _aim(r: Recorded) -> str:
    v = r.value
    if r.f == "clock-bump" and isinstance(v, dict):
        return " of " + ", ".join(f"{n} {off:+g} s" for n, off in sorted(v.items()) if isinstance(off, (int, float)))
    if isinstance(v, list) and v:
        return " of " + ", ".join(map(str, v))
    if isinstance(v, dict) and isinstance(v.get("nodes"), list):
        return " of " + ", ".join(map(str, v["nodes"]))
    return ""


def recorded_faults(history: Sequence, facts: Mapping[str, Any] | None = None, *,
                    kinds: Mapping[str, F.FaultKind] | None = None) -> list[Recorded]:
    """Every fault the history shows applied (completed ok or info; a `fail` was not applied),
    in invoke order, each paired with the next heal of its kind. A fault never healed in the
    history (the run was cut short) lasts to the history's end. The kinds are `kinds` when
    given (a replay: those the installed nemeses declare), else what `facts` recorded."""
    from harness.core.history import NEMESIS

    if not history:
        return []
    kinds = F.table(facts) if kinds is None else kinds
    ends = F.heals(kinds)
    t0 = min(o.time_ns for o in history)
    last = max(o.time_ns for o in history)
    pairs: list[list] = []  # [invoke, completion or None]: the nemesis has one op in flight
    for o in history:
        if o.process != NEMESIS:
            continue
        if o.type == "invoke":
            pairs.append([o, None])
        elif pairs and pairs[-1][1] is None and pairs[-1][0].f == o.f:
            pairs[-1][1] = o
    out: list[tuple[Any, Recorded]] = []  # (invoke, fault without its end yet)
    open_: dict[str, list[int]] = {}  # heal f -> indexes into out still open
    for inv, done in pairs:
        if inv.f in ends:  # a heal closes every open fault it heals
            for f in ends[inv.f]:
                for n in open_.pop(f, []):
                    start, r = out[n]
                    out[n] = (start, replace(r, duration=_s(inv.time_ns - start.time_ns), heal=inv.f,
                                             heal_value=inv.value))
            continue
        if inv.f not in kinds or done is None or done.type == "fail":
            continue
        r = Recorded(f=inv.f, at=_s(inv.time_ns - t0), duration=_s(last - inv.time_ns), value=inv.value,
                     heal=kinds[inv.f].heal)
        open_.setdefault(inv.f, []).append(len(out))
        out.append((inv, r))
    return [r for _, r in out]


def _s(ns: int) -> float:
    return round(ns / 1e9, 3)


@dataclass(frozen=True, slots=True, kw_only=True)
class Schedule:
    """A schedule to replay: its faults, and the run it came from (its dir)."""

    of: str
    faults: tuple[Recorded, ...]

    def to_dict(self) -> dict:
        return {"of": self.of, "faults": [r.to_dict() for r in self.faults]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Schedule":
        return cls(of=str(d.get("of", "")), faults=tuple(Recorded.from_dict(r) for r in d.get("faults", ())))


def words(fs: Sequence[Recorded]) -> str:
    """A schedule in words, e.g. "1 fault: clock-bump of n1 +5 s, n2 +5 s at 4.2 s for 3 s"."""
    if not fs:
        return "no faults"
    return f"{len(fs)} fault{'s' if len(fs) != 1 else ''}: " + "; ".join(r.words() for r in fs)


def kinds_of(nemeses: Sequence[str]) -> dict[str, F.FaultKind]:
    """f -> FaultKind of every fault the named nemeses declare (their installed classes'
    FAULTS); one sentence (BadArgument) for a name the registry does not know."""
    from harness.core import plugins

    return {k.f: k for n in nemeses for k in getattr(plugins.nemesis_class(n), "FAULTS", ())}


def load(run_dir: str | Path) -> tuple[Any, list[Recorded]]:
    """(TestSpec, recorded faults) of a stored run, or one sentence (BadArgument) why it cannot
    be replayed: not a run dir, a history that cannot be read, a nemesis op that none of the
    run's nemeses makes, a run without faults. A replay of a replay is a replay of what it
    applied. The faults are read by the installed nemeses' declarations (kinds_of); whom
    they aim at is checked by harness/engine/replay_input.py."""
    from harness.core.history import NEMESIS
    from results.store import load_run

    p = Path(run_dir)
    if not p.is_dir() or not (p / "history.jsonl").is_file():
        raise BadArgument(f"{run_dir} is not a run directory (no history.jsonl in it); give one such as "
                          f"store/<test>/<timestamp> or store/latest")
    if not (p / "spec.json").is_file():
        raise BadArgument(f"{run_dir} has no spec.json, so its options are unknown and it cannot be replayed")
    spec, history = load_run(p, need_dir=True)
    kinds = kinds_of(spec.nemesis)  # the installed nemeses' own declarations, never the run dir's facts
    foreign = sorted({o.f for o in history if o.process == NEMESIS} - set(kinds) - {k.heal for k in kinds.values()})
    if foreign:
        raise BadArgument(f"{run_dir}'s history has {', '.join(map(repr, foreign))[:80]} op(s), which none of its "
                          f"nemeses ({', '.join(spec.nemesis) or 'none'}) makes, so it cannot be replayed; "
                          f"replay a run dir as chaoslock wrote it")
    found = recorded_faults(history, kinds=kinds)
    if not found:
        raise BadArgument(f"{run_dir} applied no faults (its history has no nemesis op that took effect), "
                          f"so there is no schedule to replay; run it again with chaos run instead")
    return spec, found
