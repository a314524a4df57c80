"""matrix.csv: one row per run, written after every run (atomically) and read by --recheck.

A row's `valid` is one of the words the matrix writes (true, false, unknown, crash,
unsupported); judge.py reads it through parse_verdict, so any other word counts as unknown,
and `unrecognised` names such rows for the recheck to say.
"""

from __future__ import annotations

import csv
from pathlib import Path

from harness.core.contracts.checker import recognised
from harness.core.errors import BadArgument

CSV_FIELDS = ("backend", "nemesis", "fencing", "seed", "valid", "violations", "stale_writes_accepted",
              "stale_writes_rejected", "lost_updates", "acquires_ok", "p50_acquire_ms", "p99_acquire_ms", "run_dir",
              "expected", "matched", "cell_observed", "cell_matched", "wall_s", "error", "unexplained", "causes",
              "stuck", "starved", "availability", "cell_invalid_rate", "handover_stalls", "timeouts")


def write_csv(path: Path, rows: list[dict]) -> None:
    """Replace `path` with the rows, never writing through a link (harness/core/safefile.py)."""
    from harness.core.safefile import atomic_open

    with atomic_open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: ("true" if v is True else "false" if v is False else v) for k, v in r.items()})


def read_csv(path: Path) -> list[dict]:
    import io

    from harness.core.safefile import read_inside

    try:  # the matrix dir's own file: a link out of it, or a FIFO, is refused (harness/core/safefile.py)
        text = read_inside(path.parent, path).decode("utf-8")
        rows = list(csv.DictReader(io.StringIO(text, newline="")))
    except OSError as e:
        raise BadArgument(f"cannot read {path}: {e.strerror}; pass a matrix dir written by `chaos matrix`") from None
    except UnicodeDecodeError as e:
        raise BadArgument(f"{path} is not UTF-8 (byte {e.start + 1}); pass a matrix dir written by `chaos matrix`") from None
    except csv.Error as e:
        raise BadArgument(f"{path} is not a CSV file ({e}); pass a matrix dir written by `chaos matrix`") from None
    missing = {"backend", "nemesis", "fencing", "seed", "valid"} - set(rows[0] if rows else CSV_FIELDS)
    if missing:
        raise BadArgument(f"{path} lacks column(s) {', '.join(sorted(missing))}; it was not written by `chaos matrix`")
    return rows


def unrecognised(rows: list[dict]) -> str | None:
    """One line naming the rows whose `valid` is not a word the matrix writes (judged unknown),
    or None when every row's is."""
    odd = [r for r in rows if not recognised(r.get("valid"))]
    if not odd:
        return None
    named = "; ".join(f"{r.get('backend')} {r.get('nemesis')} fencing {r.get('fencing')} seed {r.get('seed')}: "
                      f"{r.get('valid')!r}" for r in odd[:10]) + (f"; and {len(odd) - 10} more" if len(odd) > 10 else "")
    return (f"note: {len(odd)} row(s) of matrix.csv have a valid the matrix never writes (it writes true, false, "
            f"unknown, crash, unsupported), judged unrecognised and so unknown: {named}")
