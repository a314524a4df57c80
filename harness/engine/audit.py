"""The audit's battery, budget and report card: pure, so each is testable without servers.

An audit asks one question per promise of a lock ("no two holders", "expiry after the holder's
death", ...) of one client, and answers it from real runs, one fault kind per run (a mixed run
blurs which fault did what). `battery` plans those scenarios at the settings where clients
break, scaled to the client's own TTL, acquire timeout and session: a pause longer than the
lease and the session, a cut longer than the TTL, a clock jump larger than all three.
`next_run` spreads a budget of seconds over them: every scenario once, whatever the budget,
then extra seeds to the scenarios that found something (to every scenario when none did).
`card` turns the runs' results.json docs into one row per promise: FAIL when any run found a
violation of it; PASS when a run of a scenario that exercises it judged it kept; otherwise
NOT TESTED, with the checker's own reason or the refusal that kept its scenario from running.
A promise nobody judged never counts as kept (Jepsen's compose rule).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

PASS, FAIL, NOT_TESTED = "PASS", "FAIL", "NOT TESTED"
OVERHEAD_S = 3.0  # a run's cost beyond its time limit: servers up and down, workers, checks (valkey:1, 2 cores: ~2 s)
MIN_TIME_LIMIT_S = 10.0
LEAD_S = 3.5  # before a fault's recovery: the first fault starts half a nemesis interval in, and some slack
EVERY = "every"  # Scenario.exercises: each promise is exercised by every run (no two holders, liveness, ...)


@dataclass(frozen=True, slots=True, kw_only=True)
class Client:
    """What the audit knows of the client under test: the numbers its faults are scaled to."""

    ttl_ms: int
    acquire_timeout_s: float
    session_s: float | None = None  # a session design's session timeout (ZooKeeper), if it states one
    command_timeout_s: float | None = None  # its timeout for one command to a server, if it states one
    renew: bool = False
    fencing: bool = False  # the client hands out tokens, so its runs are fenced and the fencing row is judged


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    """One fault kind at one setting: the spec fields it sets on top of the client's."""

    name: str
    what: str  # one line: what it does, in the client's own numbers
    nemesis: tuple[str, ...] = ()
    options: dict[str, str] = field(default_factory=dict)
    clock_jump_s: float | None = None
    hold_until_expiry: bool = False
    time_limit: float = MIN_TIME_LIMIT_S
    recovery: float = 3.0  # fault-free seconds at the end: longer than the liveness bound, so a stuck lock shows
    interval: float | None = None  # the nemesis interval (a server pause lasts it); None: the run's default
    concurrency: int | None = None  # client processes, when the scenario needs fewer than the audit's (not for semaphores)
    exercises: frozenset[str] = frozenset()  # promises besides those every run exercises


@dataclass(frozen=True, slots=True, kw_only=True)
class Promise:
    key: str
    title: str
    checkers: tuple[str, ...]  # whose verdicts decide the row
    every: bool = True  # exercised by every run; else only by scenarios naming it in `exercises`


PROMISES = (
    Promise(key="mutex", title="no two holders", checkers=("mutex",)),
    Promise(key="fencing", title="fencing (stale writes refused)", checkers=("writes",)),
    Promise(key="outlived", title="expiry after the holder's death", checkers=("outlived",), every=False),
    Promise(key="fresh", title="fresh leases", checkers=("fresh-leases",)),
    Promise(key="liveness", title="handover and liveness", checkers=("liveness",)),
    Promise(key="truthful", title="releases and renews tell the truth", checkers=("mutex",), every=False),
    Promise(key="timeouts", title="timeouts honoured", checkers=("timeouts",)),
    Promise(key="noticed", title="the client notices a lost lock", checkers=("noticed",), every=False),
    Promise(key="alive", title="the client stays alive", checkers=("alive",)),
)


def _r(x: float) -> float:
    return round(x, 2)


def battery(c: Client) -> list[Scenario]:
    """The scenarios for client `c`, each one fault kind, at settings scaled to its numbers."""
    ttl, timeout = c.ttl_ms / 1000, c.acquire_timeout_s
    session = c.session_s or ttl
    past = _r(max(2.0, 1.5 * session / ttl))  # pauses in TTLs: past the lease and past the session
    cut_ms = round(1500 * max(ttl, session))  # a cut longer than the lease (and the session)
    jump = _r(max(2.5 * ttl, 1.5 * session, 2 * timeout))  # a clock jump beyond lease, session and timeout
    stall = _r(max(3.0, 1.5 * (c.command_timeout_s or ttl)))  # a server pause past one command's timeout
    slower = round(min(600 * ttl, 450 * c.command_timeout_s) if c.command_timeout_s else 600 * ttl)

    # a lock nobody can get is STUCK only once it stays so longer than the liveness checker's bound
    # (lease + acquire timeout + its margin) with no fault near: the recovery outlasts that bound
    from harness.checker.liveness import MARGIN_S

    recovery = _r(ttl + timeout + MARGIN_S + 1)

    def fault(span_s: float) -> float:
        return _r(max(MIN_TIME_LIMIT_S, LEAD_S + span_s + recovery))

    out = [
        # two clients: a third would hide a waiter that misses its wake-up by trying in the gap
        Scenario(name="contention", what="two clients contend, no fault", time_limit=_r(recovery + 5), concurrency=2),
        # every client at once, no fault: a waiter woken by a release and beaten to the lock by a
        # client that was not waiting must still answer within its timeout (python-redis-lock's
        # acquire starts its whole wait again then: 3 s for a timeout of 2, docs/findings-python.md)
        Scenario(name="crowd", what="every client contends, no fault", time_limit=_r(recovery + 5)),
        Scenario(name="pause-holder", what=f"holder paused {past:g} x TTL ({_r(past * ttl):g} s), past its lease",
                 nemesis=("pause-holder",), options={"pause_multiple": str(past), "held_check": "both"},
                 time_limit=fault(past * ttl), exercises=frozenset({"truthful", "noticed"})),
        Scenario(name="pause-waiter", what=f"a waiter paused {_r(past * ttl):g} s, past its session",
                 nemesis=("pause-waiter",), options={"pause_multiple": str(past)}, time_limit=fault(past * ttl)),
        Scenario(name="kill-holder", what="holder killed", nemesis=("kill-holder",),
                 time_limit=fault(2 * ttl), exercises=frozenset({"outlived"})),
        Scenario(name="kill-in-acquire", what="a client killed inside its acquire of a free lock",
                 nemesis=("kill-holder",), options={"during": "acquire", "when": "free"},
                 time_limit=fault(2 * ttl), exercises=frozenset({"outlived"})),
        Scenario(name="lose-release-request", what=f"a release's request lost, links cut {cut_ms} ms (> TTL)",
                 nemesis=("cut-in-flight",), options={"during": "release", "lose": "request", "cut_ms": str(cut_ms)},
                 time_limit=fault(cut_ms / 1000), exercises=frozenset({"truthful"})),
        Scenario(name="lose-release-reply", what=f"a release's reply lost, links cut {cut_ms} ms (> TTL)",
                 nemesis=("cut-in-flight",), options={"during": "release", "lose": "reply", "cut_ms": str(cut_ms)},
                 time_limit=fault(cut_ms / 1000), exercises=frozenset({"truthful"})),
        # each way: a round trip takes 30 % of the TTL, past the margin a careful client keeps in hand
        # (a claim counted from the reply outlasts the key), and below most command timeouts
        Scenario(name="slow-link", what=f"client links delayed {round(150 * ttl)} ms each way (a round trip "
                                        f"30 % of the TTL)", nemesis=("slow-link",),
                 options={"delay_ms": str(round(150 * ttl))}, hold_until_expiry=not c.renew, time_limit=fault(3.0)),
        # a round trip longer than the lease: an acquire that ends after its lease must not say ok
        # (below a stated command timeout, or no command would ever complete)
        Scenario(name="slower-than-ttl", what=f"client links delayed {slower} ms each way (a round trip longer "
                                              f"than the TTL)", nemesis=("slow-link",),
                 options={"delay_ms": str(slower)}, time_limit=fault(3.0)),
        Scenario(name="client-clock-back", what=f"the clients' clocks jumped back {jump:g} s",
                 nemesis=("clock-skew",), options={"clock_target": "clients", "clock_mode": "back"},
                 clock_jump_s=jump, time_limit=fault(3.0)),
        Scenario(name="client-clock-bump", what=f"the clients' clocks jumped forward {jump:g} s",
                 nemesis=("clock-skew",), options={"clock_target": "clients", "clock_mode": "bump"},
                 clock_jump_s=jump, time_limit=fault(3.0)),
        Scenario(name="server-clock", what=f"the servers' clocks jumped forward {jump:g} s",
                 nemesis=("clock-skew",), options={"clock_target": "servers", "clock_mode": "bump"},
                 clock_jump_s=jump, time_limit=fault(3.0)),
        Scenario(name="partition", what="servers partitioned", nemesis=("partition",), time_limit=fault(3.0)),
        Scenario(name="server-pause", what=f"servers paused {stall:g} s, past the client's "
                                           + ("command timeout" if c.command_timeout_s else "TTL"),
                 nemesis=("pause",), interval=stall, time_limit=fault(2 * stall)),
        Scenario(name="server-restart", what="servers killed and restarted with their data dir", nemesis=("kill",),
                 time_limit=fault(3.0), exercises=frozenset({"truthful"})),
    ]
    if c.renew:  # the faults that bite only after k renews
        out += [
            Scenario(name="pause-holder-renewed", what=f"holder paused {_r(past * ttl):g} s after its 2nd renew",
                     nemesis=("pause-holder",), options={"pause_multiple": str(past), "after_renews": "2",
                                                         "held_check": "both"},
                     time_limit=fault((past + 2) * ttl), exercises=frozenset({"truthful", "noticed"})),
            Scenario(name="kill-holder-renewed", what="holder killed after its 2nd renew", nemesis=("kill-holder",),
                     options={"after_renews": "2"}, time_limit=fault(4 * ttl), exercises=frozenset({"outlived"})),
            Scenario(name="lose-renew-request", what=f"a renew's request lost, links cut {cut_ms} ms",
                     nemesis=("cut-in-flight",), options={"during": "renew", "lose": "request", "cut_ms": str(cut_ms)},
                     time_limit=fault(cut_ms / 1000), exercises=frozenset({"truthful"})),
            Scenario(name="lose-renew-reply", what=f"a renew's reply lost, links cut {cut_ms} ms",
                     nemesis=("cut-in-flight",), options={"during": "renew", "lose": "reply", "cut_ms": str(cut_ms)},
                     time_limit=fault(cut_ms / 1000), exercises=frozenset({"truthful"})),
        ]
    return [replace(x, recovery=recovery) for x in out]


def calibration(doc: dict) -> dict:
    """The client's fault-free numbers, from the contention run's results.json doc."""
    s = doc.get("summary") or {}
    return {k: s.get(k) for k in ("acquires_ok", "acquires_fail", "acquires_info", "p50_acquire_ms", "p99_acquire_ms",
                                  "handover_max_s", "handovers_judged", "critical_sections")}


def calibration_words(c: dict) -> str:
    def n(v, unit=""):
        return "?" if v is None else f"{v:g}{unit}" if isinstance(v, float) else f"{v}{unit}"

    return (f"{n(c.get('acquires_ok'))} acquires ok, {n(c.get('acquires_fail'))} fail, {n(c.get('acquires_info'))} "
            f"info; acquire p50 {n(c.get('p50_acquire_ms'), ' ms')}, p99 {n(c.get('p99_acquire_ms'), ' ms')}; "
            f"longest handover {n(c.get('handover_max_s'), ' s')}")


def cost_s(s: Scenario) -> float:
    """What one run of `s` is expected to take, in seconds of wall time."""
    return s.time_limit + OVERHEAD_S


def next_run(scenarios: Sequence[Scenario], done: Sequence[tuple[str, bool]], spent_s: float, budget_s: float,
             cost: Callable[[Scenario], float] = cost_s) -> Scenario | None:
    """The scenario to run next, or None when the budget is spent.

    `done` is (scenario name, found something) per finished run, in order. Every scenario runs
    once before any runs twice, whatever the budget (an audit that skipped one would report its
    promise as tested by less than it says). After that a run is started only if it fits in
    what is left; the scenarios that found something get the extra seeds, fewest runs first,
    and when none found anything every scenario shares them."""
    runs = Counter(name for name, _ in done)
    for s in scenarios:
        if not runs[s.name]:
            return s
    found = {name for name, hit in done if hit}
    pool = [s for s in scenarios if s.name in found] or list(scenarios)
    pool = [s for s in pool if spent_s + cost(s) <= budget_s]
    if not pool:
        return None
    return min(pool, key=lambda s: (runs[s.name], scenarios.index(s)))


def planned_runs(scenarios: Sequence[Scenario], done: Sequence[tuple[str, bool]], spent_s: float, budget_s: float,
                 cost: Callable[[Scenario], float] = cost_s) -> int:
    """How many runs the audit will make in all if nothing new is found: the progress line's m."""
    done, spent = list(done), spent_s
    while (s := next_run(scenarios, done, spent, budget_s, cost)) is not None:
        done.append((s.name, False))
        spent += cost(s)
    return len(done)


def first_pass_s(scenarios: Sequence[Scenario], cost: Callable[[Scenario], float] = cost_s) -> float:
    return sum(cost(s) for s in scenarios)


# ---- the card ------------------------------------------------------------------------------

EXPLAINED = "explained"  # a mutex overlap with a named cause: the lease's known exposure under that fault
NO_TOKEN = "the client handed out no fencing token (token null), so no write could be fenced"
NO_WRITES = "no holder wrote (a semaphore's holders share the resource, or -o resource=none): nothing to fence"


def _verdict(row: Promise, doc: dict) -> tuple[Any, str | None, str | None]:
    """(True | False | "unknown" | None, the cause of a False, the reason of an unknown) of one
    run's results.json doc for one row; None when the run says nothing of it."""
    s = doc.get("summary") or {}
    checkers = doc.get("checkers") or {}
    name = row.checkers[0]
    r = checkers.get(name)
    if r is None:
        return None, None, None
    valid, why = r.get("valid"), (s.get("not_judged") or {}).get(name) or r.get("error")
    if row.key == "mutex":
        return _mutex(s, valid, why)
    if row.key == "fencing" and s.get("writes_with_token") == 0:  # a write without a token cannot be fenced
        return "unknown", None, NO_TOKEN if s.get("writes_ok") or s.get("writes_info") else NO_WRITES
    if row.key == "truthful":
        late = [f"{s.get(k)} {f}(s) said ok after the lock was lost" for k, f in
                (("releases_ok_after_lease_lost", "release"), ("renews_ok_after_lease_lost", "renew")) if s.get(k)]
        if late:
            return False, " and ".join(late) + ": the client cannot tell", None
        if s.get("releases_ok_after_lease_lost") is None:  # the rw and semaphore exclusion checks do not count them
            return "unknown", None, "releases said ok after the lock was lost are counted for the mutex only"
        return (True, None, None) if valid is True or valid is False else ("unknown", None, why or "mutex unjudged")
    if valid is True and row.key == "outlived" and not (s.get("holder_deaths") or s.get("acquirer_deaths")):
        return "unknown", None, "no holder died in the run (the kill never landed)"
    if valid is True:
        return True, None, None
    if valid is False:
        return False, _cause(row, s, r), None
    return "unknown", None, why or "its checker could not decide"


def _mutex(s: dict, valid: Any, why: str | None) -> tuple[Any, str | None, str | None]:
    from harness.checker.causes import SHORT

    if valid is True:
        return True, None, None
    if valid is not False:
        return "unknown", None, why or "the mutex checker could not decide"
    by = s.get("violations_by_cause") or {}
    bad = {c: n for c, n in by.items() if c in ("unexplained", "early-client-clock")}
    if bad or not by:
        n = sum(bad.values()) or s.get("violations")
        return False, f"{n} overlap(s) {', '.join(SHORT.get(c, c) for c in bad) or 'of two holders'}: granted while " \
                      f"the lease was valid, no fault of the servers' to account for it", None
    if "unknown" in by:
        return "unknown", None, f"{by['unknown']} overlap(s) whose holder's validity was not recorded"
    return EXPLAINED, ", ".join(f"{n} {SHORT.get(c, c)}" for c, n in by.items()), None


def _cause(row: Promise, s: dict, r: dict) -> str:
    """One sentence: why the row failed in this run, from the checker's findings or the summary."""
    d = r.get("details") if isinstance(r.get("details"), dict) else {}
    found = d.get("findings") or []
    if found:
        first = found[0]
        words = first.get("words") if isinstance(first, dict) else first
        if words:
            more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
            return f"{str(words).rstrip('.')}{more}"
    if row.key == "fencing":
        return f"{s.get('stale_writes_accepted') or 0} stale write(s) accepted, {s.get('lost_updates') or 0} lost update(s)"
    if row.key == "liveness":
        parts = [f"{w} {s[k]} time(s)" for k, w in (("stuck", "STUCK (free, asked for, not granted)"),
                                                      ("starved", "left a waiter STARVED"),
                                                      ("handover_stalls", "STALLED a handover")) if s.get(k)]
        return "the lock was " + (", ".join(parts) or "not live") + \
            f" for longer than its bound ({s.get('liveness_bound_s')} s: lease + acquire timeout + margin)"
    if row.key == "fresh":
        return f"granted an expired lease {s.get('expired_grants') or 0} time(s), one longer than the TTL " \
               f"{s.get('overlong_grants') or 0} time(s)"
    if row.key == "outlived":
        return f"a dead holder's lock lived on {s.get('outlived_holder_s')} s (bound {s.get('outlived_bound_s')} s)"
    return f"checker {row.checkers[0]} found a violation"


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    """One finished run of the audit: its scenario and seed, and its results.json doc."""

    scenario: str
    seed: int
    run_dir: str
    doc: dict
    replay: str = ""
    partial: bool = False  # interrupted: what it found stands, but it keeps no promise (a prefix of a run)


def fails(promise: str, doc: dict) -> bool:
    """Whether a run's results.json doc fails the card's row `promise` (a PROMISES key): the
    shrink of a FAIL keeps a schedule whose replays still fail that row."""
    return _verdict(next(p for p in PROMISES if p.key == promise), doc)[0] is False


def to_shrink(rows: Sequence[dict]) -> list[tuple[str, dict]]:
    """(promise, failure) to shrink: each FAIL row's first failing run, each run once (a run that
    fails two rows is shrunk for the first; the second row's failure shares its result)."""
    out, seen = [], set()
    for r in rows:
        if r["status"] == FAIL and r["failures"] and r["failures"][0]["run_dir"] not in seen:
            seen.add(r["failures"][0]["run_dir"])
            out.append((r["promise"], r["failures"][0]))
    return out


def found(doc: dict, fenced: bool) -> bool:
    """Whether a run found anything the card fails on (next_run gives such scenarios more seeds)."""
    return any(_verdict(p, doc)[0] is False for p in PROMISES if fenced or p.key != "fencing")


def exclusion_title(lock: str = "mutex") -> str:
    """The first row's promise for a lock kind (`--lock`): what "no two holders" means for it."""
    if lock == "rw":
        return "no writer beside another holder"
    if lock.startswith("semaphore:"):
        return f"at most {lock.split(':', 1)[1]} holders"
    return "no two holders"


def card(scenarios: Sequence[Scenario], runs: Sequence[Run], refused: dict[str, str], *, fenced: bool,
         lock: str = "mutex") -> list[dict]:
    """One row per promise, from the finished runs and the scenarios refused up front."""
    by_name = {s.name: s for s in scenarios}
    rows = []
    for p in PROMISES:
        title = exclusion_title(lock) if p.key == "mutex" else p.title
        row: dict[str, Any] = {"promise": p.key, "title": title, "status": NOT_TESTED, "why": "",
                               "runs_judged": 0, "failures": [], "notes": []}
        rows.append(row)
        if p.key == "fencing" and not fenced:
            row["why"] = "the client hands out no fencing tokens"
            continue
        reasons: dict[str, list[str]] = {}  # why a run could not judge the row -> the scenarios it happened in
        unjudged = 0
        mine = [s for s in scenarios if p.every or p.key in s.exercises]
        for run in runs:
            v, cause, reason = _verdict(p, run.doc)
            if run.partial and v is not False:
                continue
            exercising = run.scenario in by_name and by_name[run.scenario] in mine
            if v is False:
                row["failures"].append({"scenario": run.scenario, "seed": run.seed, "run_dir": run.run_dir,
                                        "cause": cause, "replay": run.replay})
            elif v == EXPLAINED:
                row["notes"].append(f"{run.scenario} seed {run.seed}: {cause} (the lease allows these under "
                                    f"its fault; fencing is the defence)")
                row["runs_judged"] += exercising
            elif v is True:
                row["runs_judged"] += exercising
            elif v is not None and exercising and reason:
                same = next((r for r in reasons if _shape(r) == _shape(reason)), reason)  # counts apart, one reason
                reasons.setdefault(same, []).append(run.scenario)
                if reason not in (NO_TOKEN, NO_WRITES):  # a run that could not judge the row says so beside those that did
                    row["notes"].append(f"{run.scenario} seed {run.seed}: not judged: {reason}")
                    unjudged += 1
        if row["failures"]:
            row["status"] = FAIL
            row["why"] = row["failures"][0]["cause"]
        elif row["runs_judged"]:
            row["status"] = PASS
            explained = len(row["notes"]) - unjudged
            row["why"] = f"kept in {row['runs_judged']} run(s)" + (
                f"; {explained} run(s) had overlaps their fault explains (notes)" if explained else "") + (
                f"; {unjudged} run(s) could not judge it (notes)" if unjudged else "")
        else:
            not_run = [f"{s.name}: {refused[s.name]}" for s in mine if s.name in refused]
            ran = {r.scenario for r in runs}
            missing = [s.name for s in mine if s.name not in refused and s.name not in ran]
            silent = ran & {s.name for s in mine} and all(_verdict(p, r.doc)[0] is None for r in runs)
            row["why"] = "; ".join(f"{why} ({_some(where)})" for why, where in reasons.items()) or "; ".join(not_run) or \
                (f"its checker ({p.checkers[0]}) did not run: it does not apply to this client" if silent else "") or \
                (f"its scenarios did not run ({', '.join(missing)})" if missing else "no scenario that exercises it was run")
    return rows


def _shape(reason: str) -> str:
    return re.sub(r"\d+(\.\d+)?", "#", reason)


def _some(names: list[str]) -> str:
    """The scenarios a reason was seen in, at most three named."""
    names = list(dict.fromkeys(names))
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def exit_code(rows: Sequence[dict]) -> int:
    """1 on any FAIL, 0 when every tested row passed, 2 when nothing could be judged."""
    statuses = {r["status"] for r in rows}
    if FAIL in statuses:
        return 1
    return 0 if PASS in statuses else 2
