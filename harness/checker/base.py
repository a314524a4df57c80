"""The checker contract and its three-valued verdict.

A checker is `check(spec, history) -> CheckResult`. It must not mutate the history, must
not talk to servers, and must never answer True when it could not finish: a checker that
raises or runs out of time yields valid="unknown" (see `safe_check`).
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

from harness.history import Op

Valid = bool | str  # True, False or "unknown"
UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckResult:
    name: str
    valid: Valid
    summary: dict[str, Any] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    def to_dict(self) -> dict:
        return {"name": self.name, "valid": self.valid, "summary": self.summary,
                "details": self.details, "error": self.error}


class Checker(Protocol):
    name: str

    def check(self, spec: Any, history: Sequence[Op]) -> CheckResult: ...


def safe_check(checker: Checker | Callable, spec: Any, history: Sequence[Op], name: str | None = None) -> CheckResult:
    """Run a checker; an exception becomes valid="unknown" with the error, never True."""
    label = name or getattr(checker, "name", None) or getattr(checker, "__name__", "checker")
    fn = checker.check if hasattr(checker, "check") else checker
    try:
        return fn(spec, history)
    except Exception as e:  # a crashing checker must not be mistaken for a pass
        return CheckResult(name=label, valid=UNKNOWN, error=f"{type(e).__name__}: {e}",
                           details={"traceback": traceback.format_exc(limit=5)})


def verdict_word(valid: Any) -> str:
    """The word every page and line shows for a verdict: VALID, INVALID or UNKNOWN (also for
    anything that is not True or False: a verdict is never VALID by default)."""
    return "VALID" if valid is True else "INVALID" if valid is False else "UNKNOWN"


def merge_valid(values: Sequence[Valid]) -> Valid:
    """The worst of several verdicts: False beats "unknown" beats True."""
    if any(v is False for v in values):
        return False
    if any(v == UNKNOWN for v in values):
        return UNKNOWN
    return True
