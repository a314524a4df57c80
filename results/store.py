"""The run store: store/<test name>/<timestamp>/ per run, and store/latest -> the newest.

A run dir holds spec.json, history.jsonl, results.json, ops.csv, report.html and nodes/
(the servers' logs). Writers here only read CheckResults; they never judge.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from pathlib import Path
from typing import Any


def new_run_id() -> str:
    return secrets.token_hex(3)


def stamped_dir(parent: str | os.PathLike) -> Path:
    """Create and return parent/<timestamp>, or <timestamp>-2, -3... if that exists."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    d, n = Path(parent) / stamp, 1
    while d.exists():
        n += 1
        d = Path(parent) / f"{stamp}-{n}"
    d.mkdir(parents=True)
    return d


def new_run_dir(store: str | os.PathLike, name: str) -> Path:
    """A fresh run dir with its nodes/ subdir. `latest` is not moved here: the runner links
    it once the run has really started (a run that failed to start must not become latest).
    store/<name> must resolve inside the store: a link out of it is a BadArgument."""
    from harness.core.safefile import inside

    inside(store, Path(store) / name)
    d = stamped_dir(Path(store) / name)
    (d / "nodes").mkdir()
    return d


def link_latest(root: Path, run_dir: Path) -> None:
    latest = root / "latest"
    tmp = root / f".latest-{os.getpid()}"
    try:
        if tmp.is_symlink():
            tmp.unlink()
        tmp.symlink_to(run_dir.relative_to(root))
        os.replace(tmp, latest)
    except OSError:
        pass  # a store on a filesystem without symlinks still works, just without `latest`


def write_json(path: Path, data: Any) -> None:
    """Replace `path` with `data` as JSON, never writing through a link (harness/core/safefile.py)."""
    from harness.core.safefile import write_atomic

    write_atomic(path, json.dumps(data, indent=2, default=str))


def write_spec(run_dir: Path, spec: Any) -> None:
    """Write the run's TestSpec as run_dir/spec.json (read back by read_spec), never through a link."""
    from harness.core.safefile import write_atomic

    write_atomic(Path(run_dir) / "spec.json", spec.to_json())


def read_results(run_dir: str | os.PathLike) -> dict:
    """The results.json of a run dir, or one sentence (BadArgument) on why it cannot be read
    (a results.json that resolves outside the run dir is never read)."""
    from harness.core.errors import BadArgument
    from harness.core.safefile import read_inside

    f = Path(run_dir) / "results.json"
    try:
        doc = json.loads(read_inside(run_dir, f).decode("utf-8"))
    except OSError as e:
        raise BadArgument(f"cannot read {f} ({e.strerror}); `chaos report {run_dir}` rebuilds it") from None
    except (ValueError, RecursionError):  # not UTF-8, not JSON
        raise BadArgument(f"{f} is not valid JSON; `chaos report {run_dir}` rebuilds it") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("summary"), dict):
        raise BadArgument(f"{f} holds no summary object; `chaos report {run_dir}` rebuilds it")
    return doc


# ---------------------------------------------------------------- reading a stored run

_SPEC_FIX = "restore it, or delete it to check the history on what it says alone"


def load_run(path: str | os.PathLike, *, need_dir: bool = False) -> tuple[Any, list]:
    """(TestSpec, history) of a stored run, for `chaos check` and `chaos report`.

    `path` is a run dir or a history.jsonl (whose spec.json, if any, sits beside it);
    `need_dir` refuses a file, for commands that write into the run dir (that it can be
    written is theirs to check). Whatever is wrong with the path (harness/core/pathcheck.py),
    the spec or the history is a BadArgument (BadHistory) of one sentence naming the file
    and what to do; a missing spec.json means TestSpec.bare() (nothing assumed). A
    history.jsonl or spec.json that resolves outside its directory is refused, not read; a
    history file named directly is the user's choice, but not the spec.json beside it."""
    from harness.core.history import read_history
    from harness.core.pathcheck import DIR, EITHER, check_path

    hint = ("give a run directory, the one that holds its history.jsonl and spec.json (such as store/latest)"
            if need_dir else "give a run directory such as store/latest or a history.jsonl")
    p = check_path(path, want=DIR if need_dir else EITHER, hint=hint)  # too long, a FIFO, unreadable: one sentence
    d = p if p.is_dir() else p.parent
    spec = read_spec(d / "spec.json", root=d)
    return spec, read_history(p)


def read_spec(f: Path, *, root: str | os.PathLike | None = None) -> Any:
    """The TestSpec stored in spec.json `f`, the default one if there is none, or one
    sentence (BadArgument) naming the file and what is wrong with it; with `root`, also
    when `f` resolves outside that directory."""
    from harness.core.errors import BadArgument
    from harness.core.safefile import inside, read_inside
    from harness.core.spec import TestSpec

    if not f.exists() and not f.is_symlink():
        return TestSpec.bare()  # no default backend, TTL or key count: judged on what the history says
    if root is not None:
        inside(root, f)
    if f.is_dir():
        raise BadArgument(f"{f} is a directory, not a spec file; remove it to check the history on what it says alone")
    if not f.is_file():  # a FIFO would block the read
        raise BadArgument(f"{f} is not a regular file; {_SPEC_FIX}")
    try:
        text = read_inside(root, f).decode("utf-8")
    except OSError as e:
        raise BadArgument(f"cannot read {f} ({e.strerror}); check its permissions or delete it to check "
                          f"with default settings") from None
    except UnicodeDecodeError as e:
        raise BadArgument(f"{f} is not UTF-8 (byte {e.start + 1}); {_SPEC_FIX}") from None
    try:
        d = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as e:
        raise BadArgument(f"{f} is not valid JSON (line {e.lineno}); {_SPEC_FIX}") from None
    except (ValueError, RecursionError):  # NaN, Infinity, a 5000-digit number, [[[[...]]]]
        raise BadArgument(f"{f} is not valid JSON (NaN, Infinity, a huge number or deep nesting); {_SPEC_FIX}") from None
    if not isinstance(d, dict):
        raise BadArgument(f"{f} holds a JSON {type(d).__name__}, not an object of spec fields; {_SPEC_FIX}")
    fields = _spec_types()
    unknown = sorted(set(d) - set(fields))
    if unknown:
        raise BadArgument(f"{f} has unknown field(s) {', '.join(unknown)[:120]}; remove them, or {_SPEC_FIX}")
    for name, value in d.items():
        want = _type_error(value, fields[name])
        if want:
            shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
            raise BadArgument(f"{f}: {name} must be {want}, not {shown}; correct it, or delete the file to check "
                              f"with default settings")
    try:
        return TestSpec.from_dict(d)
    except (BadArgument, TypeError, ValueError) as e:
        raise BadArgument(f"{f} is not a spec ({str(e)[:120]}); {_SPEC_FIX}") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _spec_types() -> dict[str, Any]:
    import typing

    from harness.core.spec import TestSpec

    return typing.get_type_hints(TestSpec)


def _type_error(value: Any, hint: Any) -> str | None:
    """What `value` should be to fit the annotation `hint`, or None if it fits. Only the
    shapes TestSpec uses are known; any other annotation accepts every value."""
    import math
    import types
    import typing
    from collections.abc import Mapping

    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        errs = [_type_error(value, a) for a in inner]
        return None if any(e is None for e in errs) else " or ".join(e for e in errs if e) + \
            (" or null" if type(None) in args else "")
    if hint is bool:
        return None if isinstance(value, bool) else "true or false"
    if hint is int:
        return None if isinstance(value, int) and not isinstance(value, bool) else "an integer"
    if hint is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        return None if ok else "a finite number"
    if hint is str:
        return None if isinstance(value, str) else "a string"
    if origin is tuple:
        ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
        return None if ok else "a list of strings"
    if origin is Mapping or hint is Mapping or origin is dict:
        return None if isinstance(value, dict) else "an object"
    return None
