"""What `chaos matrix` prints (a table, or one JSON object) and its JUnit file, from judged cells."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from results.junit import write_junit

OVER = ("unexplained_over", "stuck_over", "starved_over")  # a count past its expectations.toml limit


def observed(c: dict) -> str:
    """A cell's observed verdict, with its share of invalid runs when a rate judges it."""
    return c["observed"] + (f", invalid in {c['invalid_rate']}" if c.get("invalid_rate") else "")


def table(cells: list[dict], skipped: list[dict]) -> str:
    ew = max([9] + [len(c["expected"]) + 1 for c in cells])
    lines = [f"{'backend':<22}{'fencing':<8}{'nemesis':<18}{'expected':<{ew}}{'observed':<9}{'':<9}per seed (violations)"]
    for c in cells:
        seeds = " ".join(f"s{r['seed']}:{r.get('violations') if r['valid'] in ('true', 'false') else r['valid']}" for r in c["runs"])
        lines.append(f"{c['backend']:<22}{'on' if c['fencing'] else 'off':<8}{c['nemesis']:<18}{c['expected']:<{ew}}"
                     f"{c['observed']:<9}{'ok' if c['matched'] else 'MISMATCH':<9}{seeds}"
                     + (f"  (invalid in {c['invalid_rate']})" if c.get("invalid_rate") else "")
                     + "".join(f"  ({c[k]})" for k in OVER if c.get(k)))
    for s in skipped:
        lines.append(f"{s['backend']:<22}{'on':<8}{s['nemesis']:<18}{'-':<{ew}}{'skipped':<9}{'':<9}{s['reason']}")
    return "\n".join(lines)


def junit_cases(cells: list[dict]) -> list[dict]:
    """One testcase per cell: passed when it matched; failure for a definite wrong verdict, error otherwise."""
    return [{"name": f"{c['nemesis']} {'fenced' if c['fencing'] else 'nofence'}", "classname": f"chaoslock.matrix.{c['backend']}",
            "valid": True if c["matched"] else (False if c["observed"] in ("safe", "unsafe") else "unknown"),
            "message": f"expected {c['expected']}, observed {observed(c)}"
                       + "".join(f"; {c[k]}" for k in OVER if c.get(k)) + "\n" + "\n".join(
                f"seed {r['seed']}: valid={r['valid']} violations={r.get('violations', '')} causes={r.get('causes', '')} "
                f"stuck={r.get('stuck', '')} starved={r.get('starved', '')} availability={r.get('availability', '')} "
                f"run_dir={r.get('run_dir', '')}"
                + (f" error={r['error']}" if r.get("error") else "") for r in c["runs"]),
            "time_s": sum(float(r.get("wall_s") or 0) for r in c["runs"])} for c in cells]


def report(cells: list[dict], skipped: list[dict], *, as_json: bool, junit: str | None, matrix_dir: Path | None,
           wall_s: float | None) -> int:
    """Print the table (or JSON), the mismatches, write JUnit; return the exit code."""
    human = sys.stderr if as_json else sys.stdout
    print(table(cells, skipped), file=human)
    bad = [c for c in cells if not c["matched"]]
    if skipped:
        names = ", ".join(dict.fromkeys(s["backend"] for s in skipped))
        print(f"note: {len(skipped)} fenced cells skipped: {names} hand out no fencing tokens (has_fencing is False)", file=human)
    for c in bad:
        print(f"MISMATCH {c['backend']} {c['nemesis']} fencing {'on' if c['fencing'] else 'off'}: expected "
              f"{c['expected']}, observed {observed(c)}"
              + "".join(f"; seed {r['seed']} {r['error']}" for r in c["runs"] if r.get("error")), file=human)
    print(f"{len(cells) - len(bad)}/{len(cells)} cells match their expectations"
          + (f"; matrix in {matrix_dir}" if matrix_dir else "") + (f"; {wall_s:.0f} s" if wall_s else ""), file=human)
    if junit:
        write_junit(junit, junit_cases(cells), suite="chaoslock-matrix")
    if as_json:
        print(json.dumps({"ok": not bad, "matrix_dir": str(matrix_dir) if matrix_dir else None, "wall_s": wall_s,
                          "cells": [{k: v for k, v in c.items() if k != "runs"} | {"runs": c["runs"]} for c in cells],
                          "mismatches": [f"{c['backend']}/{c['nemesis']}/{'fenced' if c['fencing'] else 'nofence'}" for c in bad],
                          "skipped": skipped}, default=str))
    return 1 if bad else 0
