"""The linearizability checker, proven on golden histories and against a brute-force oracle.

The oracle below shares no code with the checker or its models: it has its own
sequential specifications and tries every order of the ops that respects real time (and
every choice of which info ops happened), without memoisation or pruning.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.core.contracts.checker import UNKNOWN, safe_check
from harness.checker.linearizable import MODELS, LinearizableChecker, check_linearizable
from harness.checker.models import Model
from harness.core.errors import BadArgument
from harness.core.history import Op, read_history
from tests.paths import TESTS

GOLDEN = TESTS / "golden"
INF = float("inf")


def model_of(filename: str) -> str:
    # longest name first, so a future model named after a prefix of another still resolves
    return next(m for m in sorted(MODELS, key=len, reverse=True) if filename.startswith(m + "-"))


def golden_files() -> list[str]:
    return sorted(p.name for p in GOLDEN.glob("*.jsonl"))


class H:
    """A tiny history builder: H().call(p, f, key, value, token).done(p, type, value)."""

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self.t = 0

    def _add(self, **kw) -> "H":
        self.t += 1
        self.ops.append(Op(index=len(self.ops), time_ns=kw.pop("t", self.t), **kw))
        return self

    def call(self, p, f, key="x", value=None, token=None, t=None) -> "H":
        return self._add(process=p, type="invoke", f=f, key=key, value=value, token=token,
                         **({"t": t} if t is not None else {}))

    def done(self, p, type, f, key="x", value=None, t=None) -> "H":
        return self._add(process=p, type=type, f=f, key=key, value=value,
                         **({"t": t} if t is not None else {}))


# ---------------------------------------------------------------- golden histories

def test_every_model_has_ok_and_bad_goldens():
    names = golden_files()
    for m in MODELS:
        assert any(model_of(n) == m and n.endswith("-ok.jsonl") for n in names), m
        assert any(model_of(n) == m and n.endswith("-bad.jsonl") for n in names), m


@pytest.mark.parametrize("filename", golden_files())
def test_golden_verdict(filename):
    result = check_linearizable(read_history(GOLDEN / filename), model_of(filename))
    expected = filename.endswith("-ok.jsonl")
    assert result.valid is expected, (filename, result.summary, result.details)
    json.dumps(result.to_dict())  # the whole result must be JSON-serialisable


def test_counterexample_names_the_stale_read():
    result = check_linearizable(read_history(GOLDEN / "register-bad.jsonl"), "register")
    assert result.valid is False
    ce = result.details["counterexample"]
    assert ce["key"] == "x"
    assert ce["op"]["invoke"]["index"] == 4 and ce["op"]["invoke"]["f"] == "read"
    assert ce["op"]["completion"]["value"] == 1
    assert ce["states"] == [2]
    assert ce["linearized_prefix_len"] == 2
    assert [o["invoke"]["value"] for o in ce["linearized_prefix_tail"]] == [1, 2]
    assert ce["concurrent"] == []
    assert result.summary["invalid_keys"] == ["x"]
    assert set(result.summary) >= {"model", "ops_checked", "partitions", "elapsed_ms"}
    json.dumps(ce)


def test_counterexample_lists_concurrent_ops_and_all_states():
    # two concurrent writes, then a read of a value neither left: both end states reported
    h = (H().call(0, "write", value=1, t=0).call(1, "write", value=2, t=1)
         .done(0, "ok", "write", value=1, t=5).done(1, "ok", "write", value=2, t=6)
         .call(2, "read", t=10).done(2, "ok", "read", value=3, t=11))
    ce = check_linearizable(h.ops, "register").details["counterexample"]
    assert ce["op"]["invoke"]["index"] == 4
    assert sorted(ce["states"]) == [1, 2]
    h2 = (H().call(0, "write", value=1, t=0).call(2, "read", t=1)
          .done(0, "ok", "write", value=1, t=5).done(2, "ok", "read", value=7, t=6))
    ce2 = check_linearizable(h2.ops, "register").details["counterexample"]
    assert ce2["op"]["invoke"]["f"] == "read"
    assert [c["invoke"]["f"] for c in ce2["concurrent"]] == ["write"]


# ---------------------------------------------------------------- budget, partitions, errors

def hard_history(n: int = 22) -> list[Op]:
    """n concurrent info writes of 1..n, reads seeing 1..n in turn, then 1 again: impossible,
    and the search must try very many subsets of the info writes to learn that."""
    h = H()
    for v in range(1, n + 1):
        h.call(100 + v, "write", value=v)
    for v in list(range(1, n + 1)) + [1]:
        h.call(0, "read").done(0, "ok", "read", value=v)
    return h.ops


def test_time_budget_gives_unknown():
    # How promptly the budget is kept is measured, not asserted: benchmarks/checker_budget.py
    result = check_linearizable(hard_history(40), "register", time_limit=0.05)
    assert result.valid == UNKNOWN
    assert result.summary["unknown_keys"] == ["x"]
    assert "time limit" in result.details["reason"]


def test_hard_history_is_invalid_given_time():
    result = check_linearizable(hard_history(4), "register", time_limit=10)
    assert result.valid is False


def test_p_compositionality_names_the_bad_key():
    h = H()
    h.call(0, "write", key="a", value=1).done(0, "ok", "write", key="a", value=1)
    h.call(1, "write", key="b", value=1).done(1, "ok", "write", key="b", value=1)
    h.call(0, "read", key="a").done(0, "ok", "read", key="a", value=1)
    h.call(1, "read", key="b").done(1, "ok", "read", key="b", value=0)  # stale
    result = check_linearizable(h.ops, "register")
    assert result.valid is False
    assert result.summary["partitions"] == 2
    assert result.summary["invalid_keys"] == ["b"]
    assert result.details["counterexample"]["key"] == "b"
    good = [o for o in h.ops if o.key == "a"]
    assert check_linearizable(good, "register").valid is True


def test_values_seen_on_another_key_do_not_help():
    # key b reads 1, which was only written to key a: invalid once keys are separate
    h = H()
    h.call(0, "write", key="a", value=1).done(0, "ok", "write", key="a", value=1)
    h.call(1, "read", key="b").done(1, "ok", "read", key="b", value=1)
    assert check_linearizable(h.ops, "register").valid is False


class Boom(Model):
    name = "boom"
    fs = frozenset({"read", "write"})

    @property
    def init(self):
        return 0

    def step(self, state, inv, comp):
        raise RuntimeError("model exploded")


def test_crashing_model_is_unknown_through_safe_check():
    h = H().call(0, "write", value=1).done(0, "ok", "write", value=1)
    result = safe_check(LinearizableChecker(Boom(), time_limit=1), None, h.ops)
    assert result.valid == UNKNOWN
    assert "model exploded" in result.error
    assert result.name == "linearizable-boom"


def test_unknown_model_name_is_a_clear_error():
    with pytest.raises(BadArgument, match="choose one of: mutex, register"):
        check_linearizable([], "regsiter")


def test_empty_history_and_ignored_ops():
    assert check_linearizable([], "mutex").valid is True
    h = (H().call("nemesis", "partition", key=None).done("nemesis", "info", "partition", key=None)
         .call(0, "acquire", key="L").done(0, "ok", "acquire", key="L")
         .call(0, "renew", key="L").done(0, "ok", "renew", key="L")
         .call(0, "release", key="L").done(0, "ok", "release", key="L"))
    result = LinearizableChecker("mutex").check(None, h.ops)
    assert result.valid is True and result.summary["ops_checked"] == 2


def test_long_sequential_history_needs_no_recursion():
    h = H()
    for v in range(1, 10001):
        h.call(v % 5, "write", value=v).done(v % 5, "ok", "write", value=v)
        h.call((v + 1) % 5, "read").done((v + 1) % 5, "ok", "read", value=v)
    result = check_linearizable(h.ops, "register", time_limit=20)
    assert result.valid is True and result.summary["ops_checked"] == 20000


# ---------------------------------------------------------------- brute-force oracle

def spec(model: str, state, inv: Op, comp: Op | None):
    """(legal, next state) of one op, written independently of harness.checker.models."""
    out = comp.value if comp is not None else None
    if model == "mutex":
        if inv.f == "acquire":
            return state is None, inv.process
        return state == inv.process, None
    if model == "fenced-register":
        value, top = state
        if inv.f == "read":
            return comp is None or (0 if out is None else out) == value, state
        if inv.token is None:
            return True, (inv.value, top)
        return top is None or inv.token >= top, (inv.value, inv.token)
    if inv.f == "read":
        return comp is None or (0 if out is None else out) == state, state
    if inv.f == "write":
        return True, inv.value
    expected, new = inv.value
    return state == expected, new


def oracle(model: str, history: list[Op]) -> bool:
    """Try every real-time-respecting order of the ok ops, with any subset of info ops."""
    pending: dict = {}
    pairs = []
    for op in history:
        if op.type == "invoke":
            pending[op.process] = len(pairs)
            pairs.append([op, None])
        else:
            pairs[pending.pop(op.process)][1] = op
    ops = []
    for inv, comp in pairs:
        if comp is not None and comp.type == "fail":
            continue
        ok = comp is not None and comp.type == "ok"
        ops.append((inv, comp if ok else None, inv.time_ns, comp.time_ns if ok else INF))
    must = {i for i, o in enumerate(ops) if o[1] is not None}
    init = (0, None) if model == "fenced-register" else (None if model == "mutex" else 0)

    def search(placed: frozenset, state) -> bool:
        if must <= placed:
            return True
        for i, (inv, comp, _, _) in enumerate(ops):
            if i in placed:
                continue
            # every ok op that returned before i was invoked must already be placed
            if any(j not in placed and ops[j][3] < inv.time_ns for j in must):
                continue
            legal, nxt = spec(model, state, inv, comp)
            if legal and search(placed | {i}, nxt):
                return True
        return False

    return search(frozenset(), init)


class Script:
    """Choices read from one drawn byte string: one Hypothesis draw per history instead of
    hundreds keeps 1,200 examples fast, and bytes still shrink towards choice 0."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    @property
    def exhausted(self) -> bool:
        return self.pos >= len(self.data)

    def pick(self, options: list):
        b = self.data[self.pos] if self.pos < len(self.data) else 0
        self.pos += 1
        return options[b % len(options)]


@st.composite
def histories(draw, model: str) -> list[Op]:
    """Run a real object with each op taking effect at a chosen instant inside its interval
    (so the history is linearizable), then maybe corrupt a completion or two."""
    s = Script(draw(st.binary(min_size=48, max_size=160)))
    n_procs = s.pick([1, 2, 3, 4])
    n_ops = s.pick(list(range(1, 9)))
    small = [0, 1, 2]
    fs = {"mutex": ["acquire", "release"], "register": ["read", "write"],
          "cas-register": ["read", "write", "cas"], "fenced-register": ["read", "write"]}[model]
    state = (0, None) if model == "fenced-register" else (None if model == "mutex" else 0)
    procs = list(range(n_procs))
    next_proc = n_procs
    inflight: dict = {}  # process -> [invoke op, applied?, result value, legal?]
    ops: list[Op] = []
    t = 0
    invoked = 0
    while (invoked < n_ops or inflight) and not s.exhausted:  # the rest stays in flight
        t += s.pick([1, 0])  # equal timestamps happen, and count as concurrent
        idle = [p for p in procs if p not in inflight]
        choices = (["invoke"] if invoked < n_ops and idle else []) + \
                  (["apply", "complete"] if inflight else [])
        action = s.pick(choices)
        if action == "invoke":
            p = s.pick(idle)
            f = s.pick(fs)
            value = token = None
            if f == "write":
                value = s.pick(small)
                if model == "fenced-register":
                    token = s.pick([None] + small)
            elif f == "cas":
                value = [s.pick(small), s.pick(small)]
            inv = Op(index=len(ops), time_ns=t, process=p, type="invoke", f=f, key="x",
                     value=value, token=token)
            ops.append(inv)
            inflight[p] = [inv, False, None, False]
            invoked += 1
            continue
        p = s.pick(sorted(inflight))
        slot = inflight[p]
        inv = slot[0]
        if action == "apply":
            if not slot[1]:
                legal, nxt = spec(model, state, inv, None)
                slot[1], slot[3] = True, legal
                if legal:
                    slot[2] = state if model != "fenced-register" else state[0]
                    state = nxt
            continue
        # complete: ok only if it took effect, fail only if it did not, info either way
        kind = s.pick(["ok", "ok", "info"] if slot[1] and slot[3] else ["fail", "fail", "info"])
        value = slot[2] if inv.f == "read" and kind == "ok" else inv.value
        ops.append(Op(index=len(ops), time_ns=t, process=p, type=kind, f=inv.f, key="x",
                      value=value, token=inv.token))
        del inflight[p]
        if kind == "info":  # as the harness does: the process is retired
            procs[procs.index(p)] = next_proc
            next_proc += 1
    completions = [i for i, o in enumerate(ops) if o.type != "invoke"]
    for _ in range(draw(st.integers(0, 2)) if completions else 0):
        o = ops[i := draw(st.sampled_from(completions))]
        ops[i] = Op(index=o.index, time_ns=o.time_ns, process=o.process,
                    type=draw(st.sampled_from(["ok", "fail", "info"])), f=o.f, key=o.key,
                    value=draw(st.sampled_from(small)) if o.f == "read" else o.value, token=o.token)
    return ops


@pytest.mark.parametrize("model", ["register", "cas-register", "mutex", "fenced-register"])
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_agrees_with_brute_force_oracle(model, data):
    history = data.draw(histories(model))
    expected = oracle(model, history)
    result = check_linearizable(history, model, time_limit=30)
    assert result.valid is expected, [o.to_dict() for o in history]
