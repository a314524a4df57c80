"""Timeouts honoured: an acquire answers within its timeout, and does not give up long before it.

A caller that asks for a lock with a timeout of T seconds builds on two promises: the answer
comes by T (plus the time one request may take), and a "no" means the lock stayed taken for
about T. A library that measures its deadline on the wall clock answers late (or never) when
the client's clock jumps; one that gives up on the first "taken" answers no at once while the
lock was about to be free. Both are findings, with their ops:

- **late**: an acquire answered (any type), or was cut off by the harness for not answering,
  more than `LATE_MARGIN_S` after its timeout, with no fault in effect during it that could
  stall its process or its requests (a pause, a partition, a slow link, a dead server). A
  clock fault excuses nothing: a deadline is measured on a monotonic clock.
- **early**: an acquire that failed in less than half its timeout less `EARLY_MARGIN_S`,
  while the lock was taken (may-hold, harness/checker/liveness.py) from its invoke
  to its answer, with no fault in effect then or in the `QUIET_S` before (a client whose
  connections a fault reset may fail fast while it reconnects: etcd's client answers "connection
  failed" at once for a second or more after a cut-in-flight heals).

The timeout is the run's `--acquire-timeout`. The last acquires of a run get less (the runner
shortens a timeout that would outlast the workload, and says so on the invoke: value
{"timeout_s": T}); such an acquire is judged against its own T. In a history that does not say
(older, foreign), an early answer is judged only for acquires invoked a full timeout (and a
second) before the last client op. A history without
an acquire timeout (a bare one) is not judged, and says so.
"""

from __future__ import annotations

import bisect
from typing import Any, Sequence

from harness.core import faults
from harness.core.contracts.checker import INAPPLICABLE, UNKNOWN, CheckResult
from harness.core.history import NEMESIS, Op, pair_ops

LATE_MARGIN_S = 1.0  # above the timeout: one request's own timeout, a loaded machine's scheduling
EARLY_MARGIN_S = 0.5  # below half the timeout: a design may give up late in its wait for reasons of its
# own (the built-in etcd design's own lease can run out while it waits, seen once in 300 runs)
TAIL_S = 1.0  # acquires invoked closer than timeout + this to the last client op may have had less
QUIET_S = 5.0  # after a fault heals, a client may fail fast while it reconnects: no early answer is judged
MAX_LISTED = 50
NO_TIMEOUT = "the history does not say the acquire timeout (no spec.json beside it): timeouts are not judged"


def _own_timeout(inv: Op) -> float | None:
    """The timeout an acquire's invoke says it was given ({"timeout_s": T}: the runner shortens
    the acquires it starts close to the run's end), else None: the run's --acquire-timeout."""
    v = inv.value
    t = v.get("timeout_s") if isinstance(v, dict) else None
    return float(t) if isinstance(t, (int, float)) and not isinstance(t, bool) and 0 < t <= 86_400 else None


def _clock(explains: tuple[str, ...]) -> bool:
    """A clock fault: it moves clocks, and stalls no process nor request."""
    return any(e in ("early-server-clock", "early-client-clock") for e in explains)


def check_timeouts(spec: Any, history: Sequence[Op]) -> CheckResult:
    from harness.checker.causes import faults_of
    from harness.checker.liveness import _union, lease_s, may_hold

    timeout = getattr(spec, "acquire_timeout", None)
    empty = {"acquires_late": 0, "acquires_early": 0, "acquires_timed": 0}
    if timeout is None:
        return CheckResult(name="timeouts", valid=UNKNOWN, summary=empty, error=NO_TIMEOUT,
                           details={INAPPLICABLE: NO_TIMEOUT})
    ops = sorted((o for o in history if o.process not in (NEMESIS, "final")), key=lambda o: (o.time_ns, o.index))
    if not ops:
        return CheckResult(name="timeouts", valid=True, summary=empty)
    end = ops[-1].time_ns
    kinds = faults.table(getattr(spec, "facts", None))
    spans = faults_of(history, kinds)
    stalls = _Spans(_union([(f.start_ns, f.end_ns) for f in spans if not _clock(f.explains)]))
    quiet_ns = int(QUIET_S * 1e9)  # a client may still be reconnecting after a heal (liveness's margin)
    every = _Spans(_union([(f.start_ns, f.end_ns + quiet_ns) for f in spans]))
    lease = lease_s(spec)
    held = {k: _Spans(v) for k, v in may_hold(history, int(lease * 1e9), end).items()} if lease else {}
    timeout_ns = int(float(timeout) * 1e9)
    late_ns = timeout_ns + int(LATE_MARGIN_S * 1e9)
    early_ns = timeout_ns // 2 - int(EARLY_MARGIN_S * 1e9)
    full_until = end - timeout_ns - int(TAIL_S * 1e9)
    late, early = [], []
    timed = 0
    for inv, done in pair_ops(ops):
        if inv.f != "acquire" or done is None:
            continue  # one the history ends inside was never answered: the end cut it, not a timeout
        took = done.time_ns - inv.time_ns
        timed += 1
        own = _own_timeout(inv)  # the runner shortened it near the run's end, and said so
        t_late, t_early = (late_ns, early_ns) if own is None else \
            (int((own + LATE_MARGIN_S) * 1e9), int((own / 2 - EARLY_MARGIN_S) * 1e9))
        if took > t_late and not stalls.touch(inv.time_ns, done.time_ns):
            late.append(_finding(inv, done, timeout if own is None else own, "answered"))
        elif done.type == "fail" and took < t_early and (own is not None or inv.time_ns <= full_until) and lease \
                and not every.touch(inv.time_ns, done.time_ns) \
                and inv.key in held and held[inv.key].cover(inv.time_ns, done.time_ns):
            early.append(_finding(inv, done, timeout if own is None else own, "gave up"))
    found = late + early
    return CheckResult(name="timeouts", valid=not found, summary={
        "acquires_late": len(late), "acquires_early": len(early), "acquires_timed": timed},
        details={"timeout_s": float(timeout), "late_margin_s": LATE_MARGIN_S,
                 "early_before_s": round(max(0.0, float(timeout) / 2 - EARLY_MARGIN_S), 3),
                 "findings": [f["words"] for f in found[:MAX_LISTED]], "late": late[:MAX_LISTED],
                 "early": early[:MAX_LISTED]})


def _finding(inv: Op, done: Op, timeout: float, how: str) -> dict:
    took = (done.time_ns - inv.time_ns) / 1e9
    cut = done.type == "info" and "no reply" in (done.error or "")
    if how == "answered" and cut:
        words = (f"an acquire had no answer {took - float(timeout):.3f} s after its {float(timeout):g} s timeout, "
                 f"and the harness cut it off (process {inv.process})")
    elif how == "answered":
        words = (f"an acquire answered {took - float(timeout):.3f} s after its {float(timeout):g} s timeout "
                 f"(process {inv.process}, {done.type})")
    else:
        words = (f"an acquire gave up after {took:.3f} s of its {float(timeout):g} s timeout while the lock was "
                 f"taken (process {inv.process})")
    return {"words": words, "process": inv.process, "took_s": round(took, 3), "type": done.type,
            "invoke": {"index": inv.index, "time_ns": inv.time_ns},
            "completion": {"index": done.index, "time_ns": done.time_ns, "error": done.error}}


class _Spans:
    """Sorted, disjoint (start, end) spans, asked whether they touch or cover an interval."""

    def __init__(self, spans: list[tuple[int, int]]):
        self.spans = spans
        self.starts = [a for a, _ in spans]
        self.ends = [b for _, b in spans]

    def touch(self, lo: int, hi: int) -> bool:
        i = bisect.bisect_left(self.ends, lo)
        return i < len(self.spans) and self.spans[i][0] <= hi

    def cover(self, lo: int, hi: int) -> bool:
        i = bisect.bisect_right(self.starts, lo) - 1
        return i >= 0 and self.spans[i][1] >= hi
