"""Checks shared by the commands: numbers that must be finite, paths that must be writable.

Each runs before anything starts, so a long campaign never fails at its end on a value
that was wrong from the beginning.
"""

from __future__ import annotations

import math

import click

from harness.errors import BadArgument


class Seconds(click.ParamType):
    """A finite number within [lo, hi] (click's FloatRange lets NaN through)."""

    name = "seconds"

    def __init__(self, lo: float = 0.0, hi: float = 86_400.0, *, open_lo: bool = False):
        self.lo, self.hi, self.open_lo = lo, hi, open_lo

    def convert(self, value, param, ctx):
        try:
            v = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not math.isfinite(v) or v > self.hi or v < self.lo or (self.open_lo and v == self.lo):
            low = f"above {self.lo:g}" if self.open_lo else f"at least {self.lo:g}"
            self.fail(f"{value!r} must be a finite number {low} and at most {self.hi:g}", param, ctx)
        return v


def check_writable_dir(path: str, flag: str) -> None:
    """A directory runs can be written into (made if missing), or one sentence why not.

    Checked before anything starts, by really creating what is missing and a file in it,
    then removing exactly what the check made: a long run must not fail at its end."""
    import tempfile
    from pathlib import Path

    p = Path(path)
    if p.exists() and not p.is_dir():
        raise BadArgument(f"{flag} {path} is a file, not a directory; give a directory (it is created if missing)")
    made = [q for q in (p, *p.parents) if not q.exists()]
    try:
        p.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=p):
            pass
    except OSError as e:
        raise BadArgument(f"{flag} {path} cannot be written ({e.strerror}); give a directory you can write to") from None
    finally:
        for q in made:
            try:
                q.rmdir()
            except OSError:
                pass


def check_writable_file(path: str, flag: str) -> None:
    """A file that can be (over)written in an existing directory, or one sentence why not."""
    from pathlib import Path

    p = Path(path)
    if p.is_dir():
        raise BadArgument(f"{flag} {path} is a directory; give a file name, such as {p / 'results.xml'}")
    if not p.parent.is_dir():
        raise BadArgument(f"{flag} {path}: the directory {p.parent} does not exist; create it or give another path")
    existed = p.exists()
    try:
        with open(p, "a"):
            pass
    except OSError as e:
        raise BadArgument(f"{flag} {path} cannot be written ({e.strerror}); give a path you can write to") from None
    if not existed:
        p.unlink()


