"""Linearizability checking, after Wing & Gong, Lowe, and Porcupine.

A history is linearizable if every operation can be given one instant between its
invocation and its completion such that, taken in the order of those instants, the
operations are legal for the model (see `models.py`). Ops that completed `ok` must all be
placed; `fail` ops are dropped; `info` ops (and invocations that never completed) may be
placed at any instant after their invocation, or not at all.

The search: each op becomes a call entry and a return entry, sorted by time (calls first at
equal times, so equal timestamps count as concurrent; info returns sit at +infinity). The
ops whose calls come before the first return are the ones that may be placed next. A
depth-first search places one at a time, lifting its entries out of the doubly linked list
in O(1) and putting them back on backtrack; a node is a dead end when the op of the first
return cannot be placed, and the search succeeds once no return of an ok op is left.
Configurations (set of placed ops, model state) already seen are not explored again.

The order in which a node tries its moves decides the speed, never the verdict: every
move is tried before a node fails. Wing & Gong's order (earliest invocation first) places
writes eagerly and finds a wrong guess only when some later return cannot be met, after
exploring every interleaving of the ops in between: exponential in the concurrency. Here:

- a read-only op that is legal now is placed at once, as the node's only move: a
  linearization that places it later can place it here instead, and nothing changes;
- otherwise the op of the first return goes first (just in time, as in Lowe's JIT
  linearization), then the other candidates, first those after which it is legal;
- the dead-state rule cuts a move that leaves state s while an unplaced ok op needs s and
  no unplaced op could bring s back, where the plain search would notice only at that
  op's return.

On generated histories (benchmarks/checker.py) the search visits about 1.2 configurations
per op at 5 to 50 processes, so a valid history costs time linear in its length. To call
a history invalid, though, it must try every order, which grows with the concurrency and
with how far back the search has to go. So a search that runs long (4 moves per op) looks
for doomed ops (`models.doomed`: stale reads, double grants, found from real-time order
alone); one settles the verdict, and the search then only goes on to reach it for the
report. Read-only ops, the rule and doomed ops need a `Compiled` model (see `models.py`);
a model with only `step` gets the same order without them.

The set of placed ops is keyed by a 128-bit Zobrist hash (XOR of a random number per op,
updated as ops are placed and removed, XORed with a random number per state) instead of a
bitset, so the memo costs O(1) memory per entry on 100k-op histories. Two different
configurations collide with probability about 2^-100 over any run we could make; a
collision could only prune a branch, so its one conceivable effect is a false alarm, never
a missed violation.

Histories are split by `key` and each part checked alone (P-compositionality: a history
is linearizable iff each object's sub-history is). One time budget covers all parts; what
is not done by then is "unknown", never True.
"""

from __future__ import annotations

import bisect
import gc
import random
import time
from dataclasses import dataclass
from typing import Any, Sequence

from harness.core.contracts.checker import UNKNOWN, CheckResult, Valid, merge_valid
from harness.checker.models import ANY, KEEP, MODELS, Model, compiler, doomed, needs
from harness.core.errors import BadArgument
from harness.core.history import Op, pair_ops

__all__ = ["MODELS", "LinearizableChecker", "check_linearizable"]

_INF = float("inf")
_MAX_STATES = 16       # states reported in a counterexample
_MAX_CONCURRENT = 20   # concurrent ops reported in a counterexample
_PREFIX_TAIL = 5       # last placed ops reported in a counterexample
_CLOCK_EVERY = 1023    # iterations between looks at the clock (a mask)
_STEP = object()       # guard of an op without a Transition: ask model.step
_ABSORBED = object()   # a path entry with no alternative (a read-only op placed at once)
_DOOMED_BUDGET = 20_000  # iterations spent gathering states once stuck at a doomed op


@dataclass(frozen=True, slots=True, kw_only=True)
class _Outcome:
    """What the search found for one partition."""

    valid: Valid
    stuck: int | None = None          # op id the deepest dead end could not place
    prefix_len: int = 0               # ops placed on that deepest path
    prefix_tail: tuple[int, ...] = ()  # the last few of them
    states: tuple = ()                # model states seen just before the stuck op
    iterations: int = 0               # moves tried
    doomed: bool = False              # the stuck op could never be placed (models.doomed)


def resolve_model(model: str | Model) -> Model:
    """A Model instance from a name or a Model; unknown names raise BadArgument."""
    if isinstance(model, Model):
        return model
    if model in MODELS:
        return MODELS[model]
    raise BadArgument(f"unknown model {model!r}; choose one of: {', '.join(MODELS)}")


def _partitions(history: Sequence[Op], model: Model
                ) -> tuple[dict[Any, list[tuple[Op, Op | None]]], int]:
    """Relevant ops per key as (invoke, ok completion or None), in invocation-time order.

    Fails are dropped here (they did not happen); info completions and missing ones both
    become None. Also returns the number of fails dropped.
    """
    parts: dict[Any, list[tuple[Op, Op | None]]] = {}
    fails = 0
    relevant = model.relevant
    for inv, comp in pair_ops(history):
        if not relevant(inv):
            continue
        if comp is not None and comp.type != "ok":
            if comp.type == "fail":
                fails += 1
                continue
            comp = None
        part = parts.get(inv.key)
        if part is None:
            part = parts[inv.key] = []
        part.append((inv, comp))
    for ops in parts.values():
        ops.sort(key=lambda p: p[0].time_ns)
    return parts, fails


def _compile(model: Model, ops: list[tuple[Op, Op | None]]) -> tuple[list, list, list]:
    """Per op: guard, then, read-only (see models.Transition); guard _STEP: ask `step`."""
    n = len(ops)
    guard: list = [_STEP] * n
    then: list = [KEEP] * n
    ro = [False] * n
    compile = compiler(model)
    if compile is not None:
        for i, (inv, comp) in enumerate(ops):
            t = compile(inv, comp)
            if t is not None:
                guard[i], then[i], ro[i] = t.guard, t.then, t.read_only
    return guard, then, ro


def _entries(ops: list[tuple[Op, Op | None]]) -> tuple[list, list, list]:
    """The doubly linked entry list as nxt, prv and done_at (reaching this entry means every
    ok op is placed). Entry i is op i's call and n + i its return, 2n the head and 2n + 1
    the tail; they are linked in time order, a call before a return at equal times, then
    in op order."""
    n = len(ops)
    # Twice the time, plus one for a return: one number per entry orders time and kind.
    keys = [2 * inv.time_ns for inv, _ in ops]
    keys += [2 * comp.time_ns + 1 if comp is not None else _INF for _, comp in ops]
    head, tail = 2 * n, 2 * n + 1
    nxt = [tail] * (2 * n + 2)
    prv = [head] * (2 * n + 2)
    a = head
    for b in sorted(range(2 * n), key=keys.__getitem__):  # stable: op order at equal keys
        nxt[a], prv[b] = b, a
        a = b
    nxt[a], prv[tail] = tail, a
    # done at the tail, and at an info return: every finite return comes before it
    done_at = [False] * n + [comp is None for _, comp in ops] + [False, True]
    return nxt, prv, done_at


def _search(model: Model, ops: list[tuple[Op, Op | None]], deadline: float,
            report: int = 0, settle: bool = False) -> _Outcome:
    """The depth-first search over one partition (see the module docstring). Raises
    whatever `model.step` or `model.compile` raises.

    A search that runs long or out of time looks for doomed ops (models.doomed); if there
    are, it stops with "unknown", doomed=True and the first as `stuck`, to be run again
    with `settle` if time allows: the verdict is False already, and the search only has to
    reach a doomed op for the report. With
    `report` > 0 the search is for the counterexample of a partition known to be invalid:
    without the dead-state rule, which ends paths early (where a state is left, not at
    the stuck op's return), and stopping after `report` iterations."""
    n = len(ops)
    head = 2 * n                # entries: op i's call is i, its return n + i (see _entries)
    nxt, prv, done_at = _entries(ops)
    guard, then, ro = _compile(model, ops)
    any_ro = any(ro)
    mstep = model.step
    state = model.init
    rules = None if report or _STEP in guard else needs(ops, guard, then)
    bad = [False] * n           # doomed ops
    if rules is None:
        need_of = prod_of = [-1] * n
        need = prod = []
        ids: dict = {}
    else:
        need_of, prod_of, need, prod, ids = rules
        if settle:
            bad = doomed(ops, need_of, prod_of, ids.get(state, -1))
            for r in range(n):
                if bad[r]:  # the rule must not end paths before they get to r
                    need[need_of[r]] -= 1
                    need_of[r] = -1
    look_at = 4 * n + 10_000 if rules and not settle else -1  # when to look for doomed ops

    def trans(state: Any, i: int) -> Any:
        g = guard[i]
        if g is _STEP:
            return mstep(state, ops[i][0], ops[i][1])
        if g is not ANY and g != state:
            return None
        t = then[i]
        return state if t is KEEP else t

    def helpers(state: Any, o: int) -> list:
        """[(op, next state)] of the legal moves other than `o`, first those after which
        `o` is legal."""
        good, rest = [], []
        i = nxt[head]
        while i < n:
            if i != o:
                ns = trans(state, i)
                if ns is not None:
                    (good if trans(ns, o) is not None else rest).append((i, ns))
            i = nxt[i]
        return good + rest

    # ops come in invocation order (_partitions), so op order is the order of their calls
    needers: dict = {}          # state id -> the ok ops needing it, in op order
    called: list = []           # invocation times by op

    def needy(sid: int, skip: int) -> int:
        """For the report: an unplaced ok op needing state id `sid`, other than `skip`,
        preferably one whose call comes before the first return."""
        if not needers:
            for i in range(n):
                if need_of[i] >= 0:
                    needers.setdefault(need_of[i], []).append(i)
            called.extend(inv.time_ns for inv, _ in ops)
        calls = needers[sid]
        f = nxt[head]
        while f < n:
            f = nxt[f]
        # Calls after the first return are all unplaced; placed ones lie mostly before it.
        comp = ops[f - n][1]
        before = bisect.bisect_right(called, comp.time_ns if comp is not None else _INF)
        at = bisect.bisect_left(calls, before)
        lo = max(0, at - 64)
        for x in calls[lo:at + 1] + calls[lo - 1::-1] if lo else calls[:at + 1]:
            if x != skip and nxt[prv[x]] == x:  # still linked: not placed
                return x
        raise AssertionError("need count out of step")  # pragma: no cover

    rng = random.Random(0x11FE)  # fixed seed: the same history always searches alike
    zop = [rng.getrandbits(128) for _ in range(n)]
    zstate = {state: rng.getrandbits(128)}  # more are drawn as states turn up
    placed = 0                  # Zobrist hash of the set of placed ops
    seen = {zstate[state]}      # placed ^ zstate[state] of every configuration reached
    # The path, one entry per placed op: the op, the state before it, and what
    # else its node may try: _ABSORBED nothing, None the helpers of the forced op (not
    # listed yet), or [next index, forced op, helpers].
    path_op: list[int] = []
    path_state: list = []
    path_alt: list = []
    best = -1
    stuck: int | None = None
    stuck_states: list = []
    prefix_tail: tuple[int, ...] = ()
    clock = time.monotonic
    iters = 0
    give_up = report or -1      # the iteration a report, or a search stuck for good, stops at
    pinned = False              # stuck at a doomed op: the report is about such ops only

    e = nxt[head]               # where the scan for a read-only op resumes
    while True:
        # This node's first move: a read-only op legal now, else the forced op.
        while e < n:
            if ro[e]:
                g = guard[e]
                if g is ANY or g == state:
                    break
            e = nxt[e]
        if e < n:
            i, ns, alt, o = e, state, _ABSORBED, -1
        elif done_at[e]:
            return _Outcome(valid=True)
        else:
            o = e - n
            i, alt = o, None
            g = guard[o]
            if g is _STEP:
                ns = mstep(state, ops[o][0], ops[o][1])
            elif g is ANY or g == state:
                ns = state if then[o] is KEEP else then[o]
            else:
                ns = None
        # Make the move, or the node's next alternative; with none left, backtrack.
        while True:
            iters += 1
            if not iters & _CLOCK_EVERY:
                late = clock() > deadline
                if 0 <= look_at and (late or look_at <= iters):  # before giving up, too
                    look_at = -1
                    found = doomed(ops, need_of, prod_of, ids.get(model.init, -1))
                    if any(found):
                        return _Outcome(valid=UNKNOWN, doomed=True, stuck=found.index(True))
                if late:
                    if settle:
                        return _Outcome(valid=False, stuck=bad.index(True), doomed=True)
                    return _Outcome(valid=UNKNOWN)
            if ns is not None:
                nh = placed ^ zop[i]
                z = zstate.get(ns)
                if z is None:
                    z = zstate[ns] = rng.getrandbits(128)
                k = nh ^ z
                if k not in seen:
                    seen.add(k)
                    j, p = need_of[i], prod_of[i]
                    if j >= 0:
                        need[j] -= 1
                    if p >= 0:
                        prod[p] -= 1
                    sid = ids.get(state, -1) if ns != state else -1
                    if sid < 0 or not need[sid] or prod[sid]:
                        path_op.append(i)
                        path_state.append(state)
                        path_alt.append(alt)
                        state, placed = ns, nh
                        r = n + i
                        a, b = prv[i], nxt[i]
                        nxt[a], prv[b] = b, a
                        a, b = prv[r], nxt[r]
                        nxt[a], prv[b] = b, a
                        # Where the scan for a read-only op resumes: after one, where it
                        # was; after another move, from the start, since the state changed,
                        # unless there are no read-only ops: then at this node's first return
                        # (its forced op's) or, if that op was placed, what followed it.
                        if alt is _ABSORBED:
                            e = nxt[prv[i]]
                        elif any_ro:
                            e = nxt[head]
                        else:
                            e = nxt[prv[n + o]]
                        break
                    # The dead-state rule: an ok op still needs the state this move
                    # leaves, and no op that could bring it back is left.
                    if j >= 0:
                        need[j] += 1
                    if p >= 0:
                        prod[p] += 1
                    if len(path_op) + 1 > best and not pinned:
                        best, stuck, stuck_states = len(path_op) + 1, needy(sid, i), [ns]
                        prefix_tail = tuple(path_op[1 - _PREFIX_TAIL:]) + (i,)
            if alt is None:
                alt = [0, o, helpers(state, o)]
            if alt is not _ABSORBED and alt[0] < len(alt[2]):
                i, ns = alt[2][alt[0]]
                alt[0] += 1
                continue
            if o >= 0:
                # A dead end: `o` cannot be placed here. Remember the deepest one.
                depth = len(path_op)
                if not pinned and bad[o]:  # `o` can never be placed
                    pinned, best, give_up = True, -1, iters + _DOOMED_BUDGET
                if pinned and not bad[o]:
                    pass
                elif depth > best:
                    best, stuck, stuck_states = depth, o, [state]
                    prefix_tail = tuple(path_op[-_PREFIX_TAIL:])
                elif depth == best and o == stuck and len(stuck_states) < _MAX_STATES \
                        and state not in stuck_states:
                    stuck_states.append(state)
            if not path_op or 0 <= give_up <= iters:
                return _Outcome(valid=False, stuck=stuck, prefix_len=best, iterations=iters,
                                prefix_tail=prefix_tail, states=tuple(stuck_states),
                                doomed=pinned)
            i = path_op.pop()
            state = path_state.pop()
            alt = path_alt.pop()
            placed ^= zop[i]
            if need_of[i] >= 0:
                need[need_of[i]] += 1
            if prod_of[i] >= 0:
                prod[prod_of[i]] += 1
            r = n + i
            # Put back in the reverse order of removal, so the saved neighbours are right.
            nxt[prv[r]] = r
            prv[nxt[r]] = r
            nxt[prv[i]] = i
            prv[nxt[i]] = i
            ns = None
            o = i if alt is None else -1 if alt is _ABSORBED else alt[1]


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
    # The check builds millions of objects that live until it returns and form no cycles
    # (pairs, tables, the memo); on a 1M-op history the cyclic collector would walk
    # everything alive several times for nothing (2 s of 6.5 in benchmarks/checker.py's
    # 1M-op mutex case). Refcounting frees as usual.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _check(history, m, time_limit, name or f"linearizable-{m.name}")
    finally:
        if enabled:
            gc.enable()


def _check(history: Sequence[Op], m: Model, time_limit: float, label: str) -> CheckResult:
    """check_linearizable with the collector paused."""
    start = time.monotonic()
    deadline = start + time_limit
    parts, fails = _partitions(history, m)

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
            if out.valid == UNKNOWN and out.doomed:  # False: search on for the report if time allows
                out = _search(m, ops, deadline, settle=True) if time.monotonic() < deadline \
                    else _Outcome(valid=False, stuck=out.stuck, doomed=True)
        if out.valid is False and not out.doomed:
            # The verdict stands; a short second search may find a deeper dead end to
            # report than the one the dead-state rule cut short.
            again = _search(m, ops, deadline, report=min(out.iterations, 2 * len(ops)) + 2000)
            if again.valid is False and again.prefix_len > out.prefix_len:
                out = again
        verdicts.append(out.valid)
        if out.valid is False:
            invalid_keys.append(key)
            if counterexample is None:
                # every relevant op's real completion (info, fail) by invoke index
                original = {inv.index: comp for inv, comp in pair_ops(history) if comp is not None}
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
