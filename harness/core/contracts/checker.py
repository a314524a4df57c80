"""The checker contract and its three-valued verdict.

A checker is `check(spec, history) -> CheckResult`. It must not mutate the history, must
not talk to servers, and must never answer True when it could not finish: a checker that
raises or runs out of time yields valid="unknown" (see `safe_check`).
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

from harness.core.history import Op

Valid = bool | str  # True, False or "unknown"
UNKNOWN = "unknown"
# Keys of CheckResult.details by which a checker whose verdict is "unknown" says why that need
# not make the run's verdict unknown (harness/checker/policy.py finding_counts): it judged what
# it could and only some items could not be (PARTIAL), or its promise does not apply (INAPPLICABLE).
PARTIAL = "partial"
INAPPLICABLE = "inapplicable"


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


CRASH, UNSUPPORTED = "crash", "unsupported"  # how a matrix row stores a run that decided nothing
_WORDS = {"true": True, "false": False, UNKNOWN: UNKNOWN, CRASH: CRASH, UNSUPPORTED: UNSUPPORTED}


def parse_verdict(stored: Any) -> bool | str:
    """The one reader of a stored verdict: exactly one of True, False, "unknown", "crash" or
    "unsupported".

    Read as written is only what chaoslock writes: JSON true/false/"unknown" (results.json,
    --json, rows) and the matrix CSV's words "true", "false", "unknown", "crash",
    "unsupported". Everything else ("False" with a capital, "maybe", "", "1", "yes", None,
    numbers: 1 == True in Python, but 1 is no verdict) is "unknown": a verdict nobody proved
    is never read as valid, nor as invalid. Every reader of a stored `valid` goes through here.
    """
    if stored is True or stored is False:
        return stored
    if isinstance(stored, str) and stored in _WORDS:
        return _WORDS[stored]
    return UNKNOWN


def recognised(stored: Any) -> bool:
    """Whether `stored` is a verdict chaoslock writes (parse_verdict reads it as written)."""
    return stored is True or stored is False or (isinstance(stored, str) and stored in _WORDS)


def parse_valid(stored: Any) -> Valid:
    """A run's verdict from what was stored: True, False or "unknown" (a crash or a refused
    run decided nothing either)."""
    v = parse_verdict(stored)
    return v if isinstance(v, bool) else UNKNOWN


def verdict_csv(stored: Any) -> str:
    """The word a CSV row stores for a verdict: true, false, unknown, crash or unsupported."""
    v = parse_verdict(stored)
    return "true" if v is True else "false" if v is False else v


def verdict_word(valid: Any) -> str:
    """The word every page and line shows for a verdict: VALID, INVALID or UNKNOWN (also for
    anything parse_verdict does not recognise: a verdict is never VALID by default)."""
    v = parse_valid(valid)
    return "VALID" if v is True else "INVALID" if v is False else "UNKNOWN"


def merge_valid(values: Sequence[Valid]) -> Valid:
    """The worst of several verdicts: False beats "unknown" beats True; anything that is not a
    verdict (a plug-in checker's None, "maybe") counts as "unknown", never as True."""
    read = [parse_valid(v) for v in values]
    if any(v is False for v in read):
        return False
    if all(v is True for v in read):
        return True
    return UNKNOWN
