"""TestSpec: every option of a run in one frozen value, written into the run dir.

`run(spec)` needs nothing else; `chaos run` only builds a TestSpec from its flags. Keys:

  backend          lock design under test (see `chaos list`); decides the cluster
  nemesis          tuple of nemesis names composed on one schedule; () runs without faults
  time_limit       seconds of workload in all, including the final recovery period
  recovery         seconds at the end, after every fault is healed, the workload goes on
  concurrency      client worker processes
  seed             seeds the fault schedule and every worker's random choices
  ttl_ms           lock time-to-live handed to acquire
  acquire_timeout  seconds an acquire may try before it is a `fail`
  hold_max_ms      longest critical section (random below it); default 60 % of the TTL
  fencing          whether the resource enforces the lease's fencing token
  nemesis_interval seconds between fault start and heal, and between faults
  clock_jump_s     how far clock-skew jumps (default 2.5 x TTL)
  options          backend options (timeouts, retries, session timeout, ...)
  netns            True: namespaces required; False: loopback; None: namespaces if possible
  base_port        first loopback port (None: free ports); ignored with namespaces
  cluster          "local" (processes in namespaces, the default) or "compose" (Docker)
  store            directory runs land in (store/<name>/<timestamp>/)
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from harness.errors import BadArgument


@dataclass(frozen=True, slots=True, kw_only=True)
class TestSpec:
    __test__ = False  # not a pytest class

    backend: str = "redlock"
    nemesis: tuple[str, ...] = ()
    time_limit: float = 30.0
    recovery: float = 3.0
    concurrency: int = 5
    seed: int = 0
    ttl_ms: int = 2000
    acquire_timeout: float = 2.0
    hold_max_ms: int | None = None
    fencing: bool = False
    nemesis_interval: float = 3.0
    clock_jump_s: float | None = None
    key: str = "chaos-lock"
    options: Mapping[str, Any] = field(default_factory=dict)
    netns: bool | None = None
    base_port: int | None = None
    store: str = "store"
    cluster: str = "local"
    command: str = ""

    @property
    def name(self) -> str:
        return f"{self.backend}-{'+'.join(self.nemesis) or 'none'}" + ("-fenced" if self.fencing else "")

    @property
    def hold_max(self) -> float:
        """Longest hold in seconds."""
        return (self.hold_max_ms if self.hold_max_ms is not None else 0.6 * self.ttl_ms) / 1000

    @property
    def jump_s(self) -> float:
        return self.clock_jump_s if self.clock_jump_s is not None else 2.5 * self.ttl_ms / 1000

    def validate(self) -> "TestSpec":
        from harness import plugins

        plugins.backend_class(self.backend)
        for n in self.nemesis:
            plugins.nemesis_class(n)
        checks = [
            (self.time_limit > 0, f"--time-limit must be a positive number of seconds, not {self.time_limit}"),
            (0 <= self.recovery < self.time_limit, f"--recovery ({self.recovery}) must be at least 0 and shorter than --time-limit ({self.time_limit})"),
            (1 <= self.concurrency <= 64, f"--concurrency must be between 1 and 64, not {self.concurrency}"),
            (self.ttl_ms >= 50, f"--ttl must be at least 50 ms, not {self.ttl_ms}"),
            (self.acquire_timeout > 0, f"--acquire-timeout must be positive, not {self.acquire_timeout}"),
            (self.cluster in ("local", "compose"), f"--cluster must be local or compose, not {self.cluster!r}"),
            (self.nemesis_interval > 0, f"--nemesis-interval must be positive, not {self.nemesis_interval}"),
            (self.hold_max < self.ttl_ms / 1000, f"--hold-max ({self.hold_max * 1000:.0f} ms) must be below the TTL ({self.ttl_ms} ms)"),
        ]
        for ok, msg in checks:
            if not ok:
                raise BadArgument(msg)
        return self

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["nemesis"] = list(self.nemesis)
        d["options"] = dict(self.options)
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

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
