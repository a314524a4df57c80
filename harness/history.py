"""The history: an append-only list of operations, streamed to history.jsonl as they happen.

An operation is recorded twice: once when it is invoked and once when it completes, with
type `ok` (it happened), `fail` (it certainly did not happen) or `info` (it may have
happened, at any time after its invocation). Nemesis operations use process "nemesis".

Timestamps come from the host's CLOCK_MONOTONIC, which is system wide and never faked by a
nemesis, so the real-time order of the history is true even while clocks are skewed.
Each line is flushed as written, so a run that crashes leaves a checkable prefix.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Iterable, Iterator

from harness.errors import BadHistory

TYPES = ("invoke", "ok", "fail", "info")
NEMESIS = "nemesis"


def now_ns() -> int:
    """The one clock the history uses (CLOCK_MONOTONIC, shared by all processes)."""
    return time.monotonic_ns()


@dataclass(frozen=True, slots=True, kw_only=True)
class Op:
    index: int = -1
    time_ns: int
    process: int | str
    type: str
    f: str
    key: str | None = None
    value: Any = None
    token: int | None = None
    node: str | None = None
    error: str | None = None

    def to_dict(self) -> dict:
        d = asdict(self)
        return {k: v for k, v in d.items() if v is not None or k in ("value",)}

    def with_index(self, index: int) -> "Op":
        return replace(self, index=index)

    @property
    def is_invoke(self) -> bool:
        return self.type == "invoke"


def op_from_dict(d: dict, where: str = "") -> Op:
    """Build an Op from one decoded line; raise BadHistory naming what is wrong."""
    if not isinstance(d, dict):
        raise BadHistory(f"{where}: expected a JSON object, got {type(d).__name__}")
    missing = [k for k in ("time_ns", "process", "type", "f") if k not in d]
    if missing:
        raise BadHistory(f"{where}: missing field(s) {', '.join(missing)}; every op needs time_ns, process, type and f")
    if d["type"] not in TYPES:
        raise BadHistory(f"{where}: type {d['type']!r} is not one of {', '.join(TYPES)}")
    if not isinstance(d["time_ns"], int):
        raise BadHistory(f"{where}: time_ns must be an integer of nanoseconds, got {d['time_ns']!r}")
    known = {k: d.get(k) for k in ("index", "key", "value", "token", "node", "error")}
    return Op(
        index=int(known["index"]) if known["index"] is not None else -1,
        time_ns=d["time_ns"],
        process=d["process"],
        type=d["type"],
        f=str(d["f"]),
        key=known["key"],
        value=known["value"],
        token=known["token"],
        node=known["node"],
        error=known["error"],
    )


def read_history(path: str | os.PathLike) -> list[Op]:
    """Read a history.jsonl (or a run dir holding one). A torn last line is ignored."""
    p = Path(path)
    if p.is_dir():
        p = p / "history.jsonl"
    if not p.exists():
        raise BadHistory(f"{p}: no such history file; give a run directory or a history.jsonl")
    ops: list[Op] = []
    lines = p.read_text(encoding="utf-8", errors="replace").splitlines()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except json.JSONDecodeError as e:
            if n == len(lines):  # a crash can tear the last line; the prefix is still good
                break
            raise BadHistory(f"{p} line {n}: not JSON ({e.msg}); a history has one JSON op per line") from None
        op = op_from_dict(d, f"{p} line {n}")
        ops.append(op if op.index >= 0 else op.with_index(len(ops)))
    return ops


class HistoryWriter:
    """Appends ops to history.jsonl, assigning indices, one flushed line per op."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._f = open(self.path, "a", encoding="utf-8", buffering=1)
        self._next = 0
        self.ops: list[Op] = []

    def append(self, op: Op) -> Op:
        op = op.with_index(self._next)
        self._next += 1
        self._f.write(json.dumps(op.to_dict(), separators=(",", ":"), default=str) + "\n")
        self._f.flush()
        self.ops.append(op)
        return op

    def close(self) -> None:
        if not self._f.closed:
            self._f.flush()
            os.fsync(self._f.fileno())
            self._f.close()


def pair_ops(ops: Iterable[Op]) -> Iterator[tuple[Op, Op | None]]:
    """Yield (invoke, completion) pairs per process; completion is None if it never came.

    A process has at most one operation in flight, as in Jepsen; nemesis ops pair the same way.
    """
    pending: dict[Any, Op] = {}
    order: list[Op] = []
    done: dict[int, Op] = {}
    for op in ops:
        if op.type == "invoke":
            if op.process in pending:  # a second invoke without completion: the first never finished
                pass
            pending[op.process] = op
            order.append(op)
        else:
            inv = pending.pop(op.process, None)
            if inv is not None:
                done[inv.index] = op
    for inv in order:
        yield inv, done.get(inv.index)
