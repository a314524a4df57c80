"""Checking a history of many lock keys one key at a time (P-compositionality).

A run with `--keys K` holds K independent locks, each guarding its own counter
(`<key>:counter`). Mutual exclusion, stale writes and lost updates are properties of
one lock and its counter, so a checker written for one key is run on each key's part of
the history (its lock ops, its counter's reads and writes, its final read, and every op
without a key, such as the nemesis's) and the parts' results are merged here: the
verdict is the worst of them, counts add up, maxima stay maxima, listings are joined.
A run of one key (and any history whose spec says `keys` is 1, whatever its keys are
called) goes to the checker unchanged; a history whose spec does not say (a bare one) is
split by the keys it names.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from harness.core.contracts.checker import INAPPLICABLE, UNKNOWN, CheckResult, merge_valid
from harness.core.history import NEMESIS, Op

COUNTER = ":counter"
MAX_LISTED = 200  # entries of a joined listing (the checkers' own limit)
UNCAPPED = frozenset({"causes", "windows"})  # joined whole: ops.csv and the report's timeline need every one
MAX_KEYS_LISTED = 50


def lock_key(key: str | None) -> str | None:
    """The lock a key belongs to: a counter key's lock, or the key itself."""
    return key[:-len(COUNTER)] if key is not None and key.endswith(COUNTER) else key


def split(history: Sequence[Op]) -> dict[str, list[Op]] | None:
    """Each lock key's part of the history, in history order; None when there is one key."""
    keys: dict[str, list[Op]] = {}
    for op in history:
        k = None if op.process == NEMESIS else lock_key(op.key)
        if k is not None and k not in keys:
            keys[k] = []
    if len(keys) <= 1:
        return None
    for op in history:
        k = None if op.process == NEMESIS else lock_key(op.key)
        if k is None:  # an op of no key (the nemesis's) belongs to every part
            for part in keys.values():
                part.append(op)
        else:
            keys[k].append(op)
    return keys


def per_key(check: Callable[[Any, Sequence[Op]], CheckResult]) -> Callable[[Any, Sequence[Op]], CheckResult]:
    """`check` run on each key's part of a history of several keys, its results merged."""

    def checked(spec: Any, history: Sequence[Op]) -> CheckResult:
        keys = getattr(spec, "keys", 1)
        # a history whose key count is not known (a bare one) is split by the keys it names
        parts = split(history) if keys is None or keys > 1 else None
        if parts is None:
            return check(spec, history)
        return merge({k: check(spec, part) for k, part in parts.items()})

    checked.__name__ = getattr(check, "__name__", "checker")
    return checked


def merge(results: dict[str, CheckResult]) -> CheckResult:
    """One result of a checker from its result on each key. A key the checker does not apply
    to (details "inapplicable": no resource touched on it) is left out when others were judged."""
    first = next(iter(results.values()))
    judged = {k: r for k, r in results.items() if not (r.valid == UNKNOWN and (r.details or {}).get(INAPPLICABLE))}
    if not judged:
        return first
    results = judged
    values = list(results.values())
    summary = _merge_dicts([r.summary for r in values])
    bad = [k for k, r in results.items() if r.valid is False]
    summary["keys"] = len(results)
    summary["invalid_keys"] = len(bad)
    details = _merge_dicts([r.details for r in values], cap=True)
    details["invalid_keys"] = bad[:MAX_KEYS_LISTED]
    details["per_key"] = {k: {"valid": r.valid, **{n: v for n, v in r.summary.items() if _scalar(v)}}
                          for k, r in list(results.items())[:MAX_KEYS_LISTED]}
    errors = list(dict.fromkeys(f"{k}: {r.error}" for k, r in results.items() if r.error))
    return CheckResult(name=first.name, valid=merge_valid([r.valid for r in values]), summary=summary,
                       details=details, error="; ".join(errors)[:500] or None)


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, (bool, int, float, str))


def _merge_dicts(dicts: list[dict], cap: bool = False) -> dict:
    out: dict = {}
    for name in dict.fromkeys(n for d in dicts for n in d):
        out[name] = _merge_values(name, [d.get(name) for d in dicts if name in d], cap)
    return out


def _merge_values(name: str, vals: list[Any], cap: bool) -> Any:
    """Counts add, `max_*` take the largest, [lo, hi] spans widen, listings join; a None
    (unknown, such as lost updates without a final read) makes the whole unknown."""
    if any(v is None for v in vals):
        return None
    if all(isinstance(v, bool) for v in vals):
        return all(vals)
    if all(isinstance(v, (int, float)) for v in vals):
        return max(vals) if name.startswith("max_") else sum(vals)
    if all(isinstance(v, dict) for v in vals):
        return _merge_dicts(vals, cap)
    if all(isinstance(v, list) for v in vals):
        if all(len(v) == 2 and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v) for v in vals) \
                and name not in UNCAPPED:
            return [min(v[0] for v in vals), max(v[1] for v in vals)]  # a span, such as past_lease_s
        joined = [x for v in vals for x in v]
        return joined if not cap or name in UNCAPPED else joined[:MAX_LISTED]
    return vals[0]
