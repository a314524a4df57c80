"""No history with a checker that raises can produce VALID (issue 37): whichever checker of
the registry crashes, on whatever history, the run's verdict is "unknown" (or INVALID, when
another checker proved a violation), never VALID."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from harness.checker import policy
from harness.core.history import Op
from harness.core.spec import TestSpec

S = 1_000_000_000
NAMES = [e.name for e in policy.entries(TestSpec(backend="redis", ttl_ms=2000))]


@st.composite
def histories(draw) -> list[Op]:
    """Rounds of acquire/release by a few processes, some failing, some in doubt, some with a
    validity, with an occasional fault: small, and valid as often as not."""
    ops: list[Op] = []
    t = 0
    for _ in range(draw(st.integers(1, 6))):
        p = draw(st.sampled_from([0, 1, "w2"]))
        t += draw(st.integers(1, 3 * S))
        outcome = draw(st.sampled_from(["ok", "ok", "fail", "info"]))
        ops.append(Op(index=len(ops), time_ns=t, process=p, type="invoke", f="acquire", key="lock"))
        t += draw(st.integers(1, S // 10))
        validity = draw(st.sampled_from([None, 2 * S]))
        ops.append(Op(index=len(ops), time_ns=t, process=p, type=outcome, f="acquire", key="lock",
                      valid_until_ns=t + validity if outcome == "ok" and validity else None))
        if outcome == "ok":
            t += draw(st.integers(1, S))
            ops.append(Op(index=len(ops), time_ns=t, process=p, type="invoke", f="release", key="lock"))
            t += 1000
            ops.append(Op(index=len(ops), time_ns=t, process=p, type=draw(st.sampled_from(["ok", "info"])),
                          f="release", key="lock"))
        if draw(st.booleans()):
            ops.append(Op(index=len(ops), time_ns=t + 1, process="nemesis", type="invoke", f="partition"))
            ops.append(Op(index=len(ops), time_ns=t + 2, process="nemesis", type="ok", f="partition"))
            t += draw(st.integers(3, S))
            ops.append(Op(index=len(ops), time_ns=t, process="nemesis", type="invoke", f="heal"))
            ops.append(Op(index=len(ops), time_ns=t + 1, process="nemesis", type="ok", f="heal"))
            t += 1
    return ops


@settings(max_examples=60, deadline=None)
@given(h=histories(), crashing=st.sampled_from([n for n in NAMES if n != "stats" and n != "grants"]))
def test_no_history_with_a_checker_raising_is_valid(h, crashing):
    spec = TestSpec(backend="redis", ttl_ms=2000, acquire_timeout=2.0, facts={"validity": "from-grant"})

    def boom(spec, history):
        raise RuntimeError(f"{crashing} crashed")

    real = policy.entries

    def entries(s):
        return [policy.Entry(name=e.name, check=boom, decides=e.decides) if e.name == crashing else e for e in real(s)]

    policy.entries = entries
    try:
        s = policy.summarize(spec, policy.verdicts(spec, h), None, {"started": True})
    finally:
        policy.entries = real
    assert s["valid"] is not True
    if s["valid"] == "unknown" and "unknown_reason" in s and "crashed" not in s["unknown_reason"]:
        # unknown for a reason of its own (no critical section): the crash is still in its row
        assert s["not_judged"][crashing] == f"RuntimeError: {crashing} crashed"


def test_every_deciding_checker_is_drawn():
    assert {"mutex", "liveness", "outlived", "fresh-leases", "held"} <= set(NAMES)
