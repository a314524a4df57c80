"""Shrinking a failing schedule: the smallest one that still shows the same finding.

A candidate is a list of recorded faults (harness/engine/replay.py) and a workload time
limit. The search is pure: it asks an oracle, one trial at a time, whether a candidate
showed the finding again (the shrink command's oracle is a real replay; the unit tests'
is a function), so it is tested without servers, flaky oracles included.

Order, as in delta debugging (Zeller's ddmin) and then Hypothesis's shrinking passes:
  1. drop faults: ddmin over the fault list (subsets, then complements, finer and finer);
  2. shorten each remaining fault: halve its duration while it still reproduces, down to
     MIN_DURATION_S;
  3. shorten the workload: to the end of the last heal plus the recovery period, else half
     way there.
Each candidate is tried up to `trials` times and kept only if it reproduced in at least
`rate` of them (rates compare at two decimals, so 2 of 3 meets 0.67); its trials stop as soon
as the outcome is decided. A candidate already tried is not tried again. `stop()` is asked
before each trial (a budget); when it says stop, or the oracle raises (Ctrl-C), `best` is
the smallest candidate kept so far.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

from harness.engine.replay import Recorded

MIN_DURATION_S = 0.5  # below this a fault cannot be applied, verified and healed (MIN_INTERVAL_S)
TIME_MARGIN_S = 1.0  # the workload runs on this long past the last heal before its recovery


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    faults: tuple[Recorded, ...]
    time_limit: float

    def size(self) -> tuple:
        """Smaller is better: fewer faults, then less fault time, then a shorter workload."""
        return (len(self.faults), round(sum(r.duration for r in self.faults), 3), self.time_limit)

    def to_dict(self) -> dict:
        return {"faults": [r.to_dict() for r in self.faults], "time_limit": self.time_limit}

    def key(self) -> str:
        """Equal for equal candidates (values are JSON, not hashable)."""
        return json.dumps(self.to_dict(), sort_keys=True, default=str)


@dataclass(slots=True, kw_only=True)
class Tried:
    """One candidate and its outcome: the trials' results (True: reproduced) and whether it was kept."""

    step: str  # "drop", "shorten" or "time-limit"
    candidate: Candidate
    outcomes: list[bool] = field(default_factory=list)
    kept: bool = False

    def to_dict(self) -> dict:
        return {"step": self.step, **self.candidate.to_dict(), "outcomes": self.outcomes, "kept": self.kept}


class Stop(Exception):
    """The budget ran out: the search ends with what it has."""


def needed(trials: int, rate: float) -> int:
    """Reproductions of `trials` that meet `rate`: the smallest k with k/trials >= rate at two decimals."""
    return next((k for k in range(trials + 1) if round(k / trials, 2) >= rate), trials)


class Search:
    """`run(start)` shrinks `start`; `best`, `tried` and `trials_run` hold the search so far.

    oracle(candidate) -> bool runs one trial. `on_tried(tried, search)` is called after each
    candidate (progress). `stop()` True ends the search before the next trial."""

    def __init__(self, oracle: Callable[[Candidate], bool], *, trials: int = 3, rate: float = 0.67,
                 recovery: float = 0.0, stop: Callable[[], bool] = lambda: False,
                 on_tried: Callable[[Tried, "Search"], None] | None = None):
        if trials < 1:
            raise ValueError("trials must be at least 1")
        if not 0 < rate <= 1:
            raise ValueError("rate must be above 0 and at most 1")
        self.oracle, self.trials, self.rate, self.recovery = oracle, trials, rate, recovery
        self.need = needed(trials, rate)
        self.stop, self.on_tried = stop, on_tried
        self.tried: list[Tried] = []
        self.trials_run = 0
        self.best: Candidate | None = None
        self.best_outcomes: list[bool] = []  # the trials of the best candidate (none for the start)
        self.stopped = False
        self._seen: dict[str, bool] = {}

    def test(self, step: str, c: Candidate) -> bool:
        """Whether c reproduces (tried at most `trials` times); a kept c smaller than best becomes best."""
        key = c.key()
        if key in self._seen:
            return self._seen[key]
        t = Tried(step=step, candidate=c)
        self.tried.append(t)
        while True:
            hits = sum(t.outcomes)
            if hits >= self.need or hits + self.trials - len(t.outcomes) < self.need:
                break
            if self.stop():
                self.stopped = True
                raise Stop
            self.trials_run += 1
            t.outcomes.append(bool(self.oracle(c)))
        t.kept = sum(t.outcomes) >= self.need
        self._seen[key] = t.kept
        if t.kept and (self.best is None or c.size() < self.best.size()):
            self.best, self.best_outcomes = c, list(t.outcomes)
        if self.on_tried is not None:
            self.on_tried(t, self)
        return t.kept

    def run(self, start: Candidate) -> Candidate:
        """The smallest candidate found (start itself if nothing smaller reproduced)."""
        self.best = start
        self._seen[start.key()] = True  # the run being shrunk showed the finding
        try:
            c = self._drop(start)
            c = self._shorten(c)
            self._time_limit(c)
        except Stop:
            pass
        return self.best

    def confirm(self) -> list[bool]:
        """Try the best candidate until it has `trials` outcomes (its own trials stopped once
        its keeping was decided), so its rate is "k of trials"; the budget still applies."""
        if self.best is None or not self.best_outcomes:
            return self.best_outcomes
        while len(self.best_outcomes) < self.trials and not self.stop():
            self.trials_run += 1
            self.best_outcomes.append(bool(self.oracle(self.best)))
        return self.best_outcomes

    def _drop(self, c: Candidate) -> Candidate:
        items = list(c.faults)

        def test(subset: Sequence[Recorded]) -> bool:
            return self.test("drop", replace(c, faults=tuple(subset)))

        n = 2
        while len(items) >= 2:
            chunks = _split(items, n)
            for sub in chunks:
                if test(sub):
                    items, n = sub, 2
                    break
            else:
                for i in range(len(chunks)):
                    rest = [r for j, ch in enumerate(chunks) if j != i for r in ch]
                    if n > 2 and test(rest):
                        items, n = rest, max(n - 1, 2)
                        break
                else:
                    if n >= len(items):
                        break
                    n = min(len(items), 2 * n)
        return replace(c, faults=tuple(items))

    def _shorten(self, c: Candidate) -> Candidate:
        for i in range(len(c.faults)):
            while True:
                r = c.faults[i]
                d = round(r.duration / 2, 3)
                if d < MIN_DURATION_S:
                    break
                shorter = replace(c, faults=c.faults[:i] + (replace(r, duration=d),) + c.faults[i + 1:])
                if not self.test("shorten", shorter):
                    break
                c = shorter
        return c

    def _time_limit(self, c: Candidate) -> Candidate:
        end = max((r.at + r.duration for r in c.faults), default=0.0)
        least = math.ceil(end + TIME_MARGIN_S + self.recovery)
        for t in (least, math.ceil((least + c.time_limit) / 2)):
            if t < c.time_limit and self.test("time-limit", replace(c, time_limit=float(t))):
                return replace(c, time_limit=float(t))
        return c


def _split(items: list, n: int) -> list[list]:
    """items in n nearly equal consecutive chunks."""
    k, m = divmod(len(items), n)
    out, i = [], 0
    for j in range(n):
        size = k + (1 if j < m else 0)
        out.append(items[i:i + size])
        i += size
    return [ch for ch in out if ch]
