"""What runs under the aimed client faults and slow links can show, for `chaos reproduce`.

Each predicate reads the fault's own record in the history: a band runs from the fault's ok
(it landed, read back) to the invoke of its heal (the rules or the stop may go from then on),
and what a correct design must do inside that band follows from the design alone:

- a waiter stopped or cut off mid-acquire while another holds is not granted in the band,
  and nobody is granted the lock while another holds it (the checkers' verdict);
- a killed holder's lock comes free when its lease ends: the next grant of its key is not
  before the validity the dead holder was told, and not much after it;
- an acquire that crawls over a link slower than its validity budget fails: no acquire
  invoked inside a band completes ok inside it, and some fail;
- a release cut as it leaves, for longer than the TTL, leaves the key to its TTL: the next
  grant of the key is not before the validity its holder was told, and not much after it;
- a waiter killed between its acquire request and the reply leaves at most a queue entry
  that goes with its session: the lock is granted again within the session timeout (plus
  FREED_WITHIN_NS) of the kill.
"""

from __future__ import annotations

from typing import Sequence

from harness.core.history import NEMESIS, Op

FREED_WITHIN_NS = 1_500_000_000  # a freed lock is taken within this of its end (clients retry every ~50 ms)


def bands(h: Sequence[Op], start: str, heal: str) -> list[tuple[int, int, dict]]:
    """(ok ns, heal invoke ns, value) of each fault `start` that landed ok; an unhealed
    one ends with the history."""
    out, open_ = [], None
    end = max((o.time_ns for o in h), default=0)
    for o in sorted((o for o in h if o.process == NEMESIS), key=lambda o: (o.time_ns, o.index)):
        if o.f == start and o.type == "ok" and open_ is None:
            open_ = (o.time_ns, o.value if isinstance(o.value, dict) else {})
        elif o.f == heal and o.type == "invoke" and open_ is not None:
            out.append((open_[0], o.time_ns, open_[1]))
            open_ = None
    return out + ([(open_[0], end, open_[1])] if open_ else [])


def _granted_inside(h: Sequence[Op], a: int, b: int, process) -> bool:
    return any(o.process == process and o.f == "acquire" and o.type == "ok" and a < o.time_ns < b for o in h)


def waiter_kept_out(start: str, heal: str):
    """A waiter was stopped (or cut off) mid-acquire at least once; none was granted the
    lock inside its band; no two holders."""
    def holds(s: dict, h: Sequence[Op]) -> bool:
        found = bands(h, start, heal)
        return bool(found) and (s.get("violations") or 0) == 0 and not any(
            _granted_inside(h, a, b, v.get("process")) for a, b, v in found)
    holds.__name__ = f"{start}_kept_out"
    return holds


def freed_at_expiry(s: dict, h: Sequence[Op]) -> bool:
    """At least one holder was killed; after each kill, the next grant of its key to another
    process came no earlier than the validity the dead holder was told, and within
    FREED_WITHIN_NS of it: the lock outlived its holder by its lease, no less, not for ever."""
    return _outlived_by_its_lease(s, h, "kill-holder")


def release_cut_until_expiry(s: dict, h: Sequence[Op]) -> bool:
    """At least one release was cut as it left; after each, the next grant of its key to
    another process came no earlier than the validity its holder was told, and within
    FREED_WITHIN_NS of it: the key the release never reached lived to its TTL, not for ever."""
    return _outlived_by_its_lease(s, h, "cut-in-flight")


def _outlived_by_its_lease(s: dict, h: Sequence[Op], fault: str) -> bool:
    kills = [o for o in h if o.process == NEMESIS and o.f == fault and o.type == "ok"]
    if not kills or (s.get("violations") or 0) != 0:
        return False
    ordered = sorted(h, key=lambda o: (o.time_ns, o.index))
    for k in kills:
        dead = k.value["process"]
        leases = [o for o in ordered if o.process == dead and o.f in ("acquire", "renew") and o.type == "ok"
                  and o.time_ns < k.time_ns and o.valid_until_ns]
        if not leases:
            return False
        told, key = max(o.valid_until_ns for o in leases), leases[-1].key
        nxt = next((o for o in ordered if o.time_ns > k.time_ns and o.f == "acquire" and o.type == "ok"
                    and o.process != dead and o.key == key), None)
        if nxt is None or not told <= nxt.time_ns <= told + FREED_WITHIN_NS:
            return False
    return True


def slow_acquires_fail(s: dict, h: Sequence[Op]) -> bool:
    """The link was slowed (measured) at least once; no acquire invoked inside a band
    completed ok inside it, and at least one acquire invoked inside a band failed (an
    attempt after the heal may succeed: only the band's own are counted); no two holders."""
    found = bands(h, "slow-link", "fast-link")
    if not found or (s.get("violations") or 0) != 0:
        return False
    invoked: dict = {}
    ok = failed = 0
    for o in sorted((o for o in h if o.f == "acquire" and isinstance(o.process, int)), key=lambda o: o.time_ns):
        if o.type == "invoke":
            invoked[o.process] = o.time_ns
            continue
        t0 = invoked.pop(o.process, None)
        if t0 is None or not any(a <= t0 <= b for a, b, _ in found):
            continue
        ok += o.type == "ok" and any(a <= t0 and o.time_ns <= b for a, b, _ in found)
        failed += o.type == "fail"  # certainly not granted, whenever it gave up
    return ok == 0 and failed >= 1


def queue_moves_past_dead_waiter(session_ms: float):
    """At least one waiter was killed mid-acquire; after each kill, another process was granted
    the lock within session_ms + FREED_WITHIN_NS (its queue entry went with its session); no
    two holders."""
    def holds(s: dict, h: Sequence[Op]) -> bool:
        kills = [o for o in h if o.process == NEMESIS and o.f == "kill-holder" and o.type == "ok"]
        if not kills or (s.get("violations") or 0) != 0:
            return False
        grants = sorted(o.time_ns for o in h if o.f == "acquire" and o.type == "ok" and isinstance(o.process, int))
        bound = int(session_ms * 1e6) + FREED_WITHIN_NS
        return all(any(k.time_ns < g <= k.time_ns + bound for g in grants) for k in kills)
    holds.__name__ = "queue_moves_past_dead_waiter"
    return holds
