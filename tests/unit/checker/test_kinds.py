"""Exclusion of the rw lock and the semaphore on golden histories (tests/golden/kinds/), and
their linearizability models against a brute-force oracle."""

import itertools
import random

import pytest

from harness.checker.kinds import RwLock, Semaphore, check_exclusion, check_linearizable_lock
from harness.checker.linearizable import check_linearizable
from harness.checker.lock import check_stats, check_writes
from harness.checker.policy import verdicts
from harness.core.errors import BadArgument
from harness.core.history import Op, read_history
from harness.core.kinds import of_history
from harness.core.spec import TestSpec
from tests.paths import TESTS

GOLDEN = TESTS / "golden" / "kinds"
FILES = sorted(p.name for p in GOLDEN.glob("*.jsonl"))


def load(name: str) -> list[Op]:
    return read_history(GOLDEN / name)


@pytest.mark.parametrize("name", FILES)
def test_golden_verdicts_of_exclusion_and_linearizability(name):
    h = load(name)
    expected = name.endswith("-ok.jsonl")
    assert check_exclusion(None, h).valid is expected
    lin = check_linearizable_lock(None, h)
    assert lin.valid is expected
    assert lin.summary["model"] == name.split("-")[0]


def test_readers_overlapping_is_the_lock_working_and_is_counted():
    r = check_exclusion(None, load("rw-readers-ok.jsonl"))
    assert r.summary["lock"] == "rw" and r.summary["reader_overlaps"] == 1 and r.summary["read_windows"] == 3
    assert [w[5] for w in r.details["windows"]] == ["read", "read", "write", "read"]


def test_a_writer_over_a_reader_is_one_violation_naming_both():
    r = check_exclusion(None, load("rw-writer-over-reader-bad.jsonl"))
    assert r.summary["violations"] == 1
    o = r.details["overlaps"][0]
    assert o["modes"] == ["read", "write"] and o["overlap_ms"] == pytest.approx(5.0)  # 5 ms to 10 ms


def test_two_writers_also_lose_an_update():
    h = load("rw-two-writers-bad.jsonl")
    assert check_exclusion(None, h).summary["violations"] == 1
    assert check_writes(None, h).summary["lost_updates"] == 1


def test_exactly_n_holders_is_valid_and_n_plus_one_is_not():
    ok = check_exclusion(None, load("semaphore-full-ok.jsonl"))
    assert ok.summary["max_holders"] == 2 and ok.summary["permits"] == 2 and ok.summary["lock"] == "semaphore:2"
    bad = check_exclusion(None, load("semaphore-over-bad.jsonl"))
    assert bad.summary["violations"] == 1 and bad.summary["max_holders"] == 3
    assert bad.details["overlaps"][0]["holders"] == 3


def test_readers_and_permit_holders_count_as_critical_sections():
    assert check_stats(None, load("rw-readers-ok.jsonl")).summary["critical_sections"] == 4  # 3 reads, 1 write
    assert check_stats(None, load("semaphore-full-ok.jsonl")).summary["critical_sections"] == 3


def test_the_run_verdict_reads_the_kind_from_the_history():
    spec = TestSpec(backend="zookeeper-recipe", lock="rw")
    v = verdicts(spec, load("rw-readers-ok.jsonl"))
    assert v["mutex"].valid is True and v["linearizable-mutex"].valid is True
    # the same readers judged as a mutex (modes stripped) overlap
    stripped = [Op(**{**{k: getattr(o, k) for k in Op.__dataclass_fields__}, "mode": None}) for o in load("rw-readers-ok.jsonl")]
    assert verdicts(spec, stripped)["mutex"].valid is False


def test_a_history_that_mixes_kinds_is_refused():
    h = load("rw-readers-ok.jsonl") + [Op(index=100, time_ns=10**9, process=9, type="invoke", f="acquire", key="lock", permits=2)]
    with pytest.raises(BadArgument, match="mix lock kinds"):
        of_history(h)


# ---------------------------------------------------------------- brute-force oracle

def _legal(kind: str, permits: int, holders: dict, inv: Op) -> dict | None:
    """The holders (process -> mode) after inv, or None; written apart from the models."""
    p = inv.process
    if inv.f == "release":
        return {q: m for q, m in holders.items() if q != p} if p in holders else None
    if p in holders:
        return None
    if kind == "semaphore":
        return {**holders, p: "permit"} if len(holders) < permits else None
    if inv.mode == "read":
        return {**holders, p: "read"} if all(m == "read" for m in holders.values()) else None
    return {p: "write"} if not holders else None


def oracle(kind: str, permits: int, ops: list[tuple[Op, Op | None]]) -> bool:
    must = [i for i, (_, c) in enumerate(ops) if c is not None]
    for n in range(len(ops) + 1):
        for chosen in itertools.combinations(range(len(ops)), n):
            if not set(must) <= set(chosen):
                continue
            for order in itertools.permutations(chosen):
                pos = {i: k for k, i in enumerate(order)}
                # real time: an op that completed before another was invoked comes first
                if any(ops[a][1] is not None and ops[a][1].time_ns < ops[b][0].time_ns and pos[a] > pos[b]
                       for a in chosen for b in chosen):
                    continue
                holders: dict | None = {}
                for i in order:
                    holders = _legal(kind, permits, holders, ops[i][0])
                    if holders is None:
                        break
                if holders is not None:
                    return True
    return False


def random_history(rng: random.Random, kind: str, permits: int) -> tuple[list[Op], list[tuple[Op, Op | None]]]:
    ops, pairs, t = [], [], 0
    for p in range(rng.randint(2, 3)):
        t = rng.randint(0, 4)
        for f in ("acquire", "release")[: rng.randint(1, 2)]:
            mode = rng.choice(["read", "write"]) if kind == "rw" and f == "acquire" else None
            extra = {"permits": permits} if kind == "semaphore" and f == "acquire" else {}
            inv = Op(time_ns=t, process=p, type="invoke", f=f, key="x", mode=mode, **extra)
            t += rng.randint(0, 4)
            ty = rng.choice(["ok", "ok", "ok", "info"])
            comp = Op(time_ns=t, process=p, type=ty, f=f, key="x", mode=mode, **extra)
            t += rng.randint(0, 3)
            ops += [inv, comp]
            pairs.append((inv, comp if ty == "ok" else None))
    ops.sort(key=lambda o: o.time_ns)
    return [o.with_index(i) for i, o in enumerate(ops)], pairs


@pytest.mark.parametrize("kind,permits", [("rw", 1), ("semaphore", 1), ("semaphore", 2)])
def test_models_agree_with_brute_force_oracle(kind, permits):
    rng = random.Random(28)
    model = RwLock() if kind == "rw" else Semaphore(permits=permits)
    seen = set()
    for _ in range(400):
        history, pairs = random_history(rng, kind, permits)
        expected = oracle(kind, permits, pairs)
        seen.add(expected)
        assert check_linearizable(history, model, time_limit=30).valid is expected, [o.to_dict() for o in history]
    assert seen == {True, False}  # the generator reaches both verdicts


def test_the_mode_is_read_from_the_invoke_as_the_model_does():
    """Issue 37: exclusion read `mode` only from the acquire's ok, the model from its invoke; a
    history that carries it on the invoke alone (a foreign one) made its readers writers."""
    r = check_exclusion(None, load("rw-mode-on-invoke-ok.jsonl"))
    assert r.valid is True and r.summary["reader_overlaps"] == 1 and r.summary["read_windows"] == 3
    assert [w[5] for w in r.details["windows"]] == ["read", "read", "write", "read"]
