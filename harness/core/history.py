"""The history: an append-only list of operations, streamed to history.jsonl as they happen.

An operation is recorded twice: once when it is invoked and once when it completes, with
type `ok` (it happened), `fail` (it certainly did not happen) or `info` (it may have
happened, at any time after its invocation). Nemesis operations use process "nemesis".

Timestamps come from the host's CLOCK_MONOTONIC, which is system wide and never faked by a
nemesis, so the real-time order of the history is true even while clocks are skewed.
Each line is flushed as written, so a run that crashes leaves a checkable prefix.

read_history refuses, naming the line, a history that is typed wrongly or cannot have
happened (a completion without its invoke, two ops in flight for one process, one process
going back in time), so a malformed file never reaches a checker and flips its verdict.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass, fields, replace
from operator import attrgetter
from pathlib import Path
from typing import Any, Iterable, Iterator

from harness.core.errors import BadHistory

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
    valid_until_ns: int | None = None  # acquire/renew ok: until when the client believes its lease is valid
    mode: str | None = None  # an rw lock's acquire: "read" or "write" (harness/core/kinds.py)
    permits: int | None = None  # a semaphore's acquire: its N

    def to_dict(self) -> dict:
        return {k: v for k in _OP_FIELDS if (v := getattr(self, k)) is not None or k == "value"}

    def with_index(self, index: int) -> "Op":
        return replace(self, index=index)


_OP_FIELDS = tuple(f.name for f in fields(Op))
_INDEX = attrgetter("index")

# The largest time_ns a CLOCK_MONOTONIC reading (a signed 64-bit count) can hold.
MAX_TIME_NS = 2**63 - 1


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # json.loads accepts NaN and Infinity by default


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)
_TYPE_SET = frozenset(TYPES)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)  # True is an int to Python, not to us


def process_id(v: Any) -> int | str:
    """A history's process id as the checkers key it: an integer or a string as given; any other
    JSON scalar (1.5, true, false, null: a foreign history may use them) as its JSON text, a
    string, so that true is never process 1 and 1.0 never process 1."""
    if _is_int(v) or isinstance(v, str):
        return v
    return json.dumps(v)


def check_fields(d: Any, where: str) -> None:
    """Refuse, with BadHistory, a decoded line that is not an op of the right types. Fields
    other than these are ignored (foreign histories, Jepsen's among them, carry more)."""
    if not isinstance(d, dict):
        raise BadHistory(f"{where}: expected a JSON object, got {_json_kind(d)}; a history has one JSON op per line")
    missing = [k for k in ("time_ns", "process", "type", "f") if k not in d]
    if missing:
        raise BadHistory(f"{where}: missing field(s) {', '.join(missing)}; every op needs time_ns, process, type and f")
    t = d["time_ns"]
    if not _is_int(t) or not 0 <= t <= MAX_TIME_NS:
        raise BadHistory(f"{where}: time_ns must be a non-negative integer of nanoseconds, got {_short(t)}")
    proc = d["process"]
    if isinstance(proc, (list, dict)) or (isinstance(proc, float) and not math.isfinite(proc)):
        raise BadHistory(f"{where}: process must be a JSON scalar (an integer, a string, a number, true, false "
                         f"or null), got {_short(proc)}")
    if not isinstance(d["type"], str) or d["type"] not in TYPES:
        raise BadHistory(f"{where}: type {_short(d['type'])} is not one of {', '.join(TYPES)}")
    if not isinstance(d["f"], str):
        raise BadHistory(f"{where}: f must be a string such as \"acquire\", got {_short(d['f'])}")
    i = d.get("index")
    if i is not None and (not _is_int(i) or i < 0):
        raise BadHistory(f"{where}: index must be a non-negative integer, got {_short(i)}")
    tok = d.get("token")
    if tok is not None and not _is_int(tok):
        raise BadHistory(f"{where}: token must be an integer or null, got {_short(tok)}")
    vu = d.get("valid_until_ns")
    if vu is not None and (not _is_int(vu) or not 0 <= vu <= MAX_TIME_NS):
        raise BadHistory(f"{where}: valid_until_ns must be a non-negative integer of nanoseconds or null, got {_short(vu)}")
    if d.get("mode") is not None and d["mode"] not in ("read", "write"):
        raise BadHistory(f"{where}: mode must be \"read\", \"write\" or null, got {_short(d['mode'])}")
    n = d.get("permits")
    if n is not None and (not _is_int(n) or n < 1):
        raise BadHistory(f"{where}: permits must be a positive integer or null, got {_short(n)}")
    for k in ("key", "node", "error"):
        if d.get(k) is not None and not isinstance(d[k], str):
            raise BadHistory(f"{where}: {k} must be a string or null, got {_short(d[k])}")


def _json_kind(v: Any) -> str:
    return {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(type(v), "a number")


def _short(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 40 else r[:37] + "..."


def _not_a_run(d: Path) -> str:
    """Why a directory without a history.jsonl is no run: a store or a test's dir names one of
    its runs; one that holds none says so (nothing there to check or report)."""
    try:
        runs = sorted(str(h.parent) for pattern in ("*/history.jsonl", "*/*/history.jsonl") for h in d.glob(pattern))
    except OSError:
        runs = []
    if runs:
        return f"{d} is not a run but holds runs (a store or a test's dir); give one of them, such as {runs[-1]}"
    return (f"{d} holds no history.jsonl and no runs, so there is nothing to read; give a run directory such as "
            f"store/latest or a history.jsonl")


def _history_file(path: str | os.PathLike) -> tuple[Path, Path | None]:
    """(the history file, the run dir it must resolve inside, or None for a file the user
    named directly: that one is their choice)."""
    from harness.core.safefile import inside

    p, root = Path(path), None
    if p.is_dir():
        p, root = p / "history.jsonl", p
        if not p.exists() and not p.is_symlink():
            raise BadHistory(_not_a_run(Path(path)))
        inside(root, p)
    if not p.exists():
        raise BadHistory(f"{p}: no such history file; give a run directory or a history.jsonl")
    if p.is_dir():
        raise BadHistory(f"{p} is a directory, not a history file; give a run directory or a history.jsonl")
    if not p.is_file():  # a FIFO or /dev/zero would block or never end
        raise BadHistory(f"{p} is not a regular file; give a run directory or a history.jsonl")
    return p, root


def read_history(path: str | os.PathLike) -> list[Op]:
    """Read a history.jsonl (or a run dir holding one), refusing one that cannot have happened.

    Refused with BadHistory naming the file and line: bytes that are not UTF-8, a line that
    is not a JSON object or has fields of the wrong types (check_fields), NaN or Infinity,
    indexes that repeat or do not increase, a process whose time_ns goes backwards, a
    completion (ok/fail/info) with no open invoke of its process or of another f, and a
    second invoke while the process's previous op is still open (one op in flight per
    process, as in Jepsen; "nemesis" and "final" pair like any other process).

    Accepted because the harness's own runs produce them: a torn last line (a crash can
    cut the final write short, so a last line without its newline that does not parse is
    dropped), and a last invoke of a process that never completes (a worker stopped or
    killed mid-op). An op without an index gets the one after the previous op's.

    Given a run dir, its history.jsonl must resolve inside it (harness/core/safefile.py); a file
    named directly may be anywhere, but must be a regular file.
    """
    from harness.core.safefile import read_inside

    p, root = _history_file(path)
    try:
        raw = read_inside(root, p)
    except OSError as e:
        raise BadHistory(f"cannot read {p} ({e.strerror}); check its permissions") from None
    torn_ok = not raw.endswith(b"\n")  # only a last line without its newline can be torn
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        last_nl = raw.rfind(b"\n")
        if not (torn_ok and e.start > last_nl):
            n, col = raw.count(b"\n", 0, e.start) + 1, e.start - raw.rfind(b"\n", 0, e.start)
            raise BadHistory(f"{p} line {n}: not UTF-8 (byte 0x{raw[e.start]:02x} at column {col}); "
                             f"a history is UTF-8 text, one JSON op per line") from None
        text = raw[:last_nl + 1].decode("utf-8")  # the torn last line goes; all before it decoded
    lines = text.removeprefix("\ufeff").split("\n")
    decode = _DECODER.decode
    ops: list[Op] = []
    line_of: list[int] = []  # the line of each op, to name an earlier one in a message
    open_: dict[Any, tuple[int, Op]] = {}  # process -> (line, invoke) of its op in flight
    last_t: dict[Any, tuple[int, int]] = {}  # process -> (line, time_ns) of its latest op
    for n, line in enumerate(lines, 1):
        if not line or line.isspace():
            continue
        try:
            d = decode(line)
        except json.JSONDecodeError as e:
            if n == len(lines) and torn_ok:  # a crash can tear the last line; the prefix is still good
                break
            raise BadHistory(f"{p} line {n}: not JSON ({e.msg}); a history has one JSON op per line") from None
        except (ValueError, RecursionError) as e:  # NaN, an integer of 5000 digits, [[[[...]]]]
            reason = ("nested too deeply" if isinstance(e, RecursionError) else
                      str(e) if "is not JSON" in str(e) else "a number too long to read")
            raise BadHistory(f"{p} line {n}: not JSON ({reason}); a history has one JSON op per line") from None
        if not _fields_ok(d):
            check_fields(d, f"{p} line {n}")
        index = d.get("index")
        if index is None:
            index = ops[-1].index + 1 if ops else 0
        op = Op(index=index, time_ns=d["time_ns"], process=process_id(d["process"]), type=d["type"], f=d["f"],
                key=d.get("key"), value=d.get("value"), token=d.get("token"), node=d.get("node"), error=d.get("error"),
                valid_until_ns=d.get("valid_until_ns"), mode=d.get("mode"), permits=d.get("permits"))
        if ops and index <= ops[-1].index:
            _index_error(op, f"{p} line {n}", ops, line_of)
        proc = op.process
        # time_ns only per process: the runner writes a worker's ops when it drains their
        # queue, so a nemesis op stamped later can be written before them, and the ops of
        # different workers interleave as their queue feeders deliver them. One process's
        # ops are stamped in order by one thread from the one monotonic clock, and are
        # written in that order.
        before = last_t.get(proc)
        if before is not None and op.time_ns < before[1]:
            raise BadHistory(f"{p} line {n}: time_ns {op.time_ns} of process {proc!r} is before its op on "
                             f"line {before[0]} ({before[1]}); one process's ops cannot go back in time")
        last_t[proc] = (n, op.time_ns)
        pending = open_.get(proc)
        if op.type == "invoke":
            if pending is not None:
                raise BadHistory(f"{p} line {n}: process {proc!r} invokes {op.f} while its {pending[1].f} from "
                                 f"line {pending[0]} is still open; a process has one op in flight (a new "
                                 f"process id follows an info)")
            open_[proc] = (n, op)
        elif pending is None:
            raise BadHistory(f"{p} line {n}: {op.type} {op.f} of process {proc!r} has no open invoke before it; "
                             f"every completion follows its own invoke")
        elif pending[1].f != op.f:
            raise BadHistory(f"{p} line {n}: {op.type} {op.f} of process {proc!r} completes its {pending[1].f} "
                             f"from line {pending[0]}; a completion has its invoke's f")
        else:
            del open_[proc]
        ops.append(op)
        line_of.append(n)
    return ops


def _fields_ok(d: Any) -> bool:
    """check_fields' fast path: True when every field it checks has its type (JSON never
    yields subclasses, so `type(x) is int` also rules out bools)."""
    if type(d) is not dict:
        return False
    t, proc, ty = d.get("time_ns"), d.get("process"), d.get("type")
    if type(t) is not int or not 0 <= t <= MAX_TIME_NS or (type(proc) is not int and type(proc) is not str):
        return False
    if type(ty) is not str or ty not in _TYPE_SET or type(d.get("f")) is not str:
        return False
    i, tok, vu = d.get("index"), d.get("token"), d.get("valid_until_ns")
    if (i is not None and (type(i) is not int or i < 0)) or (tok is not None and type(tok) is not int):
        return False
    if vu is not None and (type(vu) is not int or not 0 <= vu <= MAX_TIME_NS):
        return False
    mode, n = d.get("mode"), d.get("permits")
    if (mode is not None and mode not in ("read", "write")) or (n is not None and (type(n) is not int or n < 1)):
        return False
    return all(d.get(k) is None or type(d[k]) is str for k in ("key", "node", "error"))


def _index_error(op: Op, where: str, ops: list[Op], line_of: list[int]) -> None:
    for earlier, n in zip(ops, line_of):
        if earlier.index == op.index:
            raise BadHistory(f"{where}: index {op.index} was already used on line {n}; every op needs its own index")
    raise BadHistory(f"{where}: index {op.index} comes after index {ops[-1].index}; "
                     f"ops are listed in the order they were recorded, with increasing indexes")


_dumps = json.JSONEncoder(separators=(",", ":"), default=str).encode


class HistoryWriter:
    """Appends ops to history.jsonl, assigning indices, one flushed line per op."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        # "x": a history is written once, into a fresh run dir; appending to an old one
        # would number its ops from 0 again
        self._f = open(self.path, "x", encoding="utf-8", buffering=1)
        self._next = 0
        self.size = 0  # characters written so far (bytes, for the ASCII that json.dumps writes)

    def append(self, op: Op) -> Op:
        op = op.with_index(self._next)
        self._next += 1
        line = _dumps(op.to_dict()) + "\n"
        self._f.write(line)  # line buffered: one flush per write
        self.size += len(line)
        return op

    def record(self, batch: list[dict], where: str) -> int:
        """Append a worker's batch of decoded ops with one write; refuse (BadHistory) one
        whose fields have the wrong types, before any of it is written. Returns the index
        of the first. The runner's hot path: each op is checked and encoded once, and no
        Op is built (op_at builds one for whoever needs it)."""
        for d in batch:
            if not _fields_ok(d):
                check_fields(d, where)  # a plugin's bad token fails here, not at the end
        first = i = self._next
        lines = []
        for d in batch:
            lines.append(_dumps({"index": i, **d}))
            i += 1
        self._next = i
        text = "\n".join(lines) + "\n"
        self._f.write(text)  # line buffered: one flush per write
        self.size += len(text)
        return first

    @staticmethod
    def op_at(d: dict, index: int) -> Op:
        """The Op of a recorded dict (record checked its fields)."""
        get = d.get
        proc = d["process"]
        return Op(index=index, time_ns=d["time_ns"], process=proc if type(proc) in (int, str) else process_id(proc),
                  type=d["type"], f=d["f"], key=get("key"),
                  value=get("value"), token=get("token"), node=get("node"), error=get("error"),
                  valid_until_ns=get("valid_until_ns"), mode=get("mode"), permits=get("permits"))

    def close(self) -> None:
        if not self._f.closed:
            self._f.flush()
            os.fsync(self._f.fileno())
            self._f.close()


# Holding: a process holds the lock from the completion of its ok acquire until it invokes
# its release (the window in which it believes it is the holder and may touch the
# resource). Every reader of a history, live or after the fact, uses these two rules.
def begins_hold(f: str, type_: str) -> bool:
    return f == "acquire" and type_ == "ok"


def ends_hold(f: str, type_: str) -> bool:
    return f == "release" and type_ == "invoke"


class Holders:
    """The processes holding a lock so far, per key, updated op by op (live views of a run)."""

    def __init__(self) -> None:
        self.now: set[Any] = set()  # every process holding some key
        self._by_key: dict[Any, set[Any]] = {}

    def see(self, op: Op) -> set[Any]:
        """Update with one op; return the other processes holding its key when `op` began a
        hold (a violation each), else the empty set."""
        return self.see_fields(op.process, op.f, op.type, op.key)

    def see_fields(self, process: Any, f: str, type_: str, key: Any) -> set[Any]:
        if process == NEMESIS:
            return set()
        if begins_hold(f, type_):
            held = self._by_key.setdefault(key, set())
            others = held - {process}
            held.add(process)
            self.now.add(process)
            return others
        if ends_hold(f, type_):
            self._by_key.get(key, set()).discard(process)
            self.now.discard(process)
        return set()


def pair_ops(ops: Iterable[Op]) -> Iterator[tuple[Op, Op | None]]:
    """(invoke, completion) pairs per process, in invocation order; completion is None if
    it never came.

    A process has at most one operation in flight, as in Jepsen; nemesis ops pair the same way.
    """
    pending: dict[Any, Op] = {}
    order: list[Op] = []
    done: dict[int, Op] = {}
    for op in ops:
        if op.type == "invoke":
            pending[op.process] = op  # a second invoke without completion: the first never finished
            order.append(op)
        elif (inv := pending.pop(op.process, None)) is not None:
            done[inv.index] = op
    # zip and map rather than a loop: they run in C, which counts on 1M-op histories
    return zip(order, map(done.get, map(_INDEX, order)))
