"""Two properties of a lock design that are not safety: fairness and reentrancy.

Fairness: do grants follow the order in which waiters asked? A grant *overtakes* a waiter
when the waiter invoked its acquire earlier (by more than `margin_ms`, so two requests
racing to the server are not counted) and was still waiting when the grant completed: it
completed later, or never. A FIFO queue (ZooKeeper's sequential znodes, etcd's revisions)
overtakes nobody; SET NX polling overtakes whoever happens to be sleeping between polls.
The checker measures: the share of grants that overtook at least one waiter, and the
worst overtake (the most waiters one grant overtook). It judges nothing (valid is True);
the articles' claim is what the numbers are held against.

Reentrancy: with `--reenter`, a holder asks for the lock it holds again (`reacquire`,
with a short timeout) and, if it gets it, gives the inner acquisition back (`rerelease`)
before its own release. Each reacquire succeeds (ok), blocks (fails after waiting; some
libraries give up before the timeout, kazoo's own retry deadline among them) or refuses
(fails at once: within a fifth of the timeout). Invalid: an inner release that freed
the outer lock (the holder's own release then finds it gone, or another process takes
the key before it), or a reacquire granted while another process held the key.
"""

from __future__ import annotations

import bisect
from collections import Counter
from typing import Any, Sequence

from harness.core.contracts.checker import CheckResult
from harness.core.history import NEMESIS, Op, pair_ops

MARGIN_MS = 5.0
REFUSED_SHARE = 0.2  # a failed reacquire that waited less than this share of its timeout refused
REENTER_TIMEOUT_S = 0.5  # how long a reacquire may wait (the worker's; the checker reads it back)


def check_fairness(spec: Any, history: Sequence[Op], margin_ms: float = MARGIN_MS) -> CheckResult:
    acquires = []  # (invoke_ns, completion_ns or inf, granted, key)
    inf = float("inf")
    for inv, done in pair_ops(history):
        if inv.process == NEMESIS or inv.f != "acquire":
            continue
        acquires.append((inv.time_ns, done.time_ns if done is not None else inf,
                         done is not None and done.type == "ok", inv.key))
    by_key: dict[Any, list] = {}
    for a in acquires:
        by_key.setdefault(a[3], []).append(a)
    margin = int(margin_ms * 1e6)
    grants = overtaking = worst = 0
    overtaken_total = 0
    for ops in by_key.values():
        ops.sort()
        waiting: list[float] = []  # completion times of the acquires invoked early enough, sorted
        j = 0
        for inv_ns, done_ns, granted, _ in ops:
            while j < len(ops) and ops[j][0] < inv_ns - margin:
                bisect.insort(waiting, ops[j][1])
                j += 1
            if not granted:
                continue
            grants += 1
            n = len(waiting) - bisect.bisect_right(waiting, done_ns)  # asked earlier, still waiting
            if n:
                overtaking += 1
                overtaken_total += n
                worst = max(worst, n)
    return CheckResult(name="fairness", valid=True, summary={
        "grants": grants, "overtaking_grants": overtaking,
        "overtake_share": round(overtaking / grants, 4) if grants else None,
        "worst_overtake": worst, "waiters_overtaken": overtaken_total, "fairness_margin_ms": margin_ms})


def check_reentrancy(spec: Any, history: Sequence[Op]) -> CheckResult:
    timeout_ns = min(REENTER_TIMEOUT_S, getattr(spec, "acquire_timeout", REENTER_TIMEOUT_S)) * 1e9
    outcomes: Counter = Counter()
    problems: list[dict] = []
    holding: dict[Any, set] = {}  # key -> processes holding it (outer holds)
    inner_freed: dict[Any, Op] = {}  # process -> its ok rerelease, until its own release shows what it did
    pending: dict[Any, Op] = {}
    for op in sorted(history, key=lambda o: (o.time_ns, o.index)):
        if op.process == NEMESIS:
            continue
        p = op.process
        if op.type == "invoke":
            pending[p] = op
            if op.f == "release":
                holding.get(op.key, set()).discard(p)
            continue
        inv = pending.pop(p, None)
        if op.f == "acquire" and op.type == "ok":
            others = holding.setdefault(op.key, set()) - {p}
            freed = [q for q in others if q in inner_freed]
            for q in freed:
                problems.append({"problem": "an inner release freed the outer lock: another process took the key",
                                 "rerelease": inner_freed.pop(q).index, "acquire": op.index})
            holding[op.key].add(p)
        elif op.f == "reacquire" and inv is not None:
            waited = op.time_ns - inv.time_ns
            kind = ("succeeds" if op.type == "ok" else "unknown" if op.type == "info"
                    else "refuses" if waited < REFUSED_SHARE * timeout_ns else "blocks")
            outcomes[kind] += 1
            if op.type == "ok" and holding.get(op.key, set()) - {p}:
                problems.append({"problem": "a reacquire was granted while another process held the key",
                                 "reacquire": op.index})
        elif op.f == "rerelease" and op.type == "ok":
            inner_freed[p] = op
        elif op.f == "release":
            outer = inner_freed.pop(p, None)
            if outer is not None and op.type == "fail":
                problems.append({"problem": "an inner release freed the outer lock: the holder's own release "
                                            "found it gone", "rerelease": outer.index, "release": op.index})
    total = sum(outcomes.values())
    behaviour = None
    if total:
        main, n = outcomes.most_common(1)[0]
        behaviour = main if n >= 0.9 * total else "mixed"
    return CheckResult(name="reentrancy", valid=not problems, summary={
        "reacquires": total, "reentrant_behaviour": behaviour, **{f"reacquire_{k}": outcomes[k]
                                                                  for k in ("succeeds", "blocks", "refuses", "unknown")},
        "reentrancy_problems": len(problems)}, details={"problems": problems[:200]})
