"""Liveness: once faults are healed, the lock must be granted again, and queues must move.

Safety says two holders never at once; a lock that is never granted again is safe and
useless. This checker reads, from the history alone (and the facts the run recorded):

- **may-hold**: when someone might hold the lock on the servers. A hold runs from its
  acquire's `ok` to its release's `ok`; a release that was not `ok` (fail, info, a
  holder killed, or none before the end) leaves the key until its lease ends: the latest
  `valid_until_ns` its acquire and renews reported, and at least one lease after its
  last confirmation (`lease_s`: the TTL, or the session timeout of a session design). An
  acquire in doubt (`info`, or never completed) may hold from its invoke until one lease
  after its completion. An acquire that failed held nothing.
- **stuck**: a stretch in which nobody may hold the lock and acquires kept asking (from the
  first one in flight to the last, failing), outside faults, for longer than the bound in all,
  without a grant. A fault explains a stall only while it is in effect; the lease it could
  hold up after its heal is the bound's. Faults do not reset the count: a lock free and asked
  for 55 s with a slow link every 3 s is stuck, however the schedule cuts the stretch. A lock
  busy the whole time is never stuck: its holders may-hold it.
- **starved** (only designs that promise a queue): one acquire that waited longer than the
  bound, outside faults, while others were granted the lock twice or more (a fault excuses
  the wait only while it is in effect). A waiter behind one long hold is not starved.
- **handover**: a lock released `ok` (or whose lease ran out) while an acquire was in flight,
  with no fault in effect from `MARGIN_S` before that moment to the next grant, must be
  granted again within the handover bound (`-o handover_s`; by default `HANDOVER_S` plus the
  design's retry delay, the longest a polling waiter may sleep): longer, while acquires kept
  asking, is "handover stalled N s" (a waiter that missed its wake-up, a queue that waits for
  a timeout to move). The quiet time before is for clients that reconnect after a heal.
- **availability**, like Jepsen's: the share of acquires that succeeded, by the phase in
  which they were invoked: `faulted` (a fault in effect), `healed` (none in effect, before
  the last heal, or a run without faults) and `recovery` (after the last fault healed).

The bound is `lease_s + acquire_timeout + MARGIN_S`, printed with every finding. The margin
is generous on purpose: a 2-core machine running servers, clients and nemesis starves
processes of CPU for whole seconds, and a checker that misfires on a correct design is
worse than one that misses a lock stuck for a few seconds. Fault spans (from a fault's
invoke to the completion of its heal) come from `harness.checker.causes.faults_of`, the one
account of harness/core/faults.py `in_effect` the report and ops.csv read too.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from harness.core import faults
from harness.core.contracts.checker import UNKNOWN, CheckResult
from harness.core.facts import service_of
from harness.core.history import NEMESIS, Op, pair_ops

MARGIN_S = 5.0  # slack above lease + acquire timeout (CPU starvation on a small machine)
HANDOVER_S = 1.0  # the default handover bound, above the design's retry delay
MIN_BAND_S = 1.0  # free-but-unavailable stretches shorter than this are not listed
MAX_LISTED = 50
QUEUED_KINDS = ("zookeeper",)  # lock services whose locks are FIFO queues (sequential znodes)


def lease_s(spec: Any) -> float | None:
    """How long a lock may outlive its holder's last word: the TTL, or the session timeout
    where the service has sessions and it is longer. None when neither is known (a history
    checked without its spec.json, and no `chaos check --ttl`): never a default."""
    service = service_of(spec)
    ttl = (getattr(spec, "ttl_ms", None) or 0) / 1000
    session = (service.session_timeout_ms or 0) / 1000
    return max(ttl, session) or None


NO_TTL = ("the history does not say the lock's TTL (no spec.json beside it): give it with "
          "`chaos check --ttl MS`")


def acquire_timeout_s(spec: Any, history: Sequence[Op] = ()) -> float:
    """The spec's acquire timeout; for a history without one (a bare history), the longest
    an acquire in it took: what the history says, never a default."""
    t = getattr(spec, "acquire_timeout", None)
    if t is not None:
        return float(t)
    ops = sorted((o for o in history if o.process not in (NEMESIS, "final")), key=lambda o: (o.time_ns, o.index))
    return max(((d.time_ns - i.time_ns) / 1e9 for i, d in pair_ops(ops) if i.f == "acquire" and d is not None),
               default=0.0)


def bound_s(spec: Any, history: Sequence[Op] = ()) -> float | None:
    """The longest a healthy lock may take to be granted again (see the module doc); None
    without a lease."""
    lease = lease_s(spec)
    if lease is None:
        return None
    return round(lease + acquire_timeout_s(spec, history) + MARGIN_S, 3)


def handover_bound_s(spec: Any) -> float:
    """How soon a lock released while others ask must be granted again (module doc): -o
    handover_s, else HANDOVER_S plus the design's retry delay (-o retry_delay_ms, or the
    default the run recorded in its facts, where the design polls)."""
    options = getattr(spec, "options", None) or {}
    facts = getattr(spec, "facts", None)
    recorded = facts.get("retry_delay_ms") if isinstance(facts, Mapping) else None
    try:
        given = float(options.get("handover_s") or 0)
        poll = float(options.get("retry_delay_ms") or recorded or 0) / 1000
    except (TypeError, ValueError):  # a hand-made spec: the defaults
        given, poll = 0.0, 0.0
    if not (math.isfinite(given) and math.isfinite(poll)):
        given, poll = 0.0, 0.0
    return round(given if given > 0 else HANDOVER_S + max(0.0, poll), 3)


def queued(spec: Any) -> bool | None:
    """Whether the design promises a FIFO queue: the run's facts say so (`queue`), else
    the service kind does (every ZooKeeper lock is a queue of sequential znodes; etcd's
    built-in designs retry a transaction, so they promise no order). None: unknown."""
    facts = getattr(spec, "facts", None) or {}
    if isinstance(facts, Mapping) and isinstance(facts.get("queue"), bool):
        return facts["queue"]
    kind = service_of(spec).kind
    return None if kind is None else kind in QUEUED_KINDS


@dataclass(frozen=True, slots=True, kw_only=True)
class Span:
    start_ns: int
    end_ns: int


def fault_spans(spec: Any, history: Sequence[Op]) -> list[Span]:
    """When any recorded fault was in effect (the cause checker's spans, merged)."""
    from harness.checker.causes import faults_of

    spans = sorted((f.start_ns, f.end_ns) for f in faults_of(history, faults.table(getattr(spec, "facts", None))))
    return [Span(start_ns=a, end_ns=b) for a, b in _union(spans)]


def _union(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def _subtract(lo: int, hi: int, cuts: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """[lo, hi] minus the (sorted, disjoint) cuts."""
    out, at = [], lo
    for a, b in cuts:
        if b <= at or a >= hi:
            continue
        if a > at:
            out.append((at, a))
        at = max(at, b)
    if at < hi:
        out.append((at, hi))
    return out


def may_hold(history: Sequence[Op], lease_ns: int, end_ns: int) -> dict[Any, list[tuple[int, int]]]:
    """By lock key: the (start, end) spans in which some process may hold it (module doc)."""
    out: dict[Any, list[tuple[int, int]]] = {}
    by_time = sorted((o for o in history if o.process not in (NEMESIS, "final")), key=lambda o: (o.time_ns, o.index))
    holding: dict[Any, list] = {}  # process -> [key, start, last confirmation, latest validity]
    for inv, done in pair_ops(by_time):
        if inv.f == "acquire":
            if done is not None and done.type == "ok":
                holding[inv.process] = [inv.key, done.time_ns, done.time_ns, done.valid_until_ns or 0]
            elif done is None or done.type == "info":
                t = done.time_ns if done is not None else end_ns
                out.setdefault(inv.key, []).append((inv.time_ns, t + lease_ns))
        elif inv.f == "renew" and inv.process in holding and done is not None and done.type != "fail":
            h = holding[inv.process]
            h[2] = done.time_ns
            h[3] = max(h[3], done.valid_until_ns or 0)
        elif inv.f == "release" and inv.process in holding:
            key, start, confirmed, valid = holding.pop(inv.process)
            if done is not None and done.type == "ok":
                out.setdefault(key, []).append((start, done.time_ns))
            else:
                t = done.time_ns if done is not None else end_ns
                out.setdefault(key, []).append((start, max(t, confirmed + lease_ns, valid)))
    for key, start, confirmed, valid in holding.values():
        out.setdefault(key, []).append((start, max(end_ns, confirmed + lease_ns, valid)))
    return {k: _union(v) for k, v in out.items()}


def _acquires(history: Sequence[Op], end_ns: int) -> list[tuple[Op, Op | None, int]]:
    """(invoke, completion, completion time or the end of the history) of every acquire."""
    ops = sorted((o for o in history if o.process not in (NEMESIS, "final")), key=lambda o: (o.time_ns, o.index))
    return [(i, d, d.time_ns if d is not None else end_ns) for i, d in pair_ops(ops) if i.f == "acquire"]


class _Asking:
    """Over which part of an interval acquires kept asking: from the first one in flight in it
    to the last (a client that polls, sleeping between failed tries, asks all along)."""

    def __init__(self, spans: list[tuple[int, int]]):
        self.spans = spans
        self.ends = [b for _, b in spans]
        self.starts = [a for a, _ in spans]

    def of(self, lo: int, hi: int) -> int:
        i = bisect.bisect_right(self.ends, lo)  # the first span ending after lo
        j = bisect.bisect_left(self.starts, hi) - 1  # the last span starting before hi
        if i >= len(self.spans) or j < i:
            return 0
        return max(0, min(hi, self.ends[j]) - max(lo, self.starts[i]))


def _brief(op: Op | None) -> dict | None:
    return None if op is None else {"index": op.index, "process": op.process, "type": op.type, "f": op.f,
                                    "time_ns": op.time_ns, "error": op.error}


def phase_of(t: int, faulted: list[Span], last_heal_ns: int | None) -> str:
    starts = [s.start_ns for s in faulted]
    i = bisect.bisect_right(starts, t) - 1
    if i >= 0 and t <= faulted[i].end_ns:
        return "faulted"
    return "recovery" if last_heal_ns is not None and t >= last_heal_ns else "healed"


def availability(acqs: list[tuple[Op, Op | None, int]], faulted: list[Span], last_heal_ns: int | None) -> dict:
    """Jepsen's availability: per phase, ok acquires / acquires invoked in it."""
    counts = {p: [0, 0] for p in ("faulted", "healed", "recovery")}
    for inv, done, _ in acqs:
        c = counts[phase_of(inv.time_ns, faulted, last_heal_ns)]
        c[1] += 1
        c[0] += done is not None and done.type == "ok"
    return {p: {"ok": ok, "attempts": n, "share": round(ok / n, 4) if n else None} for p, (ok, n) in counts.items()}


def check_liveness(spec: Any, history: Sequence[Op]) -> CheckResult:
    """Stuck and starved locks, and availability by phase (module doc)."""
    end = max((o.time_ns for o in history), default=0)
    begin = min((o.time_ns for o in history), default=0)
    bound = bound_s(spec, history)
    if bound is None:
        return CheckResult(name="liveness", valid=UNKNOWN, error=NO_TTL, details={"reason": NO_TTL}, summary={
            "stuck": None, "starved": None, "liveness_bound_s": None, "granted_after_heal_s": None,
            "free_unavailable_s": None})
    bound_ns = int(bound * 1e9)
    faulted = fault_spans(spec, history)
    cuts = [(s.start_ns, s.end_ns) for s in faulted]
    healed_until = [s.end_ns for s in faulted]
    last_heal = max(healed_until) if faulted else None
    if last_heal is not None and last_heal >= end:
        last_heal = None  # the last fault never healed: there is no recovery period
    acqs = _acquires(history, end)
    held = may_hold(history, int(lease_s(spec) * 1e9), end)
    bands: list[dict] = []
    stuck: list[dict] = []
    by_key: dict[Any, list] = {}
    asking: dict[Any, _Asking] = {}  # by key: when its acquires kept asking (stuck's and handover's)
    for a in acqs:
        by_key.setdefault(a[0].key, []).append(a)
    longest = 0  # ns: the most a free lock was asked for, outside faults, in one stretch
    for key, mine in by_key.items():
        busy = held.get(key, [])
        demand = asking[key] = _Asking(_union([(i.time_ns, t) for i, _, t in mine]))
        for lo, hi in _subtract(begin, end, busy):
            # A fault explains the stall only while it is in effect (the lease it could hold up
            # after its heal is the bound's): the asking outside faults adds up over the whole
            # stretch the lock was free, however many faults cut it (never reset by one).
            pieces = [(a, b, demand.of(a, b)) for a, b in _subtract(lo, hi, cuts)]
            total = sum(x for _, _, x in pieces)
            longest = max(longest, total)
            is_stuck = total > bound_ns
            mine_bands = [{"key": key, "start_ns": a, "end_ns": b, "free_s": round((b - a) / 1e9, 3),
                           "asking_s": round(x / 1e9, 3), "stuck": is_stuck,
                           "attempts": sum(1 for i, d, t in mine if i.time_ns < b and t > a),
                           "ended_by": _ended_by(b, end, busy, cuts)}
                          for a, b, x in pieces if x >= MIN_BAND_S * 1e9]
            bands += mine_bands
            if is_stuck:
                tried = [(i, d) for i, d, t in mine if i.time_ns < hi and t > lo]
                first = next(b for b in mine_bands) if mine_bands else {"start_ns": lo}
                stuck.append({"key": key, "start_ns": first["start_ns"], "end_ns": hi,
                              "free_s": round((hi - first["start_ns"]) / 1e9, 3), "asking_s": round(total / 1e9, 3),
                              "faulted_s": round((hi - lo - sum(b - a for a, b, _ in pieces)) / 1e9, 3),
                              "faults": sum(1 for a, b in cuts if a < hi and b > lo), "stuck": True,
                              "attempts": len(tried), "ended_by": _ended_by(hi, end, busy, cuts),
                              "acquires": [[_brief(i), _brief(d)] for i, d in tried[:MAX_LISTED]]})
    handover = handover_bound_s(spec)
    stalls, handovers = _handovers(by_key, asking, held, cuts, end, int(handover * 1e9))
    judge_queue = queued(spec)
    starved = _starved(acqs, cuts, bound_ns) if judge_queue else []
    after = [d.time_ns for _, d, _ in acqs if d is not None and d.type == "ok" and last_heal is not None
             and d.time_ns >= last_heal]
    summary = {
        "stuck": len(stuck), "starved": len(starved) if judge_queue else None,
        "liveness_bound_s": bound, "availability": availability(acqs, faulted, last_heal),
        "granted_after_heal_s": round((min(after) - last_heal) / 1e9, 3) if after else None,
        "free_unavailable_s": round(longest / 1e9, 3),
        "handover_stalls": len(stalls), "handover_bound_s": handover, "handovers_judged": handovers[0],
        "handover_max_s": round(handovers[1] / 1e9, 3) if handovers[0] else None,
    }
    stalled = {(b["key"], b["start_ns"]) for b in stalls}
    for band in bands:  # the report's amber band names it
        band["handover_stalled"] = (band["key"], band["start_ns"]) in stalled
    valid: Any = not stuck and not starved and not stalls
    error = None
    if not acqs:
        valid, error = UNKNOWN, "no acquire in the history"
    return CheckResult(name="liveness", valid=valid, summary=summary, error=error, details={
        "bound": {"lease_s": lease_s(spec), "acquire_timeout_s": acquire_timeout_s(spec, history),
                  "margin_s": MARGIN_S, "bound_s": bound},
        "queue": judge_queue, "stuck": stuck[:MAX_LISTED], "starved": starved[:MAX_LISTED],
        "handover_stalls": stalls[:MAX_LISTED],
        "bands": bands[:MAX_LISTED * 4], "last_heal_ns": last_heal})


def _handovers(by_key: dict[Any, list], asking: dict[Any, _Asking], held: dict[Any, list[tuple[int, int]]],
               cuts: list[tuple[int, int]], end: int, bound_ns: int) -> tuple[list[dict], tuple[int, int]]:
    """The handovers judged (module doc): (stalls, (how many were judged, the longest in ns)).
    A handover starts where a may-hold span ends with an acquire of the key in flight, and lasts
    until the next span starts (a grant) or the history ends; it is judged when no fault was
    in effect from MARGIN_S before its start to its end."""
    quiet_ns = int(MARGIN_S * 1e9)
    stalls: list[dict] = []
    judged, longest = 0, 0
    for key, mine in by_key.items():
        busy = held.get(key, [])
        demand = asking[key]
        for n, (_, lo) in enumerate(busy):
            hi = busy[n + 1][0] if n + 1 < len(busy) else end
            waiting = [(i, d) for i, d, t in mine if i.time_ns <= lo < t]
            if hi <= lo or not waiting or any(a < hi and b > lo - quiet_ns for a, b in cuts):
                continue
            judged += 1
            asked = demand.of(lo, hi)
            longest = max(longest, asked)
            if asked > bound_ns:
                stalls.append({"key": key, "start_ns": lo, "end_ns": hi, "stalled_s": round((hi - lo) / 1e9, 3),
                               "asking_s": round(asked / 1e9, 3), "ended_by": "end of history" if hi >= end else "a grant",
                               "waiting": [_brief(i) for i, _ in waiting[:MAX_LISTED]]})
    return stalls, (judged, longest)


def _ended_by(b: int, end: int, busy: list[tuple[int, int]], cuts: list[tuple[int, int]]) -> str:
    if b >= end:
        return "end of history"
    if any(a == b for a, _ in cuts):
        return "a fault"
    return "a grant" if any(a == b for a, _ in busy) else "a fault"


def _covered(spans: list[tuple[int, int]], lo: int, hi: int) -> int:
    """How much of [lo, hi] the sorted, disjoint spans cover."""
    i = bisect.bisect_right([b for _, b in spans], lo)
    out = 0
    for a, b in spans[i:]:
        if a >= hi:
            break
        out += max(0, min(b, hi) - max(a, lo))
    return out


def _starved(acqs: list[tuple[Op, Op | None, int]], cuts: list[tuple[int, int]], bound_ns: int) -> list[dict]:
    """Acquires that waited longer than the bound, with no fault in effect, while two or
    more other processes' acquires were granted (each grant listed)."""
    grants = sorted((d.time_ns, d.process, d) for _, d, _ in acqs if d is not None and d.type == "ok")
    times = [g[0] for g in grants]
    found = []
    for inv, done, t in acqs:
        # a fault excuses the wait only while it was in effect (as for stuck)
        if t - inv.time_ns - _covered(cuts, inv.time_ns, t) <= bound_ns:
            continue
        lo, hi = bisect.bisect_right(times, inv.time_ns), bisect.bisect_left(times, t)
        others = [g[2] for g in grants[lo:hi] if g[1] != inv.process and g[2].key == inv.key]
        if len(others) >= 2:
            found.append({"waiter": _brief(inv), "completion": _brief(done), "waited_s": round((t - inv.time_ns) / 1e9, 3),
                          "granted_meanwhile": len(others), "grants": [_brief(o) for o in others[:MAX_LISTED]]})
    return found
