"""Lock checkers: mutual exclusion, lost updates, stale writes, and acquire latency.

A process *holds* the lock from the completion of its `ok` acquire until it invokes its
release (or until the end of the history, if it never does). That is the window in
which the client believes it is the holder and may touch the resource. Two windows of
different processes that overlap are a mutual-exclusion violation, whatever the
servers believed; the overlap is reported in ms with the ops that bound it.

A write is *stale* when another process completed an acquire after the writer's own
acquire and before the write was invoked: the writer's lock had been superseded.
Fencing is judged by what happened to stale writes: rejected (`fail`, stale-token) or
accepted (`ok`), and by the tokens of accepted writes, which must never go down in the
order the writes completed (without fencing, writes that landed out of token order are
counted: the data a fenced store would have refused). Lost updates: the final counter must equal the number of accepted
increments (info writes may or may not count).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any, Sequence

from harness.core.contracts.checker import INAPPLICABLE, UNKNOWN, CheckResult
from harness.checker.causes import Attribution, by_cause
from harness.core.history import NEMESIS, Op, begins_hold, ends_hold, pair_ops

MAX_LISTED = 200
MAX_CAUSES = 20_000  # (first, second, cause) of each violation, compact, for ops.csv


@dataclass(frozen=True, slots=True, kw_only=True)
class Window:
    process: Any
    start_ns: int
    end_ns: int | None  # None: never released
    acquire: Op
    release: Op | None
    token: int | None


def holding_windows(history: Sequence[Op]) -> list[Window]:
    """Every window in which a process believed it held the lock."""
    wins: list[Window] = []
    open_: dict[Any, Op] = {}
    for op in sorted(history, key=lambda o: (o.time_ns, o.index)):
        if op.process == NEMESIS:
            continue
        if begins_hold(op.f, op.type):
            open_[op.process] = op
        elif ends_hold(op.f, op.type) and op.process in open_:
            a = open_.pop(op.process)
            wins.append(Window(process=a.process, start_ns=a.time_ns, end_ns=op.time_ns, acquire=a, release=op, token=a.token))
    for a in open_.values():
        wins.append(Window(process=a.process, start_ns=a.time_ns, end_ns=None, acquire=a, release=None, token=a.token))
    wins.sort(key=lambda w: w.start_ns)
    return wins


def _brief(op: Op | None) -> dict | None:
    return None if op is None else {"index": op.index, "process": op.process, "type": op.type, "f": op.f,
                                    "time_ns": op.time_ns, "token": op.token}


def check_mutex(spec: Any, history: Sequence[Op]) -> CheckResult:
    wins = holding_windows(history)
    end_of_history = max((o.time_ns for o in history), default=0)
    overlaps = []
    active: list[Window] = []
    for w in wins:
        active = [a for a in active if (a.end_ns or end_of_history) > w.start_ns]
        for a in active:
            if a.process != w.process:
                end = min(a.end_ns or end_of_history, w.end_ns or end_of_history)
                overlaps.append({"first": _brief(a.acquire), "second": _brief(w.acquire),
                                 "first_release": _brief(a.release), "second_release": _brief(w.release),
                                 "start_ns": w.start_ns, "end_ns": end,
                                 "overlap_ms": round((end - w.start_ns) / 1e6, 3)})
        active.append(w)
    renewed = renewed_while_other_held(history, wins)
    why = Attribution(spec, history)
    for o in overlaps:
        o["cause"] = why.cause(o["first"]["index"], o["second"]["index"])
    late = why.late_oks()
    causes = [o["cause"] for o in overlaps]
    unexplained = sum(c["cause"] == "unexplained" for c in causes)
    spans: dict[str, list[float]] = {}
    for c in causes:
        if "past_lease_s" in c:
            lo_hi = spans.setdefault(c["cause"], [c["past_lease_s"], c["past_lease_s"]])
            lo_hi[0], lo_hi[1] = min(lo_hi[0], c["past_lease_s"]), max(lo_hi[1], c["past_lease_s"])
    return CheckResult(
        name="mutex", valid=not overlaps,
        summary={"violations": len(overlaps), "windows": len(wins), "renewed_while_other_held": len(renewed),
                 "max_overlap_ms": max((o["overlap_ms"] for o in overlaps), default=0.0),
                 "violations_by_cause": by_cause(causes), "unexplained": unexplained,
                 "past_lease_s_by_cause": spans,
                 "releases_ok_after_lease_lost": len(late["release"]), "renews_ok_after_lease_lost": len(late["renew"])},
        details={"overlaps": overlaps[:MAX_LISTED], "listed": min(len(overlaps), MAX_LISTED),
                 "renewed_while_other_held": renewed[:MAX_LISTED],
                 "causes": [[o["first"]["index"], o["second"]["index"], o["cause"]["cause"]] for o in overlaps[:MAX_CAUSES]],
                 "releases_ok_after_lease_lost": late["release"][:MAX_LISTED],
                 "renews_ok_after_lease_lost": late["renew"][:MAX_LISTED],
                 "windows": [[w.process, w.start_ns, w.end_ns, w.token, _deadline(why, w)] for w in wins]})


def _deadline(why: Attribution, w: Window) -> int | None:
    """The last validity the holder of window w was told of (drawn on its bar in the report)."""
    h = why.holds.get(w.acquire.index)
    return h.deadline_at(h.end_ns) if h is not None else None


def renewed_while_other_held(history: Sequence[Op], wins: Sequence[Window]) -> list[dict]:
    """Renews that said ok while another process held the lock: the client (or its
    server) extended a lease that was no longer its own. Each also lies inside an
    overlap, which is the violation; this names the op that should have failed."""
    # a sweep in time order: the windows open at each renew (a few: one per process at most)
    found: list[tuple[int, dict]] = []
    by_start = sorted(wins, key=lambda w: w.start_ns)
    renews = sorted((op for op in history if op.f == "renew" and op.type == "ok" and op.process != NEMESIS),
                    key=lambda o: (o.time_ns, o.index))
    active: list[Window] = []
    k = 0
    for op in renews:
        while k < len(by_start) and by_start[k].start_ns < op.time_ns:
            active.append(by_start[k])
            k += 1
        active = [w for w in active if w.end_ns is None or op.time_ns < w.end_ns]
        other = next((w for w in active if w.process != op.process), None)  # the earliest begun
        if other is not None:
            found.append((op.index, {"renew": _brief(op), "holder": _brief(other.acquire)}))
    order = {op.index: n for n, op in enumerate(history)}
    return [entry for _, entry in sorted(found, key=lambda f: order.get(f[0], 0))]


def lease_history(history: Sequence[Op]) -> list[Op]:
    """The history as an owner-aware mutex sees a lease lock.

    A lease also ends by expiry, which no op records. The release of an expired lease
    comes back `fail` ("not held"), and a plain mutex model would read that as "the lock
    was never released" and flag every later acquire. The hold did end, at the latest
    when that release returned, so it is recorded here as an ok release. An acquire by
    someone else while the first client still believed it held (before its release
    invoke) stays impossible to linearize, so real overlaps are still caught.
    """
    from dataclasses import replace

    return [replace(o, type="ok") if (o.f == "release" and o.type == "fail") else o for o in history]


def _acquire_times(history: Sequence[Op]) -> tuple[list[int], list[Any], list[int]]:
    oks = sorted((o.time_ns, o.process, o.index) for o in history if o.f == "acquire" and o.type == "ok")
    return [t for t, _, _ in oks], [p for _, p, _ in oks], [i for _, _, i in oks]


def check_writes(spec: Any, history: Sequence[Op]) -> CheckResult:
    """Stale writes accepted/rejected and lost updates, from the history alone."""
    times, procs, indexes = _acquire_times(history)
    last_acquire: dict[Any, int] = {}
    last_index: dict[Any, int] = {}
    why = Attribution(spec, history)
    stale_accepted, stale_rejected = [], []
    ok_writes = info_writes = tokened = 0  # tokened: writes that carried a fencing token
    final = None
    highest_token: int | None = None
    out_of_order: list[dict] = []  # accepted writes whose token is below one accepted before
    for inv, done in pair_ops(sorted(history, key=lambda o: (o.time_ns, o.index))):
        if inv.process == NEMESIS:
            continue
        if inv.f == "acquire" and done is not None and done.type == "ok":
            last_acquire[inv.process] = done.time_ns
            last_index[inv.process] = done.index
        if inv.f == "read" and inv.process == "final" and done is not None and done.type == "ok":
            final = done.value
        if inv.f != "write" or inv.process == "final":
            continue
        kind = "ok" if done is not None and done.type == "ok" else ("fail" if done is not None and done.type == "fail" else "info")
        ok_writes += kind == "ok"
        tokened += inv.token is not None
        if kind == "ok" and inv.token is not None:
            if highest_token is not None and inv.token < highest_token:
                out_of_order.append({"write": _brief(inv), "token": inv.token, "after_token": highest_token})
            highest_token = inv.token if highest_token is None else max(highest_token, inv.token)
        info_writes += kind == "info"
        mine = last_acquire.get(inv.process)
        if mine is None:
            continue
        lo, hi = bisect.bisect_right(times, mine), bisect.bisect_left(times, inv.time_ns)
        later = next((i for i in range(lo, hi) if procs[i] != inv.process), None)
        if later is not None:
            # the violation it belongs to: its writer's hold and the first hold that superseded it
            entry = {"write": _brief(inv), "outcome": kind, "token": inv.token,
                     "violation": {"first": last_index[inv.process], "second": indexes[later],
                                   "cause": why.cause(last_index[inv.process], indexes[later])["cause"]}}
            if kind == "ok":
                stale_accepted.append(entry)
            elif kind == "fail" and done.error == "stale-token":
                stale_rejected.append(entry)
    lost = None
    valid: Any = True
    error = None if final is not None else "no final read of the counter in the history"
    untouched = not any(o.f in ("read", "write") and o.process not in (NEMESIS, "final") for o in history)
    if untouched and not final:
        # the holders touched no resource (-o resource=none, a lock-only foreign history): no
        # write could be stale or lost, and none was judged; never a vacuous pass
        return CheckResult(name="writes", valid=UNKNOWN, error=None, summary={
            "stale_writes_accepted": 0, "stale_writes_rejected": 0, "lost_updates": None, "writes_ok": 0,
            "writes_info": 0, "final_counter": final, "writes_missing": None, "writes_out_of_token_order": 0},
            details={INAPPLICABLE: "the holders read and wrote no resource (-o resource=none, or a history of lock "
                                   "ops alone): stale writes and lost updates are not judged"})
    if final is None:
        valid = "unknown"
    else:
        lost = max(0, ok_writes - int(final))
        if int(final) < ok_writes:
            valid = False
        elif int(final) > ok_writes + info_writes:
            # Each write sets the counter to one more than a value it read, so the counter can
            # count no more writes than were applied: the history lacks writes that happened.
            valid = "unknown"
            error = (f"the counter says {int(final)} writes happened but the history records at most "
                     f"{ok_writes + info_writes}: ops are missing from the history")
    # Accepted tokens going down is a broken fence when fencing is on; without it, only a count.
    if stale_accepted or (out_of_order and getattr(spec, "fencing", False)):
        valid = False
    return CheckResult(
        name="writes", valid=valid,
        summary={"stale_writes_accepted": len(stale_accepted), "stale_writes_rejected": len(stale_rejected),
                 "lost_updates": lost, "writes_ok": ok_writes, "writes_info": info_writes, "final_counter": final,
                 "writes_missing": None if final is None else max(0, int(final) - ok_writes - info_writes),
                 "writes_out_of_token_order": len(out_of_order), "writes_with_token": tokened},
        details={"stale_accepted": stale_accepted[:MAX_LISTED], "stale_rejected": stale_rejected[:MAX_LISTED],
                 "out_of_token_order": out_of_order[:MAX_LISTED]},
        error=error)


def _quantile(sorted_vals: list[float], q: float) -> float | None:
    if not sorted_vals:
        return None
    i = min(len(sorted_vals) - 1, max(0, int(round(q * (len(sorted_vals) - 1)))))
    return round(sorted_vals[i], 3)


def check_stats(spec: Any, history: Sequence[Op]) -> CheckResult:
    """Counts and acquire latency; always valid (it judges nothing)."""
    counts = {"ok": 0, "fail": 0, "info": 0}
    lat: list[float] = []
    ops = 0
    for inv, done in pair_ops(history):
        if inv.process == NEMESIS:
            continue
        ops += 1
        if inv.f != "acquire":
            continue
        t = done.type if done is not None else "info"
        counts[t] += 1
        if t == "ok":
            lat.append((done.time_ns - inv.time_ns) / 1e6)
    lat.sort()
    span = (max((o.time_ns for o in history), default=0) - min((o.time_ns for o in history), default=0)) / 1e9
    # a critical section is an accepted write, or the read of a holder that only reads (an rw
    # reader, a semaphore's permit holder: harness/core/kinds.py); in a history whose holders
    # touch no resource at all (-o resource=none: the lock cycle alone), a hold released ok
    reader: dict[Any, bool] = {}
    sections = released = 0
    worked = False
    for o in history:
        if o.f == "acquire" and o.type == "invoke":
            reader[o.process] = o.mode == "read" or o.permits is not None
        elif o.process == "final" or o.process == NEMESIS:
            continue
        elif o.f in ("read", "write"):
            worked = True
            if o.type == "ok" and (o.f == "write" or reader.get(o.process)):
                sections += 1
        elif o.f == "release" and o.type == "ok":
            released += 1
    if not worked:
        sections = released
    return CheckResult(name="stats", valid=True, summary={
        "ops": ops, "acquires_ok": counts["ok"], "acquires_fail": counts["fail"], "acquires_info": counts["info"],
        "critical_sections": sections, "p50_acquire_ms": _quantile(lat, 0.5), "p99_acquire_ms": _quantile(lat, 0.99),
        "max_acquire_ms": _quantile(lat, 1.0), "duration_s": round(span, 3),
        "critical_sections_per_s": round(sections / span, 2) if span else None})
