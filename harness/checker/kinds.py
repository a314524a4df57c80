"""Exclusion for every lock kind: the mutex, the read-write lock, the counting semaphore.

The kind comes from the history (harness/core/kinds.py: an rw acquire carries `mode`, read from
its invoke as the model reads it, else from its ok; a
semaphore acquire `permits`), never from the code that ran it. Holding windows are the
mutex's (harness/checker/lock.py: from an acquire's `ok` to its release's invoke), and:

  rw           a window of a writer that overlaps any window of another process is a
               violation; two readers overlapping is what the lock is for, and is counted
               (`reader_overlaps`) so a run shows its readers did share
  semaphore:N  a moment at which N+1 windows are open is a violation (one per window that
               made the count N+1, listed with the earliest-begun window still open);
               exactly N at once is the semaphore working

Both come with the cause checker's reason for each violation, like the mutex's. The
linearizability checker gets the two as models (`RwLock`, `Semaphore`): sequential
specifications over acquire (with its mode) and release by the holder, leases that
expire deliberately not modelled (as in models.Mutex).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from harness.core.contracts.checker import CheckResult
from harness.core.history import Op
from harness.core.kinds import LockKind, of_history
from harness.checker.causes import Attribution, by_cause
from harness.checker.linearizable import check_linearizable
from harness.checker.lock import MAX_LISTED, Window, _brief, _deadline, check_mutex, holding_windows, lease_history
from harness.checker.models import Model, Mutex, State


def _asked(history: Sequence[Op]) -> dict[int, str]:
    """The mode each acquire asked for, by the index of its ok: the invoke's, as the model
    reads it (a foreign history may carry it there alone), else the ok's."""
    invoked: dict[Any, Op] = {}
    out: dict[int, str] = {}
    for op in sorted(history, key=lambda o: (o.time_ns, o.index)):
        if op.f != "acquire":
            continue
        if op.type == "invoke":
            invoked[op.process] = op
        else:
            inv = invoked.pop(op.process, None)
            mode = (inv.mode if inv is not None else None) or op.mode
            if mode is not None:
                out[op.index] = mode
    return out


def _mode(w: Window, asked: dict[int, str] | None = None) -> str:
    return (asked or {}).get(w.acquire.index) or w.acquire.mode or "write"


def check_exclusion(spec: Any, history: Sequence[Op]) -> CheckResult:
    """The exclusion the history's lock kind promises (check_mutex for a mutex)."""
    kind = of_history(history)
    if kind.name == "mutex":
        return check_mutex(spec, history)
    wins = holding_windows(history)
    asked = _asked(history)
    end_of_history = max((o.time_ns for o in history), default=0)
    overlaps: list[dict] = []
    shared = 0  # rw: reader-reader overlaps
    most = 0  # semaphore: most windows open at once
    active: list[Window] = []
    for w in wins:
        active = [a for a in active if (a.end_ns or end_of_history) > w.start_ns]
        others = [a for a in active if a.process != w.process]
        if kind.name == "rw":
            for a in others:
                if _mode(a, asked) == "read" and _mode(w, asked) == "read":
                    shared += 1
                else:
                    overlaps.append(_overlap(a, w, [a, w], end_of_history, asked))
        else:
            most = max(most, len(others) + 1)
            if len(others) + 1 > kind.permits:
                overlaps.append(_overlap(others[0], w, others + [w], end_of_history, asked))
        active.append(w)
    why = Attribution(spec, history)
    for o in overlaps:
        o["cause"] = why.cause(o["first"]["index"], o["second"]["index"])
    causes = [o["cause"] for o in overlaps]
    summary: dict[str, Any] = {
        "lock": str(kind), "violations": len(overlaps), "windows": len(wins),
        "max_overlap_ms": max((o["overlap_ms"] for o in overlaps), default=0.0),
        "violations_by_cause": by_cause(causes), "unexplained": sum(c["cause"] == "unexplained" for c in causes)}
    if kind.name == "rw":
        summary["reader_overlaps"] = shared
        summary["read_windows"] = sum(_mode(w, asked) == "read" for w in wins)
    else:
        summary["max_holders"] = most
        summary["permits"] = kind.permits
    return CheckResult(
        name="mutex", valid=not overlaps, summary=summary,
        details={"overlaps": overlaps[:MAX_LISTED], "listed": min(len(overlaps), MAX_LISTED),
                 "causes": [[o["first"]["index"], o["second"]["index"], o["cause"]["cause"]] for o in overlaps],
                 "windows": [[w.process, w.start_ns, w.end_ns, w.token, _deadline(why, w), _mode(w, asked)] for w in wins]})


def _overlap(first: Window, second: Window, holders: list[Window], end_of_history: int,
             asked: dict[int, str]) -> dict:
    end = min(h.end_ns or end_of_history for h in holders)
    return {"first": _brief(first.acquire), "second": _brief(second.acquire),
            "first_release": _brief(first.release), "second_release": _brief(second.release),
            "modes": [_mode(first, asked), _mode(second, asked)], "holders": len(holders),
            "start_ns": second.start_ns, "end_ns": end, "overlap_ms": round((end - second.start_ns) / 1e6, 3)}


@dataclass(frozen=True, slots=True, kw_only=True)
class RwLock(Mutex):
    """A read-write lock: the state is (writer,) or ((), readers) as a sorted tuple of
    reader processes: `("w", p)` held by writer p, `("r", p1, p2, ...)` by readers, `()`
    free. A write acquire is legal only when free; a read acquire when no writer holds
    and the caller does not hold already; a release only by a holder, freeing its part.
    Unknown acquires with no later release are pruned as in Mutex: leaving a holder out
    only makes other acquires more legal, never less."""

    name: str = "rw"

    def compile(self, inv: Op, comp: Op | None):
        return None  # a read acquire's guard is not one state: only `step` judges

    def step(self, state: State, inv: Op, comp: Op | None) -> State | None:
        p = inv.process
        if inv.f == "acquire":
            if inv.mode == "read":
                if state == ():
                    return ("r", p)
                if state[0] == "r" and p not in state[1:]:
                    return ("r",) + tuple(sorted(state[1:] + (p,), key=repr))
                return None
            return ("w", p) if state == () else None
        if inv.f == "release":
            if state == ("w", p):
                return ()
            if state and state[0] == "r" and p in state[1:]:
                rest = tuple(q for q in state[1:] if q != p)
                return ("r",) + rest if rest else ()
            return None
        return state

    def to_json(self, state: State) -> Any:
        if not state:
            return None
        return {"writer": state[1]} if state[0] == "w" else {"readers": list(state[1:])}


@dataclass(frozen=True, slots=True, kw_only=True)
class Semaphore(Mutex):
    """A counting semaphore of `permits` permits: the state is the sorted tuple of the
    processes holding one. An acquire is legal when fewer than `permits` hold and the
    caller does not; a release only by a holder."""

    name: str = "semaphore"
    permits: int = 1

    def compile(self, inv: Op, comp: Op | None):
        return None

    def step(self, state: State, inv: Op, comp: Op | None) -> State | None:
        p = inv.process
        if inv.f == "acquire":
            if len(state) >= self.permits or p in state:
                return None
            return tuple(sorted(state + (p,), key=repr))
        if inv.f == "release":
            return tuple(q for q in state if q != p) if p in state else None
        return state

    def to_json(self, state: State) -> Any:
        return list(state)


def model_of(kind: LockKind) -> Model:
    if kind.name == "rw":
        return RwLock()
    if kind.name == "semaphore":
        return Semaphore(permits=kind.permits)
    return Mutex()


def check_linearizable_lock(spec: Any, history: Sequence[Op], time_limit: float = 10.0) -> CheckResult:
    """The history's lock ops against the model of its kind (expired leases' `not held`
    releases read as releases: lock.lease_history)."""
    model = model_of(of_history(history))
    return check_linearizable(lease_history(history), model, time_limit=time_limit, name="linearizable-mutex")
