"""Linearizability checking, after Wing & Gong, Lowe, and Porcupine.

A history is linearizable if every operation can be given one instant between its
invocation and its completion such that, taken in the order of those instants, the
operations are legal for the model (see `models.py`). Ops that completed `ok` must all be
placed; `fail` ops are dropped; `info` ops (and invocations that never completed) may be
placed at any instant after their invocation, or not at all.

The search: each op becomes a call entry and a return entry, sorted by time (calls first at
equal times, so equal timestamps count as concurrent; info returns sit at +infinity). A
depth-first search walks the entry list from its head, tries to linearize each call it
meets before the first return, and backtracks when it reaches a return whose op it has not
placed. A placed op is lifted out of the doubly linked list in O(1) and put back on
backtrack. Configurations (set of placed ops, model state) already seen are not explored
again. The search succeeds once no return of an ok op is left.

The set of placed ops is keyed by a 128-bit Zobrist hash (XOR of a random number per op)
instead of a bitset, so the memo costs O(1) memory per entry on 100k-op histories. Two
different sets collide with probability about 2^-100 over any run we could make; a
collision could only prune a branch, so its one conceivable effect is a false alarm, never
a missed violation.

Histories are split by `key` and each part checked alone (P-compositionality: a history
is linearizable iff each object's sub-history is). One time budget covers all parts; what
is not done by then is "unknown", never True.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any, Sequence

from harness.checker.base import UNKNOWN, CheckResult, Valid, merge_valid
from harness.checker.models import MODELS, Model
from harness.errors import BadArgument
from harness.history import Op, pair_ops

__all__ = ["MODELS", "LinearizableChecker", "check_linearizable"]

_INF = float("inf")
_MAX_STATES = 16       # states reported in a counterexample
_MAX_CONCURRENT = 20   # concurrent ops reported in a counterexample
_PREFIX_TAIL = 5       # last placed ops reported in a counterexample
_CLOCK_EVERY = 1023    # iterations between looks at the clock (a mask)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Outcome:
    """What the search found for one partition."""

    valid: Valid
    stuck: int | None = None          # op id the deepest dead end could not place
    prefix_len: int = 0               # ops placed on that deepest path
    prefix_tail: tuple[int, ...] = ()  # the last few of them
    states: tuple = ()                # model states seen just before the stuck op


def resolve_model(model: str | Model) -> Model:
    """A Model instance from a name or a Model; unknown names raise BadArgument."""
    if isinstance(model, Model):
        return model
    if model in MODELS:
        return MODELS[model]
    raise BadArgument(f"unknown model {model!r}; choose one of: {', '.join(MODELS)}")


def _partitions(history: Sequence[Op], model: Model
                ) -> tuple[dict[Any, list[tuple[Op, Op | None]]], int, dict[int, Op]]:
    """Relevant ops per key as (invoke, ok completion or None), in invocation-time order.

    Fails are dropped here (they did not happen); info completions and missing ones both
    become None. Also returns the number of fails dropped and, for reporting, every
    relevant op's real completion by invoke index.
    """
    parts: dict[Any, list[tuple[Op, Op | None]]] = {}
    fails = 0
    completions: dict[int, Op] = {}
    for inv, comp in pair_ops(history):
        if not model.relevant(inv):
            continue
        if comp is not None:
            completions[inv.index] = comp
        if comp is not None and comp.type == "fail":
            fails += 1
            continue
        parts.setdefault(inv.key, []).append((inv, comp if comp is not None and comp.type == "ok" else None))
    for ops in parts.values():
        ops.sort(key=lambda p: p[0].time_ns)
    return parts, fails, completions


def _search(model: Model, ops: list[tuple[Op, Op | None]], deadline: float) -> _Outcome:
    """Porcupine's iterative DFS over one partition. Raises whatever `model.step` raises."""
    n = len(ops)
    # Entries: (time, kind, op id); kind 0 = call sorts before 1 = return at equal times.
    raw = []
    for i, (inv, comp) in enumerate(ops):
        raw.append((inv.time_ns, 0, i))
        raw.append((comp.time_ns if comp is not None else _INF, 1, i))
    raw.sort()
    head, tail = 0, 2 * n + 1
    size = 2 * n + 2
    nxt = list(range(1, size + 1))
    prv = list(range(-1, size - 1))
    is_call = [False] * size
    done_at = [False] * size    # reaching this entry means every ok op is placed
    done_at[tail] = True
    ent_op = [-1] * size
    ret_of = [0] * size         # call position -> its return position
    pos_call = [0] * n
    for pos, (t, kind, i) in enumerate(raw, 1):
        ent_op[pos] = i
        if kind == 0:
            is_call[pos] = True
            pos_call[i] = pos
        else:
            ret_of[pos_call[i]] = pos
            done_at[pos] = t == _INF  # an info return: all finite returns come before it

    rng = random.Random(0x11FE)  # fixed seed: the same history always searches alike
    zobrist = [rng.getrandbits(128) for _ in range(n)]
    invs = [p[0] for p in ops]
    comps = [p[1] for p in ops]
    step = model.step
    state = model.init
    placed = 0                  # Zobrist hash of the set of placed ops
    seen: set = {(0, state)}
    stack: list[tuple[int, Any, int]] = []  # (call position, state before, hash before)
    best = -1
    stuck: int | None = None
    stuck_states: list = []
    prefix_tail: tuple[int, ...] = ()
    clock = time.monotonic
    iters = 0

    e = nxt[head]
    while True:
        iters += 1
        if not iters & _CLOCK_EVERY and clock() > deadline:
            return _Outcome(valid=UNKNOWN)
        if is_call[e]:
            i = ent_op[e]
            ns = step(state, invs[i], comps[i])
            if ns is not None:
                nh = placed ^ zobrist[i]
                cfg = (nh, ns)
                if cfg not in seen:
                    seen.add(cfg)
                    stack.append((e, state, placed))
                    state, placed = ns, nh
                    r = ret_of[e]
                    a, b = prv[e], nxt[e]
                    nxt[a], prv[b] = b, a
                    a, b = prv[r], nxt[r]
                    nxt[a], prv[b] = b, a
                    e = nxt[head]
                    continue
            e = nxt[e]
            continue
        if done_at[e]:
            return _Outcome(valid=True)
        # A return whose op is not placed: this path is dead. Remember the deepest one.
        depth = len(stack)
        if depth > best:
            best, stuck, stuck_states = depth, ent_op[e], [state]
            prefix_tail = tuple(ent_op[c] for c, _, _ in stack[-_PREFIX_TAIL:])
        elif depth == best and ent_op[e] == stuck and len(stuck_states) < _MAX_STATES \
                and state not in stuck_states:
            stuck_states.append(state)
        if not stack:
            return _Outcome(valid=False, stuck=stuck, prefix_len=best,
                            prefix_tail=prefix_tail, states=tuple(stuck_states))
        c, state, placed = stack.pop()
        r = ret_of[c]
        # Put back in the reverse order of removal, so the saved neighbours are right.
        nxt[prv[r]] = r
        prv[nxt[r]] = r
        nxt[prv[c]] = c
        prv[nxt[c]] = c
        e = nxt[c]


def _op_json(pair: tuple[Op, Op | None], original: dict[int, Op]) -> dict:
    inv, _ = pair
    comp = original.get(inv.index)
    return {"invoke": inv.to_dict(), "completion": comp.to_dict() if comp is not None else None}


def _counterexample(key: Any, model: Model, ops: list[tuple[Op, Op | None]], out: _Outcome,
                    original: dict[int, Op]) -> dict:
    """The JSON-ready account of where the deepest linearization got stuck."""
    inv, comp = ops[out.stuck]
    lo, hi = inv.time_ns, comp.time_ns if comp is not None else _INF
    concurrent = []
    for j, (oinv, ocomp) in enumerate(ops):
        if j == out.stuck:
            continue
        if oinv.time_ns > hi:
            break  # invocation order: nothing later can overlap
        if (ocomp.time_ns if ocomp is not None else _INF) >= lo:
            concurrent.append(_op_json(ops[j], original))
            if len(concurrent) >= _MAX_CONCURRENT:
                break
    return {
        "key": key,
        "op": _op_json(ops[out.stuck], original),
        "concurrent": concurrent,
        "states": [model.to_json(s) for s in out.states],
        "linearized_prefix_len": out.prefix_len,
        "linearized_prefix_tail": [_op_json(ops[j], original) for j in out.prefix_tail],
    }


def check_linearizable(history: Sequence[Op], model: str | Model, *, time_limit: float = 10.0,
                       name: str | None = None) -> CheckResult:
    """Is `history` linearizable with respect to `model`? True, False or "unknown".

    `model` is a name in MODELS or a Model. Nemesis ops and ops the model does not know
    are ignored. Each `key` is checked alone; the verdict is False if any key is not
    linearizable, else "unknown" if any key ran out of `time_limit` seconds (one budget for
    all keys), else True. A model that raises propagates the exception: wrap the call in
    `safe_check` (or use LinearizableChecker through it) to turn that into "unknown".

    summary: model, ops_checked (ops searched, after dropping fails and ops no
    linearization needs), partitions, elapsed_ms, ops_failed_dropped, invalid_keys,
    unknown_keys. details["counterexample"] (only when False) is for the first invalid
    key: {"key", "op": {"invoke", "completion"}, "concurrent": [same shape, <= 20],
    "states": [model states just before "op", JSON values], "linearized_prefix_len",
    "linearized_prefix_tail": [the last <= 5 ops placed before it, same shape]}; the
    completion of an info op is the info op itself, of a never-completed op null.
    """
    m = resolve_model(model)
    label = name or f"linearizable-{m.name}"
    start = time.monotonic()
    deadline = start + time_limit
    parts, fails, original = _partitions(history, m)

    verdicts: list[Valid] = []
    invalid_keys: list = []
    unknown_keys: list = []
    counterexample = None
    checked = 0
    for key, ops in parts.items():
        ops = m.prune(ops)
        checked += len(ops)
        if time.monotonic() > deadline:
            out = _Outcome(valid=UNKNOWN)
        else:
            out = _search(m, ops, deadline)
        verdicts.append(out.valid)
        if out.valid is False:
            invalid_keys.append(key)
            if counterexample is None:
                counterexample = _counterexample(key, m, ops, out, original)
        elif out.valid == UNKNOWN:
            unknown_keys.append(key)

    valid = merge_valid(verdicts) if verdicts else True
    summary = {
        "model": m.name,
        "ops_checked": checked,
        "partitions": len(parts),
        "elapsed_ms": round((time.monotonic() - start) * 1000, 3),
        "ops_failed_dropped": fails,
        "invalid_keys": invalid_keys,
        "unknown_keys": unknown_keys,
    }
    details: dict[str, Any] = {}
    if counterexample is not None:
        details["counterexample"] = counterexample
    if unknown_keys:
        details["reason"] = (f"time limit of {time_limit}s reached before {len(unknown_keys)} "
                             f"key(s) were decided; raise time_limit or check a shorter history")
    return CheckResult(name=label, valid=valid, summary=summary, details=details)


class LinearizableChecker:
    """The Checker-protocol face of `check_linearizable`; the spec is not consulted."""

    def __init__(self, model: str | Model, time_limit: float = 10.0):
        self.model = resolve_model(model)
        self.time_limit = time_limit
        self.name = f"linearizable-{self.model.name}"

    def check(self, spec: Any, history: Sequence[Op]) -> CheckResult:
        return check_linearizable(history, self.model, time_limit=self.time_limit, name=self.name)
