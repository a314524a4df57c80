"""Did the client notice it lost the lock? (`held`, asked right before the write: -o held_check)

A careful application asks its lock client "do I still hold it?" right before it commits (the
last look before the write, and before each renew). A client whose lease expired, whose
session was lost, or whose background refresh silently re-created its key after another
process was granted the lock must answer no. A `held: true` given after another process was
granted the same lock since this holder's own grant is a finding: the client did not notice
it lost the lock. A `false` there, followed by no write, is the library doing its job: counted.

Judged on mutexes (and read-write locks where both holds are writes); a semaphore's permits
are shared by design. A client that answers `held` unsupported (or has no opinion) leaves no
`held` op: nothing is judged, and the row says so.
"""

from __future__ import annotations

import bisect
from typing import Any, Sequence

from harness.core.contracts.checker import INAPPLICABLE, UNKNOWN, CheckResult
from harness.core.history import NEMESIS, Op

MAX_LISTED = 50


def check_noticed(spec: Any, history: Sequence[Op]) -> CheckResult:
    ops = sorted((o for o in history if o.process not in (NEMESIS, "final")), key=lambda o: (o.time_ns, o.index))
    if str(getattr(spec, "lock", "mutex") or "mutex").startswith("semaphore"):
        why = "not judged for a semaphore: its permits are shared by design"
        return CheckResult(name="noticed", valid=UNKNOWN, summary={"held_answers_judged": 0}, error=why,
                           details={INAPPLICABLE: why})
    invoked: dict[Any, Op] = {}
    grants: dict[Any, tuple[list[int], list[Any]]] = {}  # key -> (exclusive grant times, their processes)
    mine: dict[Any, Op] = {}  # process -> the ok acquire of its current hold
    exclusive: dict[Any, bool] = {}
    answers = said_no = 0
    findings: list[dict] = []
    for op in ops:
        if op.type == "invoke":
            invoked[op.process] = op
            continue
        inv = invoked.pop(op.process, None)
        if op.f == "acquire" and op.type == "ok":
            mode = (inv.mode if inv is not None and inv.mode else op.mode)  # the kind as asked (the invoke)
            exclusive[op.process] = mode != "read"
            mine[op.process] = op
            if exclusive[op.process]:
                times, procs = grants.setdefault(op.key, ([], []))
                times.append(op.time_ns)
                procs.append(op.process)
        elif op.f == "release" and op.type != "invoke":
            mine.pop(op.process, None)
        elif op.f == "held" and op.type == "ok" and op.process in mine:
            answers += 1
            if op.value is False:
                said_no += 1
                continue
            own = mine[op.process]
            if not exclusive.get(op.process, True):
                continue
            asked = inv.time_ns if inv is not None else op.time_ns
            times, procs = grants.get(own.key, ([], []))
            lo, hi = bisect.bisect_right(times, own.time_ns), bisect.bisect_left(times, asked)
            other = next((i for i in range(lo, hi) if procs[i] != op.process), None)
            if other is not None:
                gap = round((asked - times[other]) / 1e9, 3)
                findings.append({"held": _brief(op), "own_grant": _brief(own), "other": procs[other],
                                 "words": f"process {op.process} said it still held {own.key!r} {gap:g} s after "
                                          f"process {procs[other]} was granted it (the client did not notice it lost "
                                          f"the lock)"})
    summary = {"held_answers_judged": answers, "held_false_before_write": said_no,
               "held_true_after_lost": len(findings)}
    if not answers:
        why = ("the client gave no `held` answer (it has no opinion, or answers unsupported): whether it "
               "notices a lost lock was not judged")
        return CheckResult(name="noticed", valid=UNKNOWN, summary=summary, error=why, details={INAPPLICABLE: why})
    return CheckResult(name="noticed", valid=False if findings else True, summary=summary,
                       details={"findings": findings[:MAX_LISTED]})


def _brief(op: Op) -> dict:
    return {"index": op.index, "process": op.process, "time_ns": op.time_ns, "f": op.f, "type": op.type,
            "key": op.key, "value": op.value}
