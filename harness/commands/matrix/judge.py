"""Judging matrix cells: the runs of one (backend, nemesis, fencing) against its expectation.

A cell's observed verdict is, first match wins:
  crash        a run crashed, hung or was interrupted (exit 255/130/143, a timeout, no summary)
  unsupported  a run was refused as asked (exit 254: a nemesis this backend's servers
               cannot take here, a missing server binary); the reason is kept
  unsafe       a run was invalid (a violation was proven)
  unknown      a run could not be decided
  safe         every run was valid
A cell matches its expectation when:
  safe         observed safe (every run valid)
  unsafe       observed unsafe and no run unknown (a fault that exposes a flaw need not do
               so in every seed; one proven violation is enough)
  either       observed safe, unsafe or unknown (not a crash, not a refusal)
  unsupported  observed unsupported in every run (the harness refuses this cell on purpose
               here; if it starts running, the cell is flagged so its verdict gets looked at)
A cell with a reproduce rate (expectations.py: min_invalid_rate, max_invalid_rate) is judged
on the share of its runs that were invalid, not run by run: it matches when that share is
within the rate whichever way its unknown runs went (k invalid and u unknown of n: both k/n
and (k+u)/n within), and no run crashed, was refused or is unreadable. Its
`invalid_rate` says "k of n"; every run's `matched` is the cell's.
A row's `valid` is read by harness/core/contracts/checker.py parse_verdict: a word the matrix never
writes ("False", "maybe", "") is "unknown", so it never makes a cell safe, and a cell with
such a row matches no expectation, not even "either" (a row nobody can read proves nothing).
rejudge stores the word read in `valid` and what was there in `stored_valid`.
Pure: rows in (one per run, with its `valid` string), judged cells out; rendering reads them.
"""

from __future__ import annotations

from harness.core.contracts.checker import recognised, verdict_csv
from harness.commands.matrix.expectations import Expectations, Rate


def run_matches(valid: str, expected: str) -> bool:
    """Whether one run by itself shows the expected verdict."""
    if not recognised(valid):
        return False
    valid = verdict_csv(valid)
    if valid in ("crash", "unsupported"):
        return valid == expected
    return {"safe": valid == "true", "unsafe": valid == "false", "either": True}.get(expected, False)


def judge_cell(valids: list, expected: str) -> tuple[str, bool]:
    """(observed verdict, matched) of a cell from its runs' `valid` words (module docstring)."""
    vs = [verdict_csv(v) for v in valids]
    if not vs or "crash" in vs:
        return "crash", False
    observed = ("unsupported" if "unsupported" in vs else "unsafe" if "false" in vs
                else "safe" if all(v == "true" for v in vs) else "unknown")
    if not all(recognised(v) for v in valids):
        return observed, False
    if expected == "unsupported" or observed == "unsupported":
        return observed, expected == observed and set(vs) == {"unsupported"}
    if expected == "either":
        return observed, True
    return observed, observed == expected and "unknown" not in vs


def judge_rate(valids: list, rate: Rate) -> tuple[str, bool, str]:
    """(observed verdict, matched, "k of n" invalid) of a cell judged on its reproduce rate."""
    vs = [verdict_csv(v) for v in valids]
    observed, _ = judge_cell(valids, "either")
    k, u, n = vs.count("false"), vs.count("unknown"), len(vs)
    share = f"{k} of {n}" + (f" (+{u} unknown)" if u else "")
    if observed in ("crash", "unsupported") or not all(recognised(v) for v in valids):
        return observed, False, share
    return observed, rate.min <= k / n and (k + u) / n <= rate.max, share


def rejudge(rows: list[dict], exp: Expectations) -> list[dict]:
    """Fill expected/matched/cell_* of every row from `exp`; return the cells, in row order."""
    cells: dict[tuple, dict] = {}
    for r in rows:
        read = verdict_csv(r.get("valid"))
        if read != r.get("valid"):
            r.setdefault("stored_valid", r.get("valid"))
            r["valid"] = read
        fenced = r["fencing"] == "on"
        key = (r["backend"], r["nemesis"], fenced)
        c = cells.setdefault(key, {"backend": key[0], "nemesis": key[1], "fencing": fenced,
                                   "expected": exp.expect(key[0], key[1], fenced), "runs": []})
        c["runs"].append(r)
    for c in cells.values():
        stored = [r.get("stored_valid", r["valid"]) for r in c["runs"]]
        rate = exp.rate(c["backend"], c["nemesis"], c["fencing"])
        if rate is None:
            c["observed"], c["matched"] = judge_cell(stored, c["expected"])
        else:
            c["observed"], c["matched"], c["invalid_rate"] = judge_rate(stored, rate)
        over: list[dict] = []
        for key, words in (("unexplained", "UNEXPLAINED violation(s)"), ("stuck", "stuck finding(s)"),
                           ("starved", "starved waiter(s)"), ("handover_stalls", "stalled handover(s)"),
                           ("timeouts", "acquire(s) that did not honour their timeout")):
            limit = exp.limit(c["backend"], c["nemesis"], key)
            past = [r for r in c["runs"] if limit is not None and _count(r.get(key)) > limit]
            if past:  # broken in a way the design does not account for: fails even an "unsafe" cell
                c["matched"] = False
                c[f"{key}_over"] = f"{len(past)} run(s) with more than {limit} {words}"
                over += [r for r in past if r not in over]
        for r in c["runs"]:
            alone = run_matches(r.get("stored_valid", r["valid"]), c["expected"]) if rate is None else c["matched"]
            r.update(expected=c["expected"], matched=alone and r not in over, cell_observed=c["observed"],
                     cell_matched=c["matched"], cell_invalid_rate=c.get("invalid_rate", ""))
    return list(cells.values())


def _count(v) -> int:
    """A count from a row (an int, or a CSV string; blank: none)."""
    try:
        return int(v)
    except (TypeError, ValueError):
        return 0
