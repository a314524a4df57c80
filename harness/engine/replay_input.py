"""What a replay or a shrink takes from a run dir, and what only the command line gives it.

A run dir is data, never a program (docs/security.md): it is copied in from CI or another
machine, and `chaos run --replay` and `chaos shrink` run as root. From a run dir they take
  - its faults, their timings and their targets, checked against the cluster the replay will
    bring up (`check_faults`): only kinds the run's own nemeses make, aimed at its lock nodes
    (or clients) and never at the store server, with values the nemesis can apply;
  - the seed and the options that shape the workload (WORKLOAD: the backend and nemeses by
    their registered names, concurrency, keys, TTL, time limit, fencing, renew, ...; `-o`
    options that are plain data).
Never from a run dir (HERE): an option whose declaration names the flag that gives it
(`Option.given_by`: the external client's command is `--client CMD`), the store (`--store`),
the provider (`--cluster`), hosts and ssh settings (`--hosts`, `--ssh-*`), namespaces and
ports (`--netns`, `--base-port`). Those come from the command line, with its defaults, as
for any run; a run that needs one the user did not give is refused in one sentence naming
the flag. Everything here runs before any server starts.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from harness.core.errors import BadArgument
from harness.core.spec import MAX_JUMP_S, MAX_TIME_S, TestSpec
from harness.engine.replay import Recorded, kinds_of

# TestSpec's fields a replay takes from the run dir (plain data, checked by TestSpec.validate)...
WORKLOAD = ("backend", "nemesis", "time_limit", "recovery", "concurrency", "keys", "seed", "ttl_ms",
            "acquire_timeout", "hold_max_ms", "fencing", "renew", "reenter", "hold_until_expiry",
            "nemesis_interval", "clock_jump_s", "lock", "key", "options")
# ...and those it never takes from it (tests/unit/engine/test_replay_input.py holds that each field is in one)
HERE = ("netns", "base_port", "store", "cluster", "ssh", "command", "facts")

STORE_NODE = "store"  # harness/cluster/assemble.py: the never-faulted server of the counter
_AS_WRITTEN = "replay a run dir as chaoslock wrote it"


@dataclass(frozen=True, slots=True, kw_only=True)
class Here:
    """What only the command line gives a replay: where and how it runs (the defaults are
    `chaos run`'s), and the values of options declared `given_by` a flag."""

    store: str = "store"
    cluster: str = "local"
    ssh: Mapping[str, Any] = field(default_factory=dict)
    netns: bool | None = None
    base_port: int | None = None
    client: str | None = None  # --client CMD

    def given(self, flag: str) -> str | None:
        return {"--client CMD": self.client}.get(flag)


def spec_for(recorded: TestSpec, run_dir: str, here: Here, *, time_limit: float | None = None,
             command: str = "") -> TestSpec:
    """The TestSpec of a replay of `recorded` (a run dir's spec): its WORKLOAD fields, less
    every option given by a flag, plus what `here` says; validated. One sentence
    (BadArgument) when the recorded run needs a flag the user did not give (`--client CMD`
    for an external client), or the user gave one the run has no use for."""
    from harness.core import plugins
    from harness.core.options import declared, every_option

    own = {o.name: o for o in declared(plugins.backend_class(recorded.backend)) or () if o.given_by}
    local = {n for n, o in every_option().items() if o.given_by} | set(own)
    options = {k: v for k, v in dict(recorded.options).items() if k not in local}
    for name, o in own.items():
        value = here.given(o.given_by)
        if value is None and recorded.options.get(name) not in (None, "", o.default):
            raise BadArgument(f"{run_dir} was run with an external client, whose command a replay never takes "
                              f"from a run dir; give it with {o.given_by}")
        if value is not None:
            if not value.strip():
                raise BadArgument(f"{o.given_by.split()[0]} needs the client's command, e.g. {o.given_by.split()[0]} "
                                  f"'python3 my_client.py'")
            options[name] = value
    if here.client is not None and not any(o.given_by == "--client CMD" for o in own.values()):
        raise BadArgument(f"--client goes with a replay of a run that used an external client, and {run_dir} ran "
                          f"backend {recorded.backend}; drop --client")
    kw: dict[str, Any] = {f: getattr(recorded, f) for f in WORKLOAD}
    kw.update(options=options, store=here.store, cluster=here.cluster, ssh=dict(here.ssh), netns=here.netns,
              base_port=here.base_port, command=command, facts={})
    if time_limit is not None:
        kw["time_limit"] = time_limit
    return TestSpec(**kw).validate()


def asked_faults(recorded: TestSpec, run_dir: str) -> tuple[Recorded, ...] | None:
    """The schedule a recorded replay was asked to replay (its facts' `replay.faults`), or
    None when it was not a replay; one sentence when that record is not a list of faults.
    Whom they aim at is checked by check_faults, like any recorded fault."""
    r = recorded.facts.get("replay") if isinstance(recorded.facts, Mapping) else None
    if not isinstance(r, Mapping) or not isinstance(r.get("faults"), list):
        return None
    try:
        return tuple(Recorded.from_dict(d) for d in r["faults"])
    except (KeyError, TypeError, ValueError, AttributeError):
        raise BadArgument(f"{run_dir}'s spec.json says it replays a schedule (facts.replay.faults) that is not a "
                          f"list of faults; {_AS_WRITTEN}") from None


def check_faults(spec: TestSpec, faults: Sequence[Recorded], run_dir: str) -> tuple[Recorded, ...]:
    """The faults a replay of `spec` may apply, each healed by its installed kind's heal, or
    one sentence (BadArgument) for the first that it must not: a kind none of the spec's
    nemeses makes, a time that is not finite or not within a day, a target the cluster the
    replay brings up does not have (its lock nodes; clients c1..cN for clock faults), the
    store server (never faulted: it holds the counter the checks read), a value the nemesis
    cannot apply. Reactive faults aim at a role (the holder, a waiter) when they start, so
    only their kind and times are read, and the moment a kill drew inside an acquire (`after_ms`,
    a number of ms the replay sleeps). Needs only the spec: nothing has started yet."""
    from harness.cluster.kinds import node_names
    from harness.core import plugins

    kinds = kinds_of(spec.nemesis)
    lock = set(node_names(*plugins.servers_of(spec.backend, spec.options)))
    clients = {f"c{i + 1}" for i in range(spec.concurrency)}
    out = []
    for r in faults:
        kind = kinds.get(r.f)
        if kind is None:
            raise BadArgument(f"{run_dir} asks for a {_shown(r.f)} fault, which none of its nemeses "
                              f"({', '.join(spec.nemesis) or 'none'}) makes; {_AS_WRITTEN}")
        for what, x in (("starts at", r.at), ("lasts", r.duration)):
            if not (math.isfinite(x) and 0 <= x <= MAX_TIME_S):
                raise BadArgument(f"{run_dir}'s {r.f} fault {what} {x!r} s, not a time within a day; {_AS_WRITTEN}")
        if r.reactive and isinstance(r.value, dict) and "after_ms" in r.value:  # a replay kills at this moment
            from nemesis.midacquire import MAX_AT_MS

            try:
                _number(r.value["after_ms"], "after_ms", 0, MAX_AT_MS)
            except ValueError as e:
                raise BadArgument(f"{run_dir}'s {r.f} at {r.at:g} s has a value a replay cannot apply ({e}); "
                                  f"{_AS_WRITTEN}") from None
        if not r.reactive:
            for f, value in ((r.f, r.value), (kind.heal, r.heal_value)):
                if f == kind.heal and value is None:  # a heal of everything of its kind (Recorded.heal_value)
                    continue
                try:
                    aimed = _aimed(f, value, kind if f == r.f else None, spec.concurrency)
                except ValueError as e:
                    raise BadArgument(f"{run_dir}'s {f} at {r.at:g} s has a value a replay cannot apply ({e}); "
                                      f"{_AS_WRITTEN}") from None
                allowed = lock | clients if f.startswith("clock-") or f not in _BUILTIN else lock
                for name in aimed:
                    if name == STORE_NODE:
                        raise BadArgument(f"{run_dir} aims {f} at the store server, which holds the counter the checks "
                                          f"read and is never faulted; a replay refuses it ({_AS_WRITTEN})")
                    if name not in allowed and not _role(f, name):
                        raise BadArgument(f"{run_dir} aims {f} at {_shown(name)}, which the cluster a replay of it "
                                          f"brings up does not have (its lock nodes are {', '.join(sorted(lock))}); "
                                          f"{_AS_WRITTEN}")
        out.append(dataclasses.replace(r, heal=kind.heal))
    return tuple(out)


# The built-in nemeses' ops whose values a replay passes on (nemesis/*.py invoke), and how each
# names its targets; the heals of this list ignore their values. Anything else is a plugin's.
_BUILTIN = frozenset({"pause", "kill", "clock-bump", "clock-strobe", "clock-drift", "clock-reset", "partition",
                      "partition-client", "slow-link", "resume", "restart", "heal", "heal-client", "fast-link"})


def _aimed(f: str, value: Any, kind: Any, concurrency: int) -> list[str]:
    """The names op `f` with `value` aims at; ValueError (why) for a value its nemesis
    cannot apply or that names its targets in a way no nemesis of ours writes."""
    if f in ("pause", "kill", "clock-reset"):
        return _names(value)
    if f == "clock-bump":
        for offset in _dict(value).values():
            _number(offset, "an offset", -MAX_JUMP_S, MAX_JUMP_S)
        return list(_dict(value))
    if f == "clock-strobe":
        d = _dict(value)
        _number(d.get("delta"), "delta", -MAX_JUMP_S, MAX_JUMP_S)
        _number(d.get("period_s"), "period_s", 0.01, 60)
        return _names(d.get("nodes"))
    if f == "clock-drift":
        d = _dict(value)
        _number(d.get("rate"), "rate", 1e-9, 100)
        return _names(d.get("nodes"))
    if f == "partition":
        return [n for a, hated in _dict(_dict(value).get("grudge")).items() for n in [a, *_names(hated)]]
    if f == "partition-client":
        d = _dict(value)
        fallback = d.get("fallback")
        if not isinstance(fallback, int) or isinstance(fallback, bool) or not 0 <= fallback < concurrency:
            raise ValueError(f"fallback must be a worker 0-{concurrency - 1}")
        return _names(d.get("servers"))
    if f == "slow-link":
        if value is not None:
            _dict(value)
        return []
    if f in _BUILTIN:  # a heal: its nemesis heals what it did, whatever the value says
        return []
    if kind is None:  # a plugin's heal: its rule is not declared
        return []
    from harness.core.faults import targets_of

    return [str(n) for n in targets_of(kind, value) if not isinstance(n, int)]


def _role(f: str, name: str) -> bool:
    """A target named by its role, resolved when the op runs: the leader (pause, kill), or
    for a plugin's fault any "@role" its nemesis resolves itself."""
    return name == "@leader" if f in ("pause", "kill") else f not in _BUILTIN and name.startswith("@")


def _names(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
        raise ValueError("its targets must be a list of node names")
    return list(value)


def _dict(value: Any) -> dict:
    if not isinstance(value, dict):
        raise ValueError("it must be an object")
    return value


def _number(x: Any, what: str, lo: float, hi: float) -> None:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or not lo <= x <= hi:
        raise ValueError(f"{what} must be a finite number from {lo:g} to {hi:g}")


def _shown(x: Any) -> str:
    s = repr(x)
    return s if len(s) <= 40 else s[:37] + "..."
