"""`-o resource=none` (the lock cycle alone) made `writes` pass vacuously (issue 37): with no
read or write by a holder there is nothing for it to judge, so its row is "unknown" with the
reason (details "inapplicable"), and the run's verdict comes from mutual exclusion and the
lock's other promises. With --fencing the verdict is the data's, so that pair is refused."""

import pytest

from harness.checker.lock import check_writes
from harness.checker.policy import summarize, verdicts
from harness.core.errors import BadArgument
from harness.core.history import Op
from harness.core.spec import TestSpec

S = 1_000_000_000
SPEC = TestSpec(backend="redis", ttl_ms=2000, facts={"validity": "from-grant"})


def cycles(n: int, key: str = "lock", first: int = 0) -> list[Op]:
    ops: list[Op] = []
    for k in range(n):
        t, p = (first + k) * S, k % 2
        ops += [Op(index=0, time_ns=t, process=p, type="invoke", f="acquire", key=key),
                Op(index=0, time_ns=t + 1000, process=p, type="ok", f="acquire", key=key, valid_until_ns=t + 2 * S),
                Op(index=0, time_ns=t + S // 2, process=p, type="invoke", f="release", key=key),
                Op(index=0, time_ns=t + S // 2 + 1000, process=p, type="ok", f="release", key=key)]
    return ops


def numbered(ops: list[Op]) -> list[Op]:
    from dataclasses import replace

    return [replace(o, index=i) for i, o in enumerate(sorted(ops, key=lambda o: o.time_ns))]


def final(t: int, key: str = "lock", value: int = 0) -> list[Op]:
    return [Op(index=0, time_ns=t, process="final", type="invoke", f="read", key=f"{key}:counter"),
            Op(index=0, time_ns=t + 1, process="final", type="ok", f="read", key=f"{key}:counter", value=value)]


def test_writes_is_not_judged_when_no_holder_touched_the_resource():
    h = numbered(cycles(4) + final(10 * S))
    r = check_writes(SPEC, h)
    assert r.valid == "unknown" and "inapplicable" in r.details and r.summary["lost_updates"] is None
    s = summarize(SPEC, verdicts(SPEC, h), None, {"started": True})
    assert s["valid"] is True and s["checkers"]["writes"] == "unknown"  # judged on exclusion and the rest
    assert "stale writes and lost updates are not judged" in s["not_judged"]["writes"]


def test_a_key_without_writes_beside_one_with_them_leaves_writes_judged():
    from harness.checker.keys import per_key

    w = [Op(index=0, time_ns=20 * S + S // 10, process=0, type="invoke", f="read", key="b:counter"),
         Op(index=0, time_ns=20 * S + S // 10 + 1, process=0, type="ok", f="read", key="b:counter", value=0),
         Op(index=0, time_ns=20 * S + S // 5, process=0, type="invoke", f="write", key="b:counter", value=1),
         Op(index=0, time_ns=20 * S + S // 5 + 1, process=0, type="ok", f="write", key="b:counter", value=1)]
    h = numbered(cycles(2, "a") + cycles(1, "b", first=20) + w + final(30 * S, "a") + final(30 * S + 5, "b", 1))
    r = per_key(check_writes)(TestSpec(backend="redis", keys=2), h)
    assert r.valid is True and r.summary["writes_ok"] == 1


def test_fencing_with_no_resource_is_refused():
    with pytest.raises(BadArgument, match="--fencing makes the verdict the data's"):
        TestSpec(backend="redis", fencing=True, options={"resource": "none"}).validate()
