"""The live progress line during `chaos run`: elapsed/remaining, ops/s, faults, violations.

Written to stderr and only when stderr is a terminal; quiet otherwise (CI logs, pipes).
"""

from __future__ import annotations

import sys
import time
from typing import Any


class Progress:
    def __init__(self, *, enabled: bool, spec: Any):
        self.enabled = enabled and sys.stderr.isatty()
        self.spec = spec
        self._last = 0.0
        self._last_ops = 0
        self._last_t = time.monotonic()
        self._rate = 0.0

    def status(self, text: str) -> None:
        if self.enabled:
            sys.stderr.write(f"\r\033[K{text}")
            sys.stderr.flush()

    def update(self, elapsed: float, live: Any) -> None:
        now = time.monotonic()
        if not self.enabled or now - self._last < 0.25:
            return
        self._last = now
        dt = now - self._last_t
        if dt >= 1.0:
            self._rate = (live.ops - self._last_ops) / dt
            self._last_ops, self._last_t = live.ops, now
        remaining = max(0.0, self.spec.time_limit - elapsed)
        faults = ",".join(live.faults) or "none"
        colour = "\033[31m" if live.violations else "\033[32m"
        self.status(f"{self.spec.name}  {elapsed:5.1f}s (-{remaining:4.1f}s)  ops {live.ops}  "
                    f"{self._rate:6.0f} ops/s  faults: {faults}  {colour}violations {live.violations}\033[0m")

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
