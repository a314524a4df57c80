"""expectations.toml: what verdict each matrix cell should show, validated eagerly.

Tables are [default], [backend] and [backend.nemesis] (a composed nemesis is "a+b"); in
each, `expect`, `nofence` or `fenced` name a verdict: safe, unsafe, either or unsupported
(what each means is in judge.py), and `unexplained`, `stuck`, `starved` cap a count each run
of the cell may show (LIMITS). A lookup falls back from [backend.nemesis] to [backend]
to [default], and a cell nothing names is expected "either". An unknown backend, nemesis,
key or verdict is refused with its file and line.

Instead of one verdict, a [backend] or [backend.nemesis] table may state a reproduce rate:
`min_invalid_rate` and/or `max_invalid_rate` (0..1; absent: 0 and 1), the share of the
cell's runs (one per seed) that may be invalid. A fault that exposes a flaw in 1 run of 3
is then judged on that share, not on whether the nightly's seeds happened to hit it.
Inside a table `nofence`/`fenced` win over a rate, and a rate wins over `expect`; so
`fenced = "safe"` beside a rate keeps the fenced cell judged run by run.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from harness.core.errors import BadArgument

VERDICTS = ("safe", "unsafe", "either", "unsupported")
# Counts a run of a cell may not exceed, whatever its verdict (each a whole number; absent: no limit).
LIMITS = {"unexplained": "UNEXPLAINED violations (harness/checker/causes.py)",
          "stuck": "stuck findings (a free lock nobody could get: harness/checker/liveness.py)",
          "starved": "starved waiters (harness/checker/liveness.py)",
          "handover_stalls": "stalled handovers (a lock released while others asked, not granted in time: "
                             "harness/checker/liveness.py)",
          "timeouts": "acquires that did not honour their timeout (harness/checker/timeouts.py)"}
FENCING_KEYS = {True: "fenced", False: "nofence"}
RATES = ("min_invalid_rate", "max_invalid_rate")


@dataclass(frozen=True, slots=True, kw_only=True)
class Rate:
    """The share of a cell's runs that may be invalid: min <= invalid runs / runs <= max."""

    min: float = 0.0
    max: float = 1.0

    def __str__(self) -> str:
        return f"invalid {self.min:g}-{self.max:g}"


def _line_of(text: str, table: tuple[str, ...], key: str | None = None) -> int | None:
    """1-based line of `key` inside [table] (or of the [table] header), for error messages."""
    current: tuple[str, ...] = ()
    for i, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if m := re.fullmatch(r"\[([^\[\]]+)\]", line):
            current = tuple(part.strip().strip("\"'") for part in m.group(1).split("."))
            if key is None and current[:len(table)] == table:  # [a.b] also defines [a]
                return i
        elif key is not None and current == table and re.match(rf"[\"']?{re.escape(key)}[\"']?\s*=", line):
            return i
        elif table and current == table[:-1] and re.match(  # a dotted key: [redis] then pause.fenced = ...
                rf"[\"']?{re.escape(table[-1])}[\"']?\s*\.\s*{re.escape(key or '')}", line):
            return i
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class Expectations:
    """expectations.toml, validated. Lookup falls back from [backend.nemesis] to [backend]
    to [default]; inside a table, `nofence`/`fenced` win over `expect`."""

    path: str | None = None
    tables: dict = field(default_factory=dict)

    @classmethod
    def load(cls, path: str | os.PathLike | None) -> "Expectations":
        if path is None:
            return cls()
        from harness.core.pathcheck import read_text

        p = Path(path)
        text = read_text(p, flag="--expectations", hint="pass an existing --expectations PATH",
                         what="an expectations file")
        try:
            doc = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise BadArgument(f"{p} is not valid TOML ({e}); fix that line") from None
        from harness.core import plugins

        backends, nemeses = set(plugins.backend_names()), set(plugins.nemesis_names())

        def where(table: tuple[str, ...], key: str | None = None) -> str:
            line = _line_of(text, table, key)
            name = " ".join(filter(None, ["[" + ".".join(table) + "]" if table else "", key or ""]))
            return f"{p}:{line} {name}" if line else f"{p} {name}"

        def check_values(table: tuple[str, ...], t: dict, subtables_ok: bool) -> None:
            for k, v in t.items():
                if isinstance(v, dict):
                    if not subtables_ok:
                        raise BadArgument(f"{where(table + (k,))}: tables nest only as [backend.nemesis]; remove this level")
                    unknown = [n for n in k.split("+") if n not in nemeses]
                    if unknown:
                        raise BadArgument(f"{where(table + (k,))}: unknown nemesis {unknown[0]!r}; choose one of: {', '.join(sorted(nemeses))}")
                    check_values(table + (k,), v, False)
                elif k in LIMITS:
                    if not (isinstance(v, int) and not isinstance(v, bool) and v >= 0):
                        raise BadArgument(f"{where(table, k)}: {k} is how many {LIMITS[k]} a run may "
                                          f"have, a whole number such as 0, not {v!r}")
                elif k in RATES:
                    if not (isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1):
                        raise BadArgument(f"{where(table, k)}: {k} is a share of the cell's runs, a number "
                                          f"from 0 to 1 such as 0.3, not {v!r}")
                    if table == ("default",):
                        raise BadArgument(f"{where(table, k)}: a reproduce rate is stated for one design, in a "
                                          f"[backend] or [backend.nemesis] table, not in [default]")
                elif k not in ("expect", "nofence", "fenced"):
                    raise BadArgument(f"{where(table, k)}: unknown key {k!r}; use expect, nofence, fenced, "
                                      f"{', '.join(LIMITS)}, {', '.join(RATES)}")
                elif v not in VERDICTS:
                    raise BadArgument(f"{where(table, k)}: {v!r} is not a verdict; use one of: {', '.join(VERDICTS)}")
            if t.get(RATES[0], 0) > t.get(RATES[1], 1):
                raise BadArgument(f"{where(table, RATES[0])}: {RATES[0]} {t[RATES[0]]!r} is above "
                                  f"{RATES[1]} {t.get(RATES[1], 1)!r}; no share of runs can meet both")
            if any(k in t for k in RATES) and all(k in t for k in FENCING_KEYS.values()):
                raise BadArgument(f"{where(table, next(k for k in RATES if k in t))}: this table names both "
                                  f"nofence and fenced verdicts, which win over a rate, so the rate judges no "
                                  f"cell; remove one of them or the rate")

        for name, t in doc.items():
            if not isinstance(t, dict):
                raise BadArgument(f"{where((), name)}: top-level keys must be tables like [default] or [redlock.clock-skew]")
            if name != "default" and name not in backends:
                raise BadArgument(f"{where((name,))}: unknown backend {name!r}; choose one of: {', '.join(sorted(backends))}")
            check_values((name,), t, name != "default")
        return cls(path=str(p), tables=doc)

    def expect(self, backend: str, nemesis: str, fencing: bool) -> str:
        """The cell's expected verdict, or its Rate as words ("invalid 0.3-1") when a rate judges it."""
        return str(self._lookup(backend, nemesis, fencing))

    def rate(self, backend: str, nemesis: str, fencing: bool) -> Rate | None:
        """The cell's reproduce rate, or None when it is judged run by run on a verdict."""
        found = self._lookup(backend, nemesis, fencing)
        return found if isinstance(found, Rate) else None

    def _lookup(self, backend: str, nemesis: str, fencing: bool) -> str | Rate:
        fk = FENCING_KEYS[fencing]
        b = self.tables.get(backend, {})
        for t in (b.get(nemesis, {}), b, self.tables.get("default", {})):
            if isinstance(t.get(fk), str):
                return t[fk]
            if any(k in t for k in RATES):
                return Rate(min=t.get(RATES[0], 0.0), max=t.get(RATES[1], 1.0))
            if isinstance(t.get("expect"), str):
                return t["expect"]
        return "either"

    def unexplained(self, backend: str, nemesis: str) -> int | None:
        """How many UNEXPLAINED violations (harness/checker/causes.py) a run of the cell may
        have, or None for no limit: even an unsafe cell must not break in a way its design
        does not account for (a regression in a lock client already known to be unsafe)."""
        return self.limit(backend, nemesis, "unexplained")

    def limit(self, backend: str, nemesis: str, key: str) -> int | None:
        """How many of `key` (LIMITS: unexplained, stuck, starved) a run of the cell may have,
        or None for no limit; looked up like `expect`."""
        b = self.tables.get(backend, {})
        for t in (b.get(nemesis, {}), b, self.tables.get("default", {})):
            if isinstance(t.get(key), int) and not isinstance(t.get(key), bool):
                return t[key]
        return None


def default_expectations() -> Path | None:
    for cand in (Path.cwd() / "expectations.toml", Path(__file__).resolve().parents[2] / "expectations.toml"):
        if cand.is_file():
            return cand
    return None
