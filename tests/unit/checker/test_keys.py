"""Several lock keys in one run: each key is checked alone and the results merged."""

from harness.checker.keys import lock_key, merge, split
from harness.checker.policy import summarize, verdicts
from harness.core.history import NEMESIS, Op
from harness.core.spec import TestSpec

MS = 1_000_000


def history(overlap_same_key: bool) -> list[Op]:
    """Processes 0 and 1 hold at the same time: on keys a and b, or both on a."""
    h: list[Op] = []

    def op(ms, proc, type_, f, key, value=None, token=None):
        t = 10**9 + ms * MS  # a grant's lease is valid for the TTL (2 s)
        h.append(Op(index=len(h), time_ns=t, process=proc, type=type_, f=f, key=key, value=value,
                    token=token, valid_until_ns=t + 2000 * MS if (f, type_) == ("acquire", "ok") else None))

    k1 = "lk-0"
    k2 = "lk-0" if overlap_same_key else "lk-1"
    op(0, NEMESIS, "invoke", "kill", None)
    op(1, 0, "invoke", "acquire", k1)
    op(2, 0, "ok", "acquire", k1, value="v0", token=1)
    op(3, 1, "invoke", "acquire", k2)
    op(4, 1, "ok", "acquire", k2, value="v1", token=1 if k2 != k1 else 2)
    for proc, k in ((0, k1), (1, k2)):
        op(5 + proc * 4, proc, "invoke", "read", f"{k}:counter")
        op(6 + proc * 4, proc, "ok", "read", f"{k}:counter", value=0)
        op(7 + proc * 4, proc, "invoke", "write", f"{k}:counter", value=1)
        op(8 + proc * 4, proc, "ok", "write", f"{k}:counter", value=1)
    op(20, 0, "invoke", "release", k1, value="v0")
    op(21, 0, "ok", "release", k1, value="v0")
    op(22, 1, "invoke", "release", k2, value="v1")
    op(23, 1, "ok", "release", k2, value="v1")
    op(24, NEMESIS, "ok", "kill", None)
    # Each key's counter: 1 (one increment each), or, with both on lk-0, 1 there (one of
    # its two increments lost) and 0 on the untouched lk-1.
    finals = {"lk-0": 1, "lk-1": 0 if overlap_same_key else 1}
    for k, value in finals.items():
        op(30, "final", "invoke", "read", f"{k}:counter")
        op(31, "final", "ok", "read", f"{k}:counter", value=value)
    return h


def judged(h: list[Op]) -> dict:
    spec = TestSpec(backend="redis", keys=2)
    return summarize(spec, verdicts(spec, h), None, {"started": True})


def test_holds_on_different_keys_at_once_are_no_violation():
    s = judged(history(overlap_same_key=False))
    assert s["valid"] is True and s["violations"] == 0 and s["keys"] == 2
    assert s["writes_ok"] == 2 and s["final_counter"] == 2 and s["lost_updates"] == 0


def test_two_holders_of_one_key_are_a_violation_of_that_key():
    h = history(overlap_same_key=True)
    spec = TestSpec(backend="redis", keys=2)
    res = verdicts(spec, h)
    assert res["mutex"].valid is False and res["mutex"].summary["violations"] == 1
    assert res["mutex"].details["invalid_keys"] == ["lk-0"]
    assert res["mutex"].details["per_key"]["lk-0"]["valid"] is False
    # one write lost on lk-0: two accepted increments, the counter says 1
    assert res["writes"].valid is False and res["writes"].summary["lost_updates"] == 1


def test_a_single_key_run_is_checked_as_before():
    spec = TestSpec(backend="redis")
    res = verdicts(spec, history(overlap_same_key=False))
    assert res["mutex"].valid is False  # one lock: the two holds overlap
    assert "keys" not in res["mutex"].summary


def test_split_keeps_keyless_ops_in_every_part_and_merge_combines_counts():
    parts = split(history(overlap_same_key=False))
    assert sorted(parts) == ["lk-0", "lk-1"]
    assert all(sum(o.process == NEMESIS for o in p) == 2 for p in parts.values())
    assert lock_key("a:counter") == "a" and lock_key("a") == "a" and lock_key(None) is None
    assert split([o for o in history(False) if o.key in (None, "lk-0", "lk-0:counter")]) is None
    from harness.core.contracts.checker import CheckResult

    m = merge({"a": CheckResult(name="x", valid=True, summary={"n": 1, "max_ms": 3.0, "span": [1.0, 2.0],
                                                                  "by": {"c": 1}, "lost": 0}),
               "b": CheckResult(name="x", valid="unknown", summary={"n": 2, "max_ms": 1.0, "span": [0.5, 1.5],
                                                                      "by": {"c": 2, "d": 1}, "lost": None})})
    assert m.valid == "unknown" and m.summary["n"] == 3 and m.summary["max_ms"] == 3.0
    assert m.summary["span"] == [0.5, 2.0] and m.summary["by"] == {"c": 3, "d": 1} and m.summary["lost"] is None
