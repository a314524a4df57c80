"""Three promises of a lease: it dies with its holder, it is fresh when granted, and its
client knows it holds it.

**Expiry after death** (`check_outlived`). A holder that vanished (the `kill-holder` fault
records its death as a `release` `info` whose error begins "killed") cannot release: its
lock must end with its lease. So must whatever a process killed inside its acquire was given
(`kill-holder -o during=acquire`: an `acquire` `info` whose error begins "killed"; a design
that sets the key's expiry in a second step can leave a key that never expires). Measured from the death to the next grant of that key to
another process, against the lease (`lease_s`: the TTL, or the session timeout of a session
design) and against what the holder last believed (`valid_until_ns` of its acquire and
renews, listed as the renewals that led there). A lock that outlived its holder by more than
the lease + `MARGIN_S` is a finding: "the lock outlived its holder by N s (TTL T s)". Another
kind of fault in effect before the next grant explains the wait only while it was in effect:
the rest past the bound is still a finding. A death whose excess those faults could explain in
full, or with the history ending before the bound, is not judged ("unknown", details
`partial`: the run's verdict comes from the rest), never a pass.

**Fresh leases** (`check_fresh_leases`). An acquire or renew `ok` must hand out a lease that
is still valid: one whose `valid_until_ns` is not later than `EXPIRED_MARGIN_NS` after the
op returned is "granted an expired lease". Its validity must also not exceed what was asked
for: more than the lease + `OVERLONG_SHARE` of it + `OVERLONG_SLACK_NS` after the op
returned is "granted a lease longer than the TTL". An op without `valid_until_ns` is unknown
for that op (counted as `grants_without_validity`), never a pass. Only runs whose clients
counted their validity from the grant (facts `validity`, harness/core/facts.py) are judged:
in older runs some clients counted it from when the acquire was sent, so a waiter that
queued looked expired on arrival; their findings are shown, and the verdict is "unknown".

**What the client says** (`check_held`). The worker asks a client that has an opinion
(a watchdog, a session listener, the protocol's `held`) whether it still holds the lock it was
just granted, and records the answer as a `held` op (`ok`, value true or false). A `false`
for a lock it was granted, with no fault recorded between its acquire and the answer, is a
finding: "said it did not hold a lock it had just been granted". Any recorded fault in that
span could have taken the lock (a session expiring under a partition): not judged. A run
without `held` ops (a client with no opinion, or a run stored before they were recorded)
has nothing to judge here: "unknown" (`held_answers` 0), which leaves the run's verdict alone.

**Shown, not judged** (`check_grants`): releases asked for while their lease was valid that
answered `fail` or `info`, after which, with no fault in effect, nobody could take the lock
until the releaser's validity ran out (its key lingered while it
believed it gone, or did not know: `lingering_releases`, with how long), and two grants of one
key that carry the same fencing token (`duplicate_tokens`: fencing cannot tell their writes apart).
"""

from __future__ import annotations

import bisect
from typing import Any, Sequence

from harness.checker.liveness import MARGIN_S, NO_TTL, fault_spans, lease_s
from harness.core.contracts.checker import INAPPLICABLE, PARTIAL, UNKNOWN, CheckResult
from harness.core.facts import SESSIONS, VALIDITY, service_of
from harness.core.history import NEMESIS, Op, pair_ops

KILLED = "killed"  # the error prefix of a death recorded for a holder (nemesis/client.py)
EXPIRED_MARGIN_NS = 1_000_000  # 1 ms: a lease ending this close to its grant was expired on arrival
OVERLONG_SHARE = 0.05  # a validity may exceed the lease by 5 % (rounding to whole seconds, drift)
OVERLONG_SLACK_NS = 100_000_000  # plus 100 ms
MAX_LISTED = 50
DEATH_FAULTS = ("kill-holder",)  # the fault that makes a death; any other fault in effect blurs the measure


def _brief(op: Op | None) -> dict | None:
    return None if op is None else {"index": op.index, "process": op.process, "type": op.type, "f": op.f,
                                    "time_ns": op.time_ns, "valid_until_ns": op.valid_until_ns}


def _client_ops(history: Sequence[Op]) -> list[Op]:
    return sorted((o for o in history if o.process not in (NEMESIS, "final")), key=lambda o: (o.time_ns, o.index))


def check_outlived(spec: Any, history: Sequence[Op]) -> CheckResult:
    """How long each dead holder's lock outlived it (module doc)."""
    from harness.checker.causes import faults_of
    from harness.core import faults

    end = max((o.time_ns for o in history), default=0)
    lease = lease_s(spec)
    if lease is None:
        return _outlived_without_lease(history)
    limit_ns = int((lease + MARGIN_S) * 1e9)
    other = sorted((f.start_ns, f.end_ns) for f in faults_of(history, faults.table(getattr(spec, "facts", None)))
                   if f.f not in DEATH_FAULTS)
    ops = _client_ops(history)
    grants = _ByKey([o for o in ops if o.f == "acquire" and o.type == "ok"])
    hold: dict[Any, list[Op]] = {}  # process -> its current hold's acquire and renew oks
    deaths: list[dict] = []
    for op in ops:
        if op.f == "acquire" and op.type == "ok":
            hold[op.process] = [op]
        elif op.f == "renew" and op.type == "ok" and op.process in hold:
            hold[op.process].append(op)
        elif op.f == "release" and op.type == "info" and (op.error or "").startswith(KILLED) and op.process in hold:
            deaths.append(_death(op, hold.pop(op.process), grants, other, end, limit_ns, lease))
        elif op.f == "acquire" and op.type == "info" and (op.error or "").startswith(KILLED):
            # killed inside its acquire: whatever the servers gave it must end with its lease too
            deaths.append({**_death(op, [], grants, other, end, limit_ns, lease), "during": "acquire"})
        elif op.f == "release" and op.type != "invoke":
            hold.pop(op.process, None)
    # a kill the nemesis recorded whose death the history does not show (an older run): unknown
    dead = {d["process"] for d in deaths}
    unrecorded = [o for o in history if o.process == NEMESIS and o.f in DEATH_FAULTS and o.type in ("ok", "info")
                  and isinstance(o.value, dict) and o.value.get("during") != "acquire"
                  and o.value.get("process") not in dead]
    found = [d for d in deaths if d["outlived"]]
    unjudged = [d for d in deaths if d["outlived"] is None] + unrecorded
    measured = [d["outlived_s"] for d in deaths if d["outlived_s"] is not None]
    valid: Any = False if found else (UNKNOWN if unjudged else True)
    details: dict[str, Any] = {"deaths": deaths[:MAX_LISTED], "findings": [_words(d, lease) for d in found[:MAX_LISTED]]}
    if unjudged:  # each judged what it could; these deaths could not be (policy.finding_counts)
        details[PARTIAL] = _not_judged(deaths, unrecorded)
    return CheckResult(name="outlived", valid=valid, summary={
        "holder_deaths": sum(1 for d in deaths if "during" not in d),
        "acquirer_deaths": sum(1 for d in deaths if "during" in d), "outlived_holder": len(found), "deaths_not_judged": len(unjudged),
        "outlived_holder_s": round(max(measured), 3) if measured else None,
        "outlived_bound_s": round(lease + MARGIN_S, 3)}, details=details)


def _outlived_without_lease(history: Sequence[Op]) -> CheckResult:
    """outlived of a history that does not say its lease: deaths cannot be judged; none, nothing to judge."""
    died = sum(1 for o in history if o.f == "release" and o.type == "info" and (o.error or "").startswith(KILLED))
    return CheckResult(name="outlived", valid=UNKNOWN if died else True, error=NO_TTL if died else None,
                       details={"reason": NO_TTL} if died else {}, summary={
                           "holder_deaths": died, "outlived_holder": 0, "deaths_not_judged": died,
                           "outlived_holder_s": None, "outlived_bound_s": None})


def _not_judged(deaths: list[dict], unrecorded: list[Op]) -> str:
    blurred = sum(1 for d in deaths if d["outlived"] is None and d["other_fault"])
    early = sum(1 for d in deaths if d["outlived"] is None and not d["other_fault"])
    said = [f"{n} {what}" for n, what in (
        (blurred, "death(s) with other faults in effect that could explain all of the wait past the bound"),
        (early, "death(s) too close to the end of the history to judge"),
        (len(unrecorded), "kill(s) whose death the history does not record (an older run)")) if n]
    judged = len(deaths) - blurred - early
    return f"{judged} of {len(deaths) + len(unrecorded)} holder death(s) judged; not judged: " + ", ".join(said)


def _death(release: Op, oks: list[Op], grants: "_ByKey", other: list[tuple[int, int]], end: int,
           limit_ns: int, lease: float) -> dict:
    died = release.time_ns
    believed = max((o.valid_until_ns for o in oks if o.valid_until_ns), default=None)
    nxt = grants.next_after(release.key, died, release.process)
    until = nxt.time_ns if nxt is not None else end
    # Another fault explains the wait only while it was in effect (the lease is the bound's):
    # judged on the rest, unknown only when the faults could explain all that went past the bound.
    faulted = _covered(other, died, until)
    blurred = faulted > 0
    unexplained = until - died - faulted
    outlived: bool | None
    if unexplained > limit_ns:
        outlived = True  # granted late, or never again, by more than any fault explains
    elif nxt is not None and until - died <= limit_ns:
        outlived = False  # granted again within the bound, faults or not
    else:
        outlived = None  # faults could explain the rest, or the history ended before the bound
    return {"process": release.process, "key": release.key, "died_ns": died, "death": _brief(release),
            "next_grant": _brief(nxt), "outlived_s": round((until - died) / 1e9, 3) if nxt is not None or outlived else None,
            "past_validity_s": round((until - believed) / 1e9, 3) if believed is not None else None,
            "lease_s": lease, "outlived": outlived, "other_fault": blurred,
            "faulted_s": round(faulted / 1e9, 3), "unexplained_s": round(unexplained / 1e9, 3),
            "renewals": [_brief(o) for o in oks[-MAX_LISTED:]]}


def _covered(spans: list[tuple[int, int]], lo: int, hi: int) -> int:
    """How much of [lo, hi] the (sorted) spans cover, each instant once."""
    out, at = 0, lo
    for a, b in spans:
        a, b = max(a, at), min(b, hi)
        if b > a:
            out += b - a
            at = b
    return out


def _words(d: dict, lease: float) -> str:
    never = " (never granted again)" if d["next_grant"] is None else ""
    faults = f", {d['faulted_s']:g} s of it under other faults" if d.get("faulted_s") else ""
    if d.get("during") == "acquire":
        return f"the lock outlived a process killed inside its acquire by {d['outlived_s']:g} s (TTL {lease:g} s){never}{faults}"
    return (f"the lock outlived its holder by {d['outlived_s']:g} s (TTL {lease:g} s){never}{faults}, "
            f"after {len(d['renewals'])} acquire/renewals")


def check_held(spec: Any, history: Sequence[Op]) -> CheckResult:
    """`held: false` for a lock just granted, with no fault to explain it (module doc)."""
    from harness.checker.causes import faults_of
    from harness.core import faults

    spans = [(f.start_ns, f.end_ns) for f in faults_of(history, faults.table(getattr(spec, "facts", None)))]
    granted: dict[Any, Op] = {}  # process -> the acquire invoke of its current hold
    invoked: dict[Any, Op] = {}
    answers, said_no, findings = 0, 0, []
    for op in _client_ops(history):
        if op.type == "invoke":
            invoked[op.process] = op
            continue
        inv = invoked.pop(op.process, None)
        if op.f == "acquire" and op.type == "ok":
            granted[op.process] = inv or op
        elif op.f == "release":
            granted.pop(op.process, None)
        elif op.f == "held" and op.type == "ok":
            answers += 1
            # only the look right after the grant: a `false` before the write is the client
            # noticing a lost lock (harness/checker/noticed.py), not a fresh grant denied
            start = granted.pop(op.process, None)
            if op.value is not False or start is None:
                continue
            said_no += 1
            if not any(a <= op.time_ns and start.time_ns <= b for a, b in spans):
                findings.append({"acquire": _brief(start), "held": _brief(op),
                                 "after_s": round((op.time_ns - start.time_ns) / 1e9, 3),
                                 "words": f"process {op.process} said it did not hold a lock it had just been granted "
                                          f"({round((op.time_ns - start.time_ns) / 1e9, 3):g} s after asking), "
                                          f"with no fault in between"})
    # no answer at all: the client has no opinion to judge (or the run was stored before they
    # were recorded): the promise does not apply, which leaves the run's verdict alone
    details: dict[str, Any] = {"findings": findings[:MAX_LISTED]}
    if not answers:
        details[INAPPLICABLE] = "no held answers in the history: the client has no opinion of its own to judge"
    return CheckResult(name="held", valid=False if findings else (True if answers else UNKNOWN), summary={
        "held_answers": answers, "held_false": said_no, "held_false_unexplained": len(findings)},
        details=details)


LINGER_SLACK_NS = 50_000_000  # a next grant this close to the releaser's validity came when its key expired


def check_grants(spec: Any, history: Sequence[Op]) -> CheckResult:
    """Lingering releases and grants sharing a fencing token (module doc): shown, not judged."""
    from harness.checker.causes import faults_of
    from harness.core import faults

    spans = [(f.start_ns, f.end_ns) for f in faults_of(history, faults.table(getattr(spec, "facts", None)))]
    ops = _client_ops(history)
    grants = [o for o in ops if o.f == "acquire" and o.type == "ok"]
    by_key = _ByKey(grants)
    refused = _ByKey([o for o in ops if o.f == "acquire" and o.type in ("fail", "info")])
    valid_until: dict[Any, int | None] = {}
    asked_at: dict[Any, int] = {}  # process -> when its pending op was invoked
    lingering = []
    for op in ops:
        if op.type == "invoke":
            asked_at[op.process] = op.time_ns
        elif op.f in ("acquire", "renew") and op.type == "ok":
            valid_until[op.process] = op.valid_until_ns
        elif op.f == "release" and op.type in ("fail", "info") and not (op.error or "").startswith(KILLED):
            v = valid_until.pop(op.process, None)
            nxt = by_key.next_after(op.key, op.time_ns, op.process)
            asked = nxt is not None and refused.any_between(op.key, op.time_ns, nxt.time_ns)
            # only a release asked for while its lease was still valid: one sent after it ran out
            # found its key gone, or expiring, on its own
            # (and with no fault between it and the next grant: a fault can keep everyone out)
            sent = asked_at.get(op.process, op.time_ns)
            early = v is not None and sent < v - LINGER_SLACK_NS
            clear = nxt is not None and not any(a <= nxt.time_ns and sent <= b for a, b in spans)
            if early and clear and asked and nxt.time_ns >= v - LINGER_SLACK_NS:
                lingering.append({"release": _brief(op), "next_grant": _brief(nxt),
                                  "lingered_s": round((nxt.time_ns - op.time_ns) / 1e9, 3)})
    seen: dict[tuple, Op] = {}
    duplicates = []
    for g in grants:
        if g.token is None:
            continue
        first = seen.setdefault((g.key, g.token), g)
        if first is not g:
            duplicates.append({"token": g.token, "first": _brief(first), "again": _brief(g)})
    return CheckResult(name="grants", valid=True, summary={
        "lingering_releases": len(lingering),
        "lingered_s": max((x["lingered_s"] for x in lingering), default=None),
        "duplicate_tokens": len(duplicates)},
        details={"lingering": lingering[:MAX_LISTED], "duplicates": duplicates[:MAX_LISTED]})


class _ByKey:
    """Ops of each key in time order, for the next one after a moment (log n, not a scan)."""

    def __init__(self, ops: Sequence[Op]):
        self.ops: dict[Any, list[Op]] = {}
        for o in ops:
            self.ops.setdefault(o.key, []).append(o)
        self.times = {k: [o.time_ns for o in v] for k, v in self.ops.items()}

    def next_after(self, key: Any, t: int, not_process: Any) -> Op | None:
        """The first op of `key` after t by another process than `not_process`."""
        mine = self.ops.get(key, [])
        for o in mine[bisect.bisect_right(self.times.get(key, []), t):]:
            if o.process != not_process:
                return o
        return None

    def any_between(self, key: Any, lo: int, hi: int) -> bool:
        """Whether `key` has an op strictly between lo and hi."""
        times = self.times.get(key, [])
        i = bisect.bisect_right(times, lo)
        return i < len(times) and times[i] < hi


def overlong_limit_ns(spec: Any) -> int | None:
    """The longest validity an acquire or renew may hand out, or None when it cannot be
    known (a session design whose session timeout the run did not record)."""
    service = service_of(spec)
    if service.kind in SESSIONS and service.session_timeout_ms is None:
        return None
    lease = lease_s(spec)
    if lease is None:
        return None
    return int(lease * (1 + OVERLONG_SHARE) * 1e9) + OVERLONG_SLACK_NS


def check_fresh_leases(spec: Any, history: Sequence[Op]) -> CheckResult:
    """Grants of leases already expired, or longer than asked for (module doc)."""
    limit = overlong_limit_ns(spec)
    expired, overlong = [], []
    without = grants = 0
    for inv, done in pair_ops(_client_ops(history)):
        if inv.f not in ("acquire", "renew") or done is None or done.type != "ok":
            continue
        grants += 1
        if done.valid_until_ns is None:
            without += 1
            continue
        left = done.valid_until_ns - done.time_ns
        entry = {"invoke": _brief(inv), "ok": _brief(done), "left_ms": round(left / 1e6, 3),
                 "took_ms": round((done.time_ns - inv.time_ns) / 1e6, 3)}
        if left <= EXPIRED_MARGIN_NS:
            expired.append(entry)
        elif limit is not None and left > limit:
            overlong.append(entry)
    valid: Any = False if expired or overlong else (UNKNOWN if without or not grants or limit is None else True)
    error = None
    details: dict[str, Any] = {"expired": expired[:MAX_LISTED], "overlong": overlong[:MAX_LISTED],
                               "overlong_limit_ms": round(limit / 1e6, 3) if limit is not None else None,
                               "expired_margin_ms": EXPIRED_MARGIN_NS / 1e6}
    # what could not be judged: all of it (the run is unknown), or some of it (policy.finding_counts)
    if not grants:
        details["reason"] = "no acquire or renew was granted: no lease to judge"
    elif without == grants:
        details["reason"] = (f"none of the {grants} grant(s) says until when its lease is valid (valid_until_ns): "
                             f"a lease's freshness cannot be judged without it")
    elif valid == UNKNOWN:
        details[PARTIAL] = "; ".join(x for x in (
            f"{grants - without} of {grants} grant(s) judged; {without} without valid_until_ns" if without else "",
            ("overlong leases not judged: " + ("the session timeout of this session design was not recorded"
                                               if lease_s(spec) is not None else NO_TTL))
            if limit is None else "") if x)
    if service_of(spec).validity != VALIDITY:
        valid = UNKNOWN if valid is not True else True
        if expired or overlong:
            details.pop(PARTIAL, None)
            error = ("this run's clients may have counted their validity from when the acquire was sent (a run "
                     "stored before validity was recorded from the grant): its findings are shown, not judged")
    return CheckResult(name="fresh-leases", valid=valid, summary={
        "expired_grants": len(expired), "overlong_grants": len(overlong) if limit is not None else None,
        "grants_without_validity": without}, details=details, error=error)


__all__ = ["check_outlived", "check_fresh_leases", "check_held", "check_grants", "fault_spans"]
