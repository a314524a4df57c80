"""TestSpec: every option of a run in one frozen value, written into the run dir.

`run(spec)` needs nothing else; `chaos run` only builds a TestSpec from its flags. Keys:

  backend          lock design under test (see `chaos list`); decides the cluster
  nemesis          tuple of nemesis names composed on one schedule; () runs without faults
  time_limit       seconds of workload in all, including the final recovery period
  recovery         seconds at the end, after every fault is healed, the workload goes on
  concurrency      client worker processes (up to MAX_CONCURRENCY)
  keys             distinct lock keys; each cycle a worker picks one by its seeded random
                   choice (1: the one `key`; K: key-0 .. key-(K-1), each with its own counter)
  seed             seeds the fault schedule and every worker's random choices
  ttl_ms           lock time-to-live handed to acquire
  acquire_timeout  seconds an acquire may try before it is a `fail`
  hold_max_ms      longest critical section (random below it); default 60 % of the TTL
  fencing          whether the resource enforces the lease's fencing token
  renew            holders work 1-2 TTLs and renew in the foreground every TTL/3 (a renew op each)
  reenter          holders ask for the lock they hold again (reacquire, then rerelease): reentrancy
  hold_until_expiry holders keep the lock until `-o margin_ms` before the validity their client
                   reported, then write and release: releases race the expiry on the server
  nemesis_interval seconds between fault start and heal, and between faults
  clock_jump_s     how far clock-skew jumps (default 2.5 x TTL)
  lock             the lock kind: "mutex", "rw" or "semaphore:N" (harness/core/kinds.py); the
                   backend must list it; every acquire records it, and the checkers read it there
  options          backend options (timeouts, retries, session timeout, ...)
  netns            True: namespaces required; False: loopback; None: namespaces if possible
  base_port        first loopback port (None: free ports); ignored with namespaces
  cluster          "local" (processes in namespaces, the default), "compose" (Docker) or
                   "ssh" (the user's own hosts, named in `ssh`)
  store            directory runs land in (store/<name>/<timestamp>/)
  facts            what the run recorded about its servers and faults for the checkers
                   (harness/core/facts.py); set by the runner, never by a flag
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from harness.core.errors import BadArgument

MAX_TIME_S = 86_400  # a day: longer belongs to a campaign of runs (chaos matrix, reproduce)
MIN_INTERVAL_S = 0.5  # below this a fault cannot be applied, verified and healed in its slot
MAX_JUMP_S = 10 * 365 * 86_400  # ten years
MAX_CONCURRENCY = 256  # client worker processes; beyond 64 they share client namespaces (cluster/base.py)
MAX_KEYS = 100_000


@dataclass(frozen=True, slots=True, kw_only=True)
class TestSpec:
    __test__ = False  # not a pytest class

    backend: str = "redlock"
    nemesis: tuple[str, ...] = ()
    time_limit: float = 30.0
    recovery: float = 3.0
    concurrency: int = 5
    keys: int = 1
    seed: int = 0
    ttl_ms: int = 2000
    acquire_timeout: float = 2.0
    hold_max_ms: int | None = None
    fencing: bool = False
    renew: bool = False
    reenter: bool = False
    hold_until_expiry: bool = False
    nemesis_interval: float = 3.0
    clock_jump_s: float | None = None
    lock: str = "mutex"
    key: str = "chaos-lock"
    options: Mapping[str, Any] = field(default_factory=dict)
    netns: bool | None = None
    base_port: int | None = None
    store: str = "store"
    cluster: str = "local"
    ssh: Mapping[str, Any] = field(default_factory=dict)  # --cluster ssh: hosts, user, port, key, known_hosts
    command: str = ""
    facts: Mapping[str, Any] = field(default_factory=dict)  # recorded by the runner (harness/core/facts.py)

    @property
    def name(self) -> str:
        if self.is_bare:
            return "bare-history"
        return f"{self.backend}-{'+'.join(self.nemesis) or 'none'}" + ("-fenced" if self.fencing else "") \
            + ("-renew" if self.renew else "") + ("-reenter" if self.reenter else "") \
            + ("-expiry" if self.hold_until_expiry else "") \
            + (f"-k{self.keys}" if self.keys != 1 else "") + _kind_suffix(self.lock)

    @property
    def lock_keys(self) -> tuple[str, ...]:
        """The lock keys a run's workers pick from."""
        if self.is_bare:
            return ()
        return (self.key,) if self.keys == 1 else tuple(f"{self.key}-{i}" for i in range(self.keys))

    @property
    def hold_max(self) -> float:
        """Longest hold in seconds."""
        return (self.hold_max_ms if self.hold_max_ms is not None else 0.6 * self.ttl_ms) / 1000

    @property
    def jump_s(self) -> float:
        return self.clock_jump_s if self.clock_jump_s is not None else 2.5 * self.ttl_ms / 1000

    def validate(self) -> "TestSpec":
        """This spec with its options typed, or a BadArgument naming the first bad setting.

        Every number must be finite and in a range a real run can keep up with (a fault and
        its heal take real time; a history must fit on disk), so nothing starts on a
        setting that would run away or mean something other than what was typed."""
        from harness.core import options, plugins

        backend = plugins.backend_class(self.backend)
        nemeses = [plugins.nemesis_class(n) for n in self.nemesis]
        for name, value in (("--time-limit", self.time_limit), ("--recovery", self.recovery),
                            ("--acquire-timeout", self.acquire_timeout), ("--nemesis-interval", self.nemesis_interval),
                            ("--clock-jump", self.clock_jump_s)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or not math.isfinite(value)):
                raise BadArgument(f"{name} must be a finite number of seconds, not {value!r}")
        for name, value in (("--fencing", self.fencing), ("--renew", self.renew), ("--reenter", self.reenter),
                            ("--hold-until-expiry", self.hold_until_expiry)):
            if not isinstance(value, bool):
                raise BadArgument(f"{name} is a flag (true or false), not {value!r}")
        if self.renew and self.hold_until_expiry:
            raise BadArgument("--renew and --hold-until-expiry both decide how long a holder works; give one of them")
        if self.netns not in (None, True, False):
            raise BadArgument(f"--netns is a flag (true, false or unset), not {self.netns!r}")
        for name, value in (("--concurrency", self.concurrency), ("--keys", self.keys), ("--seed", self.seed), ("--ttl", self.ttl_ms),
                            ("--hold-max", self.hold_max_ms), ("--base-port", self.base_port)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise BadArgument(f"{name} must be an integer, not {value!r}")
        checks = [
            (0 < self.time_limit <= MAX_TIME_S, f"--time-limit must be above 0 and at most {MAX_TIME_S} seconds (24 h), not {self.time_limit:g}"),
            (0 <= self.recovery < self.time_limit, f"--recovery ({self.recovery:g}) must be at least 0 and shorter than --time-limit ({self.time_limit:g})"),
            (1 <= self.concurrency <= MAX_CONCURRENCY,
             f"--concurrency must be between 1 and {MAX_CONCURRENCY}, not {self.concurrency}"),
            (1 <= self.keys <= MAX_KEYS, f"--keys must be between 1 and {MAX_KEYS}, not {self.keys}"),
            (0 <= self.seed < 2**63, f"--seed must be between 0 and 2^63-1, not {self.seed}"),
            (50 <= self.ttl_ms <= 3_600_000, f"--ttl must be between 50 ms and 3600000 ms (1 h), not {self.ttl_ms}"),
            (0 < self.acquire_timeout <= 3600, f"--acquire-timeout must be above 0 and at most 3600 seconds, not {self.acquire_timeout:g}"),
            (self.cluster in plugins.PROVIDERS,
             f"--cluster must be one of {', '.join(plugins.PROVIDERS)}, not {self.cluster!r}"),
            (self.cluster in ("ssh", "swarm") or not self.ssh, "--hosts and the --ssh-* settings go with --cluster ssh"),
            (MIN_INTERVAL_S <= self.nemesis_interval <= MAX_TIME_S,
             f"--nemesis-interval must be at least {MIN_INTERVAL_S:g} s (a fault and its heal take real time) "
             f"and at most {MAX_TIME_S} s, not {self.nemesis_interval:g}"),
            (self.clock_jump_s is None or 0 < abs(self.clock_jump_s) <= MAX_JUMP_S,
             f"--clock-jump must be non-zero and at most {MAX_JUMP_S:g} seconds either way, not {self.clock_jump_s}"),
            (self.hold_max_ms is None or self.hold_max_ms >= 0, f"--hold-max must be at least 0 ms, not {self.hold_max_ms}"),
            (self.hold_max < self.ttl_ms / 1000, f"--hold-max ({self.hold_max * 1000:.0f} ms) must be below the TTL ({self.ttl_ms} ms)"),
            (self.base_port is None or 1024 <= self.base_port <= 65535 - 32,
             f"--base-port must be between 1024 and {65535 - 32} (room for every server), not {self.base_port}"),
            (isinstance(self.key, str) and re.fullmatch(r"[A-Za-z0-9_.:-]{1,58}", self.key) is not None
             and not self.key.endswith(":counter"),
             f"key {self.key!r} must be 1-58 letters, digits or _.:- and not end in :counter"),
        ]
        for ok, msg in checks:
            if not ok:
                raise BadArgument(msg)
        if not isinstance(self.ssh, Mapping):
            raise BadArgument(f"ssh must be a mapping (hosts, user, port, key, known_hosts), not {type(self.ssh).__name__}")
        if not isinstance(self.options, Mapping):
            raise BadArgument(f"options must be a mapping of NAME to VALUE, not {type(self.options).__name__}")
        if not isinstance(self.facts, Mapping):
            raise BadArgument(f"facts must be a mapping, not {type(self.facts).__name__}")
        from harness.core import kinds, refusals

        kind = kinds.parse(self.lock)
        typed, _ = options.resolve(backend, nemeses, self.options)
        if "lock" in {o.name for o in options.declared(backend) or ()}:  # an external client is told the kind
            if "lock" in self.options and kinds.parse(typed["lock"]) != kind:
                raise BadArgument(f"-o lock is set by --lock; give --lock {typed['lock']} instead")
            typed["lock"] = str(kind)
        kinds.require(self.backend, backend, kind, typed)
        plugins.servers_of(self.backend, typed)  # a backend whose servers come from its options checks them now
        spec = dataclasses.replace(self, options=typed, lock=str(kind))
        refusals.refuse(spec)  # what the spec alone decides (harness/core/refusals.py)
        return spec

    def notes(self) -> list[str]:
        """What the user should know about this (validated) spec before it runs: options and
        flags without effect on it, one line each."""
        from harness.core import options, plugins, refusals

        return options.resolve(plugins.backend_class(self.backend),
                               [plugins.nemesis_class(n) for n in self.nemesis], self.options)[1] + refusals.notes(self)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["nemesis"] = list(self.nemesis)
        d["options"] = dict(self.options)
        d["ssh"] = dict(self.ssh)
        d["facts"] = dict(self.facts)
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def bare(cls, *, backend: str | None = None, ttl_ms: int | None = None, keys: int | None = None) -> "TestSpec":
        """The spec of a history checked without its spec.json (a foreign one, or a copy):
        nothing it does not say is assumed. Backend, TTL, acquire timeout, key count and
        concurrency are None unless given (`chaos check --backend/--ttl/--keys`); a checker
        that needs one of them says "unknown" with the reason, never judges by a default.
        Never a spec to run."""
        return cls(backend=backend, ttl_ms=ttl_ms, keys=keys, acquire_timeout=None,  # type: ignore[arg-type]
                   concurrency=None, key=None, command="")  # type: ignore[arg-type]

    @property
    def is_bare(self) -> bool:
        """Whether this spec came from no spec.json (TestSpec.bare)."""
        return self.concurrency is None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "TestSpec":
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise BadArgument(f"unknown spec field(s) {', '.join(sorted(unknown))}; known: {', '.join(sorted(names))}")
        kw = dict(d)
        if "nemesis" in kw:
            kw["nemesis"] = tuple(kw["nemesis"])
        return cls(**kw)


def _kind_suffix(lock: str) -> str:
    from harness.core.kinds import parse

    try:
        return parse(lock).suffix
    except Exception:
        return f"-{lock}"  # an unvalidated spec still has a name
