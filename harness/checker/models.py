"""Sequential specifications for the linearizability checker.

A model is a small state machine: `init` is the starting state, and `step(state, invoke,
completion)` says whether the operation may take effect in `state` (returning the next
state) or not (returning None). States must be immutable and hashable, because the checker
memoises on (set of linearized ops, state) and restores old states when it backtracks.

What each completion type means to a model:

- `ok`: the operation took effect, with the output in the completion (a read's value).
- `fail`: the operation certainly did not take effect. The checker drops these before it
  calls `step`, so a model never sees them. For a `cas` a fail is also a hint (the register
  did not hold `expected` at some point), but dropping it only makes the checker more
  permissive, never wrong: it can miss that one kind of anomaly, it cannot invent one.
- `info` (or no completion at all): the checker calls `step(state, invoke, None)`. The op
  may have taken effect at any time after its invocation, or never; the checker is free
  to leave it out. A model must judge it by its input alone: an unknown read is legal in
  every state, an unknown write must still respect the write's own preconditions.

Ops that `relevant` rejects (nemesis ops, unknown `f` such as "renew") never reach `step`.
A model must not keep mutable state of its own or depend on anything but its arguments.

A model may also be `Compiled`: it describes each op as a `Transition`, "legal only in
state `guard`, leaves state `then`". The checker runs those without a call per step, and
learns from them which ops are read-only (placed as soon as they are legal, without
branching) and which ops need and produce each state (its dead-state rule). The built-in
models derive `step` from `compile`, so the two cannot disagree.
"""

from __future__ import annotations

import abc
import bisect
import functools
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Protocol, runtime_checkable

from harness.core.history import NEMESIS, Op

State = Hashable


def freeze(value: Any) -> Hashable:
    """JSON values as hashable ones: lists become tuples, dicts sorted item tuples."""
    if isinstance(value, list):
        return tuple(freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, freeze(v)) for k, v in value.items()))
    return value


def thaw(value: Any) -> Any:
    """The inverse of `freeze` for reporting: tuples back to JSON lists."""
    if isinstance(value, tuple):
        return [thaw(v) for v in value]
    return value


class _Marker:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


ANY = _Marker("ANY")    # a guard that every state satisfies
KEEP = _Marker("KEEP")  # a `then` that leaves the state as it was


@dataclass(frozen=True, slots=True, kw_only=True)
class Transition:
    """One op as a guarded assignment: legal only when the state equals `guard` (always,
    for ANY), after which the state is `then` (unchanged, for KEEP)."""

    guard: Any = ANY
    then: Any = KEEP

    def apply(self, state: State) -> State | None:
        if self.guard is not ANY and self.guard != state:
            return None
        return state if self.then is KEEP else self.then

    @property
    def read_only(self) -> bool:
        """True if the op never changes the state, in any state where it is legal."""
        return self.then is KEEP or (self.guard is not ANY and self.then == self.guard)


@runtime_checkable
class Compiled(Protocol):
    """Optional capability of a Model: `compile(inv, completion)` is the op's Transition,
    or None for an op only `step` can judge. It must agree with `step` exactly: the
    checker uses whichever it likes for any op (but see `compiler`)."""

    def compile(self, inv: Op, comp: Op | None) -> Transition | None: ...


def compiler(model: Any) -> Callable[[Op, Op | None], Transition | None] | None:
    """The model's `compile`, or None if it is not Compiled or its `step` is overridden
    below the class that defines `compile` (a subclass that changed `step` alone)."""
    if not isinstance(model, Compiled):
        return None
    mro = type(model).__mro__
    owner = {name: next((k for k in mro if name in vars(k)), object) for name in ("compile", "step")}
    return model.compile if issubclass(owner["compile"], owner["step"]) else None


class Model(abc.ABC):
    """Base class of a sequential specification (see the module docstring).

    Subclasses set `name` and `fs` (the op functions they understand) and implement
    `init` and `step`. `prune` may drop ops of unknown outcome that no linearization ever
    needs; it shrinks the search, which otherwise retries each pending info op at every
    turn.
    """

    name: str = "model"
    fs: frozenset[str] = frozenset()

    @property
    @abc.abstractmethod
    def init(self) -> State:
        """The state before any op."""

    def relevant(self, op: Op) -> bool:
        return op.process != NEMESIS and op.f in self.fs

    @abc.abstractmethod
    def step(self, state: State, inv: Op, comp: Op | None) -> State | None:
        """The state after `inv` takes effect in `state`, or None if it cannot (illegal)."""

    def prune(self, ops: list[tuple[Op, Op | None]]) -> list[tuple[Op, Op | None]]:
        """Drop ops no linearization needs. `ops` is one partition as (invoke, completion)
        in invocation order, completion None for unknown outcomes, fails already removed.

        It must only drop ops whose completion is None, and only when every linearization
        that uses the op stays legal without it; anything else could turn a valid history
        into a false alarm. The default drops nothing.
        """
        return ops

    def to_json(self, state: State) -> Any:
        return thaw(state)


@functools.lru_cache(maxsize=1024)
def _mutex_moves(process: Any) -> tuple[Transition, Transition]:
    """The acquire and the release of `process`. Shared, since Transitions are immutable: a
    history has few processes but may have a million ops, each building its own."""
    held = (process,)
    return Transition(guard=(), then=held), Transition(guard=held, then=())


@dataclass(frozen=True, slots=True, kw_only=True)
class Mutex(Model):
    """An owner-aware lock: the state is `()` when free, `(holder_process,)` when held.

    (Not the bare holder, because None is what `step` returns for illegal; `to_json`
    reports the holder or null.) `acquire` is legal only when free and makes the caller
    the holder (not re-entrant); `release` is legal only by the holder and frees it.
    Leases that expire are deliberately not modelled: a TTL lock that lets a second client
    in while the first still holds it is exactly the violation this model exists to report.
    """

    name: str = "mutex"
    fs: frozenset[str] = frozenset({"acquire", "release"})

    @property
    def init(self) -> State:
        return ()

    def compile(self, inv: Op, comp: Op | None) -> Transition:
        if inv.f == "acquire":
            return _mutex_moves(inv.process)[0]
        if inv.f == "release":
            return _mutex_moves(inv.process)[1]
        return Transition()

    def step(self, state: State, inv: Op, comp: Op | None) -> State | None:
        return self.compile(inv, comp).apply(state)

    def prune(self, ops: list[tuple[Op, Op | None]]) -> list[tuple[Op, Op | None]]:
        """Drop unknown acquires whose process has no release that could be linearized
        after them (one that returns at or after the acquire's invocation): once such an
        acquire takes effect nothing else is legal, so it can only come last, and leaving
        it out keeps that linearization legal. This matters: acquire timeouts are common
        under faults, and the search would otherwise retry each one at every turn."""
        last_release: dict = {}
        for inv, comp in ops:
            if inv.f == "release":
                end = comp.time_ns if comp is not None else float("inf")
                last_release[inv.process] = max(end, last_release.get(inv.process, end))
        # The pairs themselves, not new tuples: on a 1M-op history new ones would cost
        # a full garbage collection over everything alive.
        return [p for p in ops
                if not (p[1] is None and p[0].f == "acquire"
                        and last_release.get(p[0].process, -1) < p[0].time_ns)]

    def to_json(self, state: State) -> Any:
        return state[0] if state else None


@dataclass(frozen=True, slots=True, kw_only=True)
class Register(Model):
    """A read/write register holding one value, `initial` (default 0) until written.

    A read that returns null is read as the initial value: an unset key reads back as
    null from Redis or etcd, and a counter that was never written means 0.
    """

    name: str = "register"
    fs: frozenset[str] = frozenset({"read", "write"})
    initial: Any = 0

    @property
    def init(self) -> State:
        return freeze(self.initial)

    def compile(self, inv: Op, comp: Op | None) -> Transition | None:
        if inv.f == "read":
            if comp is None:  # an unknown read observed nothing
                return Transition()
            return Transition(guard=self.init if comp.value is None else freeze(comp.value))
        if inv.f == "write":
            return Transition(then=freeze(inv.value))
        return Transition()

    def step(self, state: State, inv: Op, comp: Op | None) -> State | None:
        return self.compile(inv, comp).apply(state)

    def prune(self, ops: list[tuple[Op, Op | None]]) -> list[tuple[Op, Op | None]]:
        """Drop unknown reads (they observed nothing) and unknown writes, cas included,
        of values nobody observed: once such a write takes effect, only another write can
        follow it legally, so leaving it out keeps every linearization legal. A fenced
        write left out only lowers the max token, which rejects fewer writes."""
        observed = {freeze(self.initial)}
        for inv, comp in ops:
            if inv.f == "read" and comp is not None:
                observed.add(freeze(self.initial) if comp.value is None else freeze(comp.value))
            # every cas, unknown ones too: an unknown write may be what an unknown cas needs
            elif inv.f == "cas" and isinstance(inv.value, (list, tuple)) and inv.value:
                observed.add(freeze(self.initial) if inv.value[0] is None else freeze(inv.value[0]))
        kept = []
        for inv, comp in ops:
            if comp is None:
                if inv.f == "read":
                    continue
                if inv.f == "write" and freeze(inv.value) not in observed:
                    continue
                if (inv.f == "cas" and isinstance(inv.value, (list, tuple)) and len(inv.value) == 2
                        and freeze(inv.value[1]) not in observed):
                    continue
            kept.append((inv, comp))
        return kept


@dataclass(frozen=True, slots=True, kw_only=True)
class CasRegister(Register):
    """A register with compare-and-set: `cas` carries value [expected, new].

    An ok (or info, if it happened) cas is legal only when the register holds `expected`,
    and leaves `new`. A failed cas is dropped (see the module docstring).
    """

    name: str = "cas-register"
    fs: frozenset[str] = frozenset({"read", "write", "cas"})

    def compile(self, inv: Op, comp: Op | None) -> Transition | None:
        if inv.f == "cas":
            pair = inv.value
            if not isinstance(pair, (list, tuple)) or len(pair) != 2:
                raise ValueError(f"op {inv.index}: cas value must be [expected, new], got {pair!r}")
            return Transition(guard=self.init if pair[0] is None else freeze(pair[0]), then=freeze(pair[1]))
        return Register.compile(self, inv, comp)


@dataclass(frozen=True, slots=True, kw_only=True)
class FencedRegister(Register):
    """A register that honours fencing tokens: the state is (value, max accepted token).

    A write with token t takes effect only if t >= the largest token accepted so far
    (an equal token is the same lease writing again), and raises the maximum to t. A
    write without a token is a plain write that leaves the maximum alone. Reads are as for
    `Register`. A write rejected as stale completes `fail` and is dropped; an *ok* write
    whose token is below an earlier accepted one has no legal place, which is the point.
    """

    name: str = "fenced-register"
    fs: frozenset[str] = frozenset({"read", "write"})

    @property
    def init(self) -> State:
        return (freeze(self.initial), None)

    def compile(self, inv: Op, comp: Op | None) -> Transition | None:
        return None  # a guard on the token is not an equality: `step` judges every op

    def step(self, state: State, inv: Op, comp: Op | None) -> State | None:
        value, max_token = state
        if inv.f == "read":
            if comp is None:
                return state
            seen = freeze(self.initial) if comp.value is None else freeze(comp.value)
            return state if seen == value else None
        if inv.f == "write":
            token = inv.token if inv.token is not None else (comp.token if comp is not None else None)
            if token is None:
                return (freeze(inv.value), max_token)
            if max_token is not None and token < max_token:
                return None
            return (freeze(inv.value), token)
        return state

    def to_json(self, state: State) -> Any:
        value, max_token = state
        return {"value": thaw(value), "max_token": max_token}


# ---------------------------------------------------------------- what Transitions imply

def needs(ops: list[tuple[Op, Op | None]], guard: list, then: list) -> tuple:
    """For the checker's dead-state rule, from the Transitions (guard, then) of one
    partition's ops (invoke, ok completion or None): per op the id of the state it needs
    (ok ops with a guard) and of the state it leaves (ops with a `then`), -1 for none; how
    many ops need and produce each id; the ids by state.

    A state that an info op produces never runs out (its count starts at len(ops) + 1),
    and `doomed` does not treat an info op as the only producer of a state. Both only
    weaken what is inferred; they keep a history whose writes are all info ops a hard
    search problem, which test_linearizable.py uses to exercise the time budget."""
    ids: dict = {}
    need_of, prod_of = [], []
    for (_, comp), g, t in zip(ops, guard, then):
        need_of.append(ids.setdefault(g, len(ids)) if g is not ANY and comp is not None else -1)
        prod_of.append(ids.setdefault(t, len(ids)) if t is not KEEP else -1)
    need, prod = [0] * len(ids), [0] * len(ids)
    for (_, comp), j, k in zip(ops, need_of, prod_of):
        if j >= 0:
            need[j] += 1
        if k >= 0:
            prod[k] += 1 if comp is not None else len(ops) + 1
    return need_of, prod_of, need, prod, ids


def doomed(ops: list[tuple[Op, Op | None]], need_of: list, prod_of: list, init_id: int) -> list[bool]:
    """Per op: can it certainly never be placed? An ok op r needing state s is legal only
    after some op w leaves s (or at the start, for the initial state) with nothing placed
    in between that leaves or needs another state. Take the w (invoked before r returns)
    that returns last: if some other ok op x is invoked after it returns and returns
    before r is invoked, and x leaves a state or needs one other than s, then x comes
    between every usable w and r: r is doomed, and the history is not linearizable. When
    one op alone leaves s, every op needing s sits in one stretch after it, so x may come
    after any of them (the one that returns first) instead. Times as in the checker (an
    equal call and return overlap); O(n log n). This settles stale reads and double grants
    at once, where a search would have to exhaust the orders of all the ops before them."""
    inf = float("inf")
    a = [inv.time_ns for inv, _ in ops]
    b = [comp.time_ns if comp is not None else inf for _, comp in ops]
    # Witnesses x: ok ops that leave a state (kind -2, unequal to any need id) or need one.
    xs = sorted((a[i], b[i], -2 if prod_of[i] >= 0 else need_of[i]) for i in range(len(ops))
                if b[i] < inf and (prod_of[i] >= 0 or need_of[i] >= 0))
    starts = [x[0] for x in xs]
    # Over xs[k:]: the earliest return, its kind, and the earliest of another kind.
    suffix = [(inf, -3, inf)] * (len(xs) + 1)
    for k in range(len(xs) - 1, -1, -1):
        _, end, kind = xs[k]
        b1, k1, b2 = suffix[k + 1]
        if end < b1:
            suffix[k] = (end, kind, b1 if k1 != kind else b2)
        else:
            suffix[k] = (b1, k1, min(b2, end) if kind != k1 else b2)
    producers: dict = {init_id: [(-inf, -inf)]}
    for i, j in enumerate(prod_of):
        if j >= 0:
            producers.setdefault(j, []).append((a[i], b[i]))
    latest: dict = {}  # state id -> (producer calls in order, running max of their returns)
    for j, ws in producers.items():
        ws.sort()
        top, run = -inf, []
        for _, end in ws:
            top = max(top, end)
            run.append(top)
        latest[j] = ([w[0] for w in ws], run)
    first: dict = {}  # state id with one producer -> the two earliest returns in its stretch
    for j, ws in producers.items():
        if len(ws) == 1 and j != init_id and ws[0][1] < inf:  # info producers: see needs()
            first[j] = [(ws[0][1], -1), (inf, -1)]
    for r, j in enumerate(need_of):
        if j in first:
            first[j] = sorted(first[j] + [(b[r], r)])[:2]
    out = [False] * len(ops)
    for r, j in enumerate(need_of):
        if j >= 0:
            calls, run = latest.get(j, ((), ()))
            k = bisect.bisect_right(calls, b[r])
            last = run[k - 1] if k else None
            if k and j in first:
                (b1, r1), (b2, _) = first[j]
                last = b1 if r1 != r else b2
            if last is None:
                out[r] = True
            elif last < a[r]:
                b1, k1, b2 = suffix[bisect.bisect_right(starts, last)]
                out[r] = (b1 if k1 != j else b2) < a[r]
    return out


MODELS: dict[str, Model] = {
    "mutex": Mutex(),
    "register": Register(),
    "cas-register": CasRegister(),
    "fenced-register": FencedRegister(),
}
