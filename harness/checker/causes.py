"""Why each mutual-exclusion violation happened: the design's known exposure, or a bug.

Derived only from the history and the facts the run recorded, never from the test's name
or from cluster, nemesis or client code: the validity each holder believed it had
(`valid_until_ns` on its acquire and renew oks), the nemesis ops that were recorded, the
lock service (harness/core/facts.py: kind, count, whether a clock move reaches expiry, whether
data survives a restart) and each fault kind's heal and the causes it can explain, as its
nemesis declared them (harness/core/faults.py). A new nemesis explains through its own
declaration; a fault on servers nobody recorded is `unknown`, never a pass.
For two holders at once, A (the earlier) and B (the later):

- **holder overran its lease** (`overran-*`): B was granted after A's own validity had ended,
  and A went on as holder. Why A was late: it was paused (`overran-paused`: a pause-holder
  of its worker covers the overrun), cut off from the servers (`overran-cut-off`; for a
  session design also a partition among the servers, which can isolate its session), or
  neither (`overran-no-fault`: a slow machine, the articles' GC pause for real). The design
  promised nothing past the lease; fencing is the defence.
- **granted while the lease was still valid** (`early-*`): B's acquire returned before A's
  validity ended. That breaks the lock's own promise, so it must be accounted for by a fault
  that covers the moment (from A's acquire to B's grant), named in this order: a jump of the
  clocks of as many servers as the design needs, on servers whose expiry reads the moved clock
  (`early-server-clock`), a restart of a server that keeps no data (`early-restart`), a
  partition under a session-based design (`early-partition`), a skew of A's or B's own clock
  (`early-client-clock`), or an ok release by a process that was not the rightful holder: it
  had lost the lock, or got it only through an earlier violation (`early-foreign-release`,
  the misuse backends; last, because a holder a clock jump let in releases in good faith). A
  release that timed out during a partition counts too: it may have reached the server late.
  With none of these: **`unexplained`**, a bug in the client or the server.
- `unknown`: A's validity was not recorded (an older or a foreign history), or a fault covers
  the moment but the lock service is not known (no facts recorded, a backend not built in).

Conservative by rule: a fault counts only when its recorded interval (from its invoke to the
completion of the op that heals it, or the end of the history) meets the moment; a fault
elsewhere in the run explains nothing. A fault op that failed did not happen; one that is
`info` may have, and counts.
"""

from __future__ import annotations

import bisect
import itertools
import re
from dataclasses import dataclass
from typing import Any, Sequence

from harness.core import faults
from harness.core.facts import SESSIONS, service_of
from harness.core.history import NEMESIS, Op

CAUSES = {
    "overran-paused": "holder overran its lease (paused)",
    "overran-cut-off": "holder overran its lease (cut off from the servers)",
    "overran-no-fault": "holder overran its lease (delayed, no fault: a slow machine)",
    "early-foreign-release": "granted early: released by a process that did not hold the lock",
    "early-server-clock": "granted early: server clock jump",
    "early-restart": "granted early: a server restarted without its data",
    "early-partition": "granted early: a partition (session-based design)",
    "early-client-clock": "granted early: a client's clock was skewed",
    "unexplained": "UNEXPLAINED: granted while the lease was valid, with no fault to account for it (a bug in the client or the server)",
    "unknown": "cause unknown: the holder's validity was not recorded",
}
SHORT = {  # as the summary line counts them
    "overran-paused": "holder overran its lease (paused)",
    "overran-cut-off": "holder overran its lease (cut off)",
    "overran-no-fault": "holder overran its lease (no fault: a slow machine)",
    "early-foreign-release": "granted early (a foreign release)",
    "early-server-clock": "granted early (server clock jump)",
    "early-restart": "granted early (restart without data)",
    "early-partition": "granted early (partition)",
    "early-client-clock": "granted early (client clock skew)",
    "unexplained": "UNEXPLAINED",
    "unknown": "cause unknown",
}
FENCING = "fencing is the defence: a store that checks tokens refuses the late holder's writes"

_CLIENT = re.compile(r"c(\d+)$")


@dataclass(frozen=True, slots=True, kw_only=True)
class FaultSpan:
    """A fault as the history recorded it: when it was in effect, and on whom."""

    f: str  # its start op's f
    start_ns: int
    end_ns: int
    targets: frozenset  # node names, client names (c1..) or worker indexes (pause-holder)
    explains: tuple[str, ...] = ()  # the cause slugs its kind declared (harness/core/faults.py)

    def meets(self, lo: int, hi: int) -> bool:
        return self.start_ns <= hi and lo <= self.end_ns


def faults_of(history: Sequence[Op], kinds: dict | None = None) -> list[FaultSpan]:
    """Every fault the nemesis recorded (not the failed ones), when it was in effect by the one
    account the report and ops.csv use too (harness/core/faults.py `in_effect`: from its invoke
    to the completion of the first heal of its kind, or to the end of the history), with its
    targets. Unlike the report's bands, two faults of one kind that overlap stay two."""
    kinds = faults.table() if kinds is None else kinds
    end_of_history = max((o.time_ns for o in history), default=0)
    return [FaultSpan(f=iv["f"], start_ns=iv["start_ns"], end_ns=iv["end_ns"] if iv["end_ns"] is not None else end_of_history,
                      targets=frozenset(faults.targets_of(kinds[iv["f"]], iv["value"])), explains=kinds[iv["f"]].explains)
            for iv in faults.in_effect(history, kinds)]


def is_client(name: Any) -> bool:
    return isinstance(name, str) and _CLIENT.match(name) is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class Hold:
    """One process's time as holder, with what it believed about its lease."""

    process: Any
    invoke_ns: int  # its acquire's invoke
    start_ns: int  # its acquire's ok
    end_ns: int  # its release's invoke, or the end of the history
    acquire: Op
    deadlines: tuple[tuple[int, int], ...]  # (time_ns, valid_until_ns) of its acquire and renew oks

    def deadline_at(self, t: int) -> int | None:
        """The latest validity it had been told of by time t (None if never recorded)."""
        i = bisect.bisect_right(self.deadlines, (t, 2**63))
        return max((d for _, d in self.deadlines[:i]), default=None)


class Attribution:
    """Causes for the overlaps of one history (see the module doc)."""

    def __init__(self, spec: Any, history: Sequence[Op]):
        n = getattr(spec, "concurrency", None)  # None: a bare history, whose workers are unknown
        self.concurrency = max(1, int(n)) if isinstance(n, int) and not isinstance(n, bool) else None
        self.service = service_of(spec)  # the facts the run recorded, or what the spec alone says
        self.kind, self.n_servers = self.service.kind, self.service.servers
        self.faults = faults_of(history, faults.table(getattr(spec, "facts", None)))
        self.end_of_history = max((o.time_ns for o in history), default=0)
        self.holds: dict[int, Hold] = {}  # by the index of the acquire ok
        self._build(history)

    def _build(self, history: Sequence[Op]) -> None:
        invoke: dict[Any, Op] = {}
        current: dict[Any, tuple[Op, Op, list]] = {}
        said_ok: list[tuple[Op, Op]] = []
        timed_out: list[Op] = []
        answered: list[tuple[Op, int]] = []  # (release invoke, when its ok came back)
        for op in sorted(history, key=lambda o: (o.time_ns, o.index)):
            if op.process == NEMESIS or op.process == "final":
                continue
            if op.type == "invoke":
                invoke[op.process] = op
                if op.f == "release" and op.process in current:
                    self._close(op.process, current.pop(op.process), op.time_ns)
                continue
            inv = invoke.get(op.process)
            if op.f == "acquire" and op.type == "ok":
                current[op.process] = (inv or op, op, [(op.time_ns, op.valid_until_ns)] if op.valid_until_ns else [])
            elif op.f == "renew" and op.type == "ok" and op.process in current and op.valid_until_ns:
                current[op.process][2].append((op.time_ns, op.valid_until_ns))
            if op.f in ("release", "renew") and op.type == "ok" and inv is not None:
                said_ok.append((inv, op))
                if op.f == "release":
                    answered.append((inv, op.time_ns))
            elif op.f == "release" and op.type == "info" and inv is not None:
                timed_out.append(inv)
        for p, held in current.items():
            self._close(p, held, self.end_of_history)
        holds = self._holds_sorted = sorted(self.holds.values(), key=lambda h: h.start_ns)
        self._starts = [h.start_ns for h in holds]
        self._procs = [h.process for h in holds]
        self._reach = list(itertools.accumulate((h.end_ns for h in holds), max))  # latest end among holds[:i+1]
        self._own: dict[Any, list[Hold]] = {}
        for h in holds:
            self._own.setdefault(h.process, []).append(h)
        self._own_starts = {p: [h.start_ns for h in hs] for p, hs in self._own.items()}
        # ok releases and renews of a lock already lost: the client could not tell
        self.late: list[tuple[Op, Op, str]] = []
        for inv, done in said_ok:
            why = self.lost(inv.process, inv.time_ns)
            if why:
                self.late.append((inv, done, why))
        # Releases by a process that was not the rightful holder: it had lost the lock, or it
        # got the lock only through an earlier violation (granted while another's lease was valid).
        late = {inv.index for inv, _, _ in self.late}
        self.foreign: list[tuple[Op, Op, tuple[int, int] | None]] = []  # (invoke, ok, the violation it came through)
        # A cascade of plain DELs: a foreign release landed on X's fresh key (X was granted while
        # it was in flight), so X's own release, still in flight when another process was then
        # granted, may land on that one's key. Only for releases that do not check whose lock
        # they delete, and only in such a cascade: a release merely answered late, with no fault
        # and no foreign release before it, explains nothing (golden early-foreign-release-no-fault-bad).
        loose = self.service.release_checks_owner is not True
        for inv, done in sorted(said_ok, key=lambda r: r[0].time_ns):
            if done.f != "release":
                continue
            through = self._wrongful(inv.process, inv.time_ns)
            if inv.index in late or through is not None:
                self.foreign.append((inv, done, None if inv.index in late else through))
            elif loose and self.lost(inv.process, done.time_ns) and self._taken(inv.process, inv.time_ns):
                self.foreign.append((inv, done, None))
        self.foreign.sort(key=lambda r: r[0].time_ns)
        # Releases invoked while the network was faulted: one that timed out may still have
        # reached the server after the heal, and one answered late (a slow link) acted at some
        # moment before its answer; either may have acted after another was granted (a late DEL).
        # (invoke, answered at; None: never answered)
        # A release that deletes only its own lock (release_checks_owner) cannot, late, delete another's.
        net = [f for f in self.faults if "in-flight-release" in f.explains] \
            if self.service.release_checks_owner is not True else []
        flying = [(inv, None) for inv in timed_out] + answered
        self.in_flight = sorted(((inv, done) for inv, done in flying if any(f.meets(inv.time_ns, inv.time_ns) for f in net)),
                                key=lambda r: r[0].time_ns)
        self.foreign_times = [inv.time_ns for inv, _, _ in self.foreign]
        self._memo: dict[tuple[int, int], dict] = {}

    def _wrongful(self, process: Any, t: int) -> tuple[int, int] | None:
        """If the hold `process` had at time t was granted while another lease was still valid,
        that earlier violation (as acquire indexes (earlier, this)); else None."""
        j = bisect.bisect_right(self._own_starts.get(process, []), t) - 1
        if j < 0:
            return None
        x = self._own[process][j]
        i = bisect.bisect_left(self._starts, x.start_ns) - 1
        while i >= 0 and self._reach[i] > x.start_ns:  # only holds still open when x began
            y = self._holds_sorted[i]
            if y.process != process and y.end_ns > x.start_ns and (y.deadline_at(x.start_ns) or 0) >= x.start_ns:
                return (y.acquire.index, x.acquire.index)
            i -= 1
        return None

    def _taken(self, process: Any, t: int) -> bool:
        """Whether the hold `process` had at time t was granted while a foreign release (one
        found so far) was in flight: that release may have deleted its key."""
        j = bisect.bisect_right(self._own_starts.get(process, []), t) - 1
        if j < 0:
            return False
        start = self._own[process][j].start_ns
        return any(r.process != process and r.time_ns <= start <= d.time_ns for r, d, _ in self.foreign)

    def lost(self, process: Any, t: int) -> str | None:
        """Why `process` had certainly lost the lock by time t (None if not): another process
        was granted it after its own acquire. Its own validity having ended is not enough by
        itself (a validity is a conservative estimate; the server may still hold the key, or a
        session may still be alive), so it is only added to the reason."""
        mine = self._own.get(process, [])
        j = bisect.bisect_right(self._own_starts.get(process, []), t) - 1
        if j < 0:
            return None
        h = mine[j]
        lo, hi = bisect.bisect_right(self._starts, h.start_ns), bisect.bisect_left(self._starts, t)
        other = next((self._procs[i] for i in range(lo, hi) if self._procs[i] != process), None)
        if other is None:
            return None
        deadline = h.deadline_at(t)
        ended = f", {(t - deadline) / 1e9:.3f} s after its own lease had ended" if deadline is not None and t > deadline else ""
        return f"after process {other} had acquired the lock{ended}"

    def _close(self, process: Any, held: tuple[Op, Op, list], end_ns: int) -> None:
        inv, ok, deadlines = held
        self.holds[ok.index] = Hold(process=process, invoke_ns=inv.time_ns, start_ns=ok.time_ns, end_ns=end_ns,
                                    acquire=ok, deadlines=tuple(deadlines))

    def worker(self, process: Any) -> int | None:
        """The worker of a process id, or None when it cannot be known: an id that is not an
        integer (any JSON scalar is allowed), or a history whose concurrency was not recorded."""
        if self.concurrency is None or not isinstance(process, int) or isinstance(process, bool):
            return None
        return process % self.concurrency

    # -- the causes ------------------------------------------------------------------------
    def cause(self, first_index: int, second_index: int) -> dict:
        """The cause of the overlap of the hold begun by acquire op `first_index` with the later
        one begun by `second_index`: {"cause": slug, "detail": sentence, ...}."""
        key = (first_index, second_index)
        if key not in self._memo:
            self._memo[key] = self._cause(first_index, second_index)
        return self._memo[key]

    def _cause(self, first_index: int, second_index: int) -> dict:
        a, b = self.holds.get(first_index), self.holds.get(second_index)
        if a is None or b is None:
            return {"cause": "unknown", "detail": CAUSES["unknown"]}
        deadline = a.deadline_at(b.start_ns)
        if deadline is None:
            return {"cause": "unknown", "detail": CAUSES["unknown"]}
        if deadline < b.start_ns:
            return self._overran(a, b, deadline)
        early = self._early(a, b, deadline)
        return self._within_round_trip(a, b, deadline) if early["cause"] == "unexplained" else early

    def _within_round_trip(self, a: Hold, b: Hold, deadline: int) -> dict:
        """B granted less than A's own acquire round trip before the lease end A claimed, A then
        overran that lease under a recorded pause or cut (issue 38's false alarm): A counted its
        validity from its reply while the server counted the key's from the request, so the gap
        is A's reckoning, and the overrun is the fault's. Else UNEXPLAINED, as _early found."""
        rtt = a.start_ns - a.invoke_ns
        left = deadline - b.start_ns
        if left <= rtt and a.end_ns > deadline:
            over = self._overran(a, b, deadline)
            if over["cause"] in ("overran-paused", "overran-cut-off"):
                return {**over, "lease_left_s": round(left / 1e9, 3), "round_trip_s": round(rtt / 1e9, 3),
                        "detail": f"{over['detail']} (process {b.process} was granted the lock {left / 1e9:g} s before "
                                  f"the end process {a.process} claimed, less than its acquire's round trip of "
                                  f"{rtt / 1e9:g} s: it counts its validity from the reply, the server from the request)"}
        return self._early(a, b, deadline)

    def _overran(self, a: Hold, b: Hold, deadline: int) -> dict:
        past_s = round((a.end_ns - deadline) / 1e9, 3)
        w = self.worker(a.process)
        out = {"past_lease_s": past_s, "granted_after_lease_s": round((b.start_ns - deadline) / 1e9, 3)}
        paused = [f for f in self.faults if "overran-paused" in f.explains and w in f.targets and f.meets(a.start_ns, a.end_ns)]
        if paused:
            p = paused[0]
            return {"cause": "overran-paused", **out, "paused_s": round((min(p.end_ns, a.end_ns) - p.start_ns) / 1e9, 3),
                    "detail": f"{CAUSES['overran-paused']}: process {a.process} was paused and went on "
                              f"{past_s:g} s past its lease; {FENCING}"}
        cut = [f for f in self.faults if "overran-cut-off" in f.explains and f.meets(a.start_ns, a.end_ns)
               and ((w is not None and f"c{w + 1}" in f.targets) or "@any-client" in f.targets)]
        if cut:
            return {"cause": "overran-cut-off", **out,
                    "detail": f"{CAUSES['overran-cut-off']}: process {a.process} went on {past_s:g} s past its "
                              f"lease while cut off; {FENCING}"}
        # a session design: a partition of the servers can isolate the holder's session (its
        # server loses the quorum), which ends the lease as surely as cutting the client off
        split = [f for f in self.faults if "early-partition" in f.explains and f.meets(a.start_ns, a.end_ns)] \
            if self.kind in SESSIONS else []
        if split:
            return {"cause": "overran-cut-off", **out,
                    "detail": f"{CAUSES['overran-cut-off']}: process {a.process} went on {past_s:g} s past its "
                              f"lease while a partition split the servers its session lives on; {FENCING}"}
        return {"cause": "overran-no-fault", **out,
                "detail": f"{CAUSES['overran-no-fault']}: process {a.process} went on {past_s:g} s past its lease "
                          f"with no fault recorded on it; {FENCING}"}

    def _early(self, a: Hold, b: Hold, deadline: int) -> dict:
        lo, hi = a.invoke_ns, b.start_ns
        left_s = round((deadline - b.start_ns) / 1e9, 3)
        found: list[tuple[str, str]] = []
        # a release acts between its invoke and its completion: one that may have acted after A's
        # acquire was invoked and before B was granted
        k = bisect.bisect_left(self.foreign_times, a.invoke_ns - 60 * 10**9)
        foreign = [(inv, through) for inv, done, through in self.foreign[k:bisect.bisect_right(self.foreign_times, hi)]
                   if inv.process != a.process and done.time_ns >= a.invoke_ns]  # B's own release may have let B in
        if self.service.clock_expiry:
            need = 1 if self.n_servers <= 1 else self.n_servers // 2 + 1
            for f in self.faults:
                servers = [t for t in f.targets if not is_client(t)]
                if "early-server-clock" in f.explains and servers and f.meets(lo, hi) and len(servers) >= need:
                    found.append(("early-server-clock", f"the clocks of {len(servers)} of {self.n_servers} servers "
                                                        f"jumped ({need} needed to expire the key)"))
                    break
        if self.service.persists is False and any("early-restart" in f.explains and f.meets(lo, hi) for f in self.faults):
            found.append(("early-restart", "a server was killed and restarted without its data"))
        if self.kind in SESSIONS and any("early-partition" in f.explains and f.meets(lo, hi) for f in self.faults):
            found.append(("early-partition", "a partition covers the moment"))
        mine = {f"c{self.worker(p) + 1}" for p in (a.process, b.process) if self.worker(p) is not None}
        skewed = next((f for f in self.faults if "early-client-clock" in f.explains and mine & f.targets
                       and f.meets(lo, hi)), None)
        if skewed is not None:
            found.append(("early-client-clock", f"the clock of {', '.join(sorted(mine & skewed.targets))} was skewed"))
        base = {"lease_left_s": left_s}
        lost = next((inv for inv, through in foreign if through is None), None)
        late = next((inv for inv, done in self.in_flight if inv.process != a.process and inv.time_ns < b.start_ns
                     and (done is None or done >= a.invoke_ns)), None)
        if not found and lost is not None:
            found.append(("early-foreign-release", f"process {lost.process}, which had lost the lock, released it "
                                                   f"while process {a.process} held it"))
        elif not found and late is not None:
            found.append(("early-foreign-release", f"a release by process {late.process}, in flight during a network "
                                                   f"fault (timed out, or answered only after process {a.process} "
                                                   f"asked for the lock), may have reached the server late, while "
                                                   f"process {a.process} held the lock"))
        elif not found and foreign:
            # released by a holder that got the lock through an earlier violation: that one's cause
            inv, through = foreign[0]
            earlier = self.cause(*through)
            return dict(earlier, **base, follows=list(through),
                        detail=f"{CAUSES.get(earlier['cause'], earlier['cause'])}, again: process {inv.process}, which "
                               f"got the lock through an earlier violation (acquires #{through[0]} and #{through[1]}), "
                               f"released it while process {a.process} held it; process {b.process} was granted the "
                               f"lock {left_s:g} s before process {a.process}'s lease ended")
        if not found and not self.service.known and any(f.meets(lo, hi) for f in self.faults):
            return {"cause": "unknown", **base,
                    "detail": "cause unknown: a fault covers the moment, but the run recorded no facts about its "
                              "servers (kind, count, expiry clock) and none can be derived from its spec"}
        if not found:
            return {"cause": "unexplained", **base,
                    "detail": f"{CAUSES['unexplained']}: process {b.process} was granted the lock {left_s:g} s before "
                              f"process {a.process}'s lease ended"}
        slug, why = found[0]
        return {"cause": slug, **base, "also": [s for s, _ in found[1:]],
                "detail": f"{CAUSES[slug]}: {why}; process {b.process} was granted the lock {left_s:g} s before "
                          f"process {a.process}'s lease ended"}

    # -- releases and renews that should not have said ok ------------------------------------
    def late_oks(self) -> dict[str, list[dict]]:
        """Releases and renews that said ok although the lock was already lost (see `lost`)."""
        found: dict[str, list[dict]] = {"release": [], "renew": []}
        for inv, done, why in self.late:
            found[done.f].append({"op": {"index": done.index, "process": done.process, "f": done.f,
                                         "time_ns": done.time_ns}, "why": why})
        return found


def by_cause(causes: Sequence[dict]) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in causes:
        out[c["cause"]] = out.get(c["cause"], 0) + 1
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def cause_text(summary: dict) -> str | None:
    """'8 violations: 6 holder overran its lease (paused 2.1-4.0 s past it), 2 UNEXPLAINED'."""
    counts = summary.get("violations_by_cause") or {}
    if not counts:
        return None
    spans = summary.get("past_lease_s_by_cause") or {}
    parts = []
    for slug, n in counts.items():
        label = SHORT.get(slug, slug)
        span = spans.get(slug)
        if span and slug.startswith("overran"):
            label = label.replace(")", f", {span[0]:g}-{span[1]:g} s past it)") if span[0] != span[1] else \
                label.replace(")", f", {span[0]:g} s past it)")
        parts.append(f"{n} {label}")
    return ", ".join(parts)
