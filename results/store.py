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
    root = Path(store)
    d = stamped_dir(root / name)
    (d / "nodes").mkdir()
    link_latest(root, d)
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
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str))
    os.replace(tmp, path)


def read_results(run_dir: str | os.PathLike) -> dict:
    return json.loads((Path(run_dir) / "results.json").read_text())
