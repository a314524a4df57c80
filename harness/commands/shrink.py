"""`chaos run --replay RUN_DIR` and `chaos shrink RUN_DIR`: a failing run's schedule again,
and the smallest schedule that still shows its finding.

A replay runs the recorded run's workload (backend, options that are plain data, time limit,
seed) with the faults it applied (harness/engine/replay.py) instead of a re-planned schedule,
where and how the command line says (store, provider, hosts, client command: never from the
run dir, harness/engine/replay_input.py); its spec.json's facts name the run it replays.
`chaos shrink` searches (harness/engine/shrink.py) with real replays as its oracle: one trial
is one replay, and it reproduces when the replay shows the same finding as the original
(`findings`).
"""

from __future__ import annotations

import json
import shlex
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from harness.commands.cliargs import CLUSTERS, ssh_options
from harness.core.errors import EXIT_UNKNOWN, BadArgument
from harness.engine.replay import Recorded, Schedule, load, words
from harness.engine.replay_input import Here, asked_faults, check_faults, spec_for

SHRINK_FILE = "shrink.json"


def replay_command(run_dir: str, client_cmd: str | None, store: str) -> str:
    """The command that runs a run again with its recorded faults (docs/reproduce.md): a run
    dir never gives an external client's command, so the line carries it, and the store."""
    words = ["chaos", "run", "--replay", str(run_dir)] + (["--client", client_cmd] if client_cmd else []) + \
        ["--store", str(store)]
    return shlex.join(words)


def replay_spec(run_dir: str, here: Here | None = None, faults: tuple[Recorded, ...] | None = None,
                time_limit: float | None = None) -> tuple[Any, Schedule]:
    """(spec, schedule) of a replay of run_dir: the workload of its spec (harness/engine/replay_input.py:
    the seed and the options that are plain data) run where and how `here` says (the command
    line's store, provider, hosts, client command; its defaults when None), its recorded faults
    (or `faults`, a shrunk list) and its time limit (or `time_limit`); one sentence
    (BadArgument) when run_dir cannot be replayed, needs a flag, or aims a fault where a replay
    must not, all before anything starts."""
    here = here or Here()
    recorded, found = load(run_dir)
    if faults is None:  # a replay's replay: the schedule it was asked to replay
        faults = asked_faults(recorded, run_dir) or tuple(found)
    client = ["--client", here.client] if here.client else []
    command = shlex.join(["chaos", "run", "--replay", str(run_dir), *client])
    spec = spec_for(recorded, run_dir, here, time_limit=time_limit, command=command)
    return spec, Schedule(of=str(run_dir), faults=check_faults(spec, faults, run_dir))


def replay_cli(run_dir: str, ctx: click.Context) -> tuple[Any, Schedule]:
    """`chaos run --replay RUN_DIR`: replay_spec, with what the command line says of where and
    how it runs (REPLAY_FLAGS); a flag that would change the recorded workload is refused
    (one sentence), as a replay takes it from the run dir."""
    from click.core import ParameterSource

    from harness.commands.cliargs import ssh_settings
    from harness.core.pathcheck import DIR, check_path

    check_path(run_dir, flag="--replay", want=DIR, hint="give a run directory such as store/latest")
    given = [p for p in ctx.command.params if p.name not in REPLAY_FLAGS
             and ctx.get_parameter_source(p.name) not in (ParameterSource.DEFAULT, None)]
    if given:
        flag = given[0].opts[0]
        raise BadArgument(f"--replay takes the workload's options from {run_dir}'s spec.json; drop {flag}")
    p = ctx.params
    ssh = ssh_settings(p["cluster"], p["hosts"], p["ssh_user"], p["ssh_key"], p["ssh_port"], p["ssh_known_hosts"],
                       p["swarm_nodes"])
    here = Here(store=p["store"], cluster=p["cluster"], ssh=ssh, netns=p["netns"], base_port=p["base_port"],
                client=p["client_cmd"])
    return replay_spec(run_dir, here)


# What --replay goes with: where and how it runs, and what it prints (never the workload's options)
REPLAY_FLAGS = ("replay_dir", "store", "client_cmd", "cluster", "hosts", "ssh_user", "ssh_key", "ssh_port",
                "ssh_known_hosts", "swarm_nodes", "netns", "base_port", "as_json", "junit", "repeat")


LIVENESS = ("stuck", "starved")  # the liveness checker's findings (harness/checker/liveness.py), each a count
# the other promises' findings, each a count in the summary: (summary key, finding)
PROMISES = (("handover_stalls", "liveness:handover"), ("outlived_holder", "outlived"),
            ("expired_grants", "fresh:expired"), ("overlong_grants", "fresh:overlong"),
            ("acquires_late", "timeouts:late"), ("acquires_early", "timeouts:early"),
            ("held_true_after_lost", "noticed"), ("client_deaths", "client-died"))


def findings(summary: dict) -> frozenset[str]:
    """What a run found, as shrinking compares it: each cause of its violations
    ("violation:<cause>"), "stale-write" and "lost-update" when it had any, each kind of
    liveness finding it had ("liveness:stuck", a free lock nobody could get once faults
    healed; "liveness:starved", a queue's waiter passed over; "liveness:handover", a stalled
    handover), each other promise it broke (PROMISES: "outlived", "fresh:expired",
    "timeouts:late", "noticed", "client-died", ...), and "invalid" for an invalid verdict with
    none of these. Empty: nothing to shrink."""
    out = set()
    if summary.get("valid") is False or summary.get("violations"):
        causes = summary.get("violations_by_cause") or {}
        out |= {f"violation:{c}" for c, n in causes.items() if n}
        if summary.get("violations") and not causes:
            out.add("violation")
    if summary.get("stale_writes_accepted"):
        out.add("stale-write")
    if summary.get("lost_updates"):
        out.add("lost-update")
    counts = [(kind, f"liveness:{kind}") for kind in LIVENESS] + list(PROMISES)
    for key, finding in counts:
        n = summary.get(key)
        if isinstance(n, int) and not isinstance(n, bool) and n > 0:
            out.add(finding)
    if summary.get("valid") is False and not out:
        out.add("invalid")
    return frozenset(out)


def reproduces(target: frozenset[str], got: frozenset[str]) -> bool:
    """Whether a replay that found `got` shows the original's finding `target`: one of its
    violations' causes when it had violations (a lost update alone is not the same bug),
    else one of its other findings (for a liveness finding, the same kind: a stuck lock is
    not reproduced by a starved waiter, nor by a violation)."""
    violations = {f for f in target if f.startswith("violation")}
    return bool((violations or target) & got)


def read_summary(run_dir: str | Path) -> dict:
    """The stored run's summary (results.json), or one sentence why there is none."""
    from harness.core.safefile import read_inside

    p = Path(run_dir) / "results.json"
    try:  # never through a link out of the run dir
        return json.loads(read_inside(run_dir, p).decode("utf-8"))["summary"]
    except (OSError, ValueError, KeyError, TypeError):  # a link out is its own sentence (read_inside)
        raise BadArgument(f"{run_dir} has no readable results.json, so its finding is unknown; "
                          f"run `chaos report {run_dir}` first") from None


def _nothing(run_dir: str, summary: dict):
    """Refuse a run without a finding, in one sentence."""
    how = "was valid" if summary.get("valid") is True else "found nothing (its verdict was unknown)"
    raise BadArgument(f"{run_dir} {how}: no violation, stale write, lost update, liveness finding or broken "
                      f"promise, so there is nothing to shrink")


@click.command()
@click.argument("run_dir", type=click.Path())
@click.option("--trials", type=click.IntRange(1, 20), default=3, show_default=True,
              help="replays of each candidate schedule")
@click.option("--rate", type=click.FloatRange(0.01, 1.0), default=0.67, show_default=True,
              help="share of a candidate's replays that must show the finding for it to be kept")
@click.option("--budget", type=click.FloatRange(0.1, 24 * 60), default=30.0, show_default=True,
              help="minutes the search may take; it ends with the smallest schedule so far")
@click.option("--store", default="store", show_default=True,
              help="where the replays are stored (never the store a run dir names)")
@click.option("--client", "client_cmd", default=None, metavar="CMD",
              help="the external client's command, when RUN_DIR ran one (a run dir never gives a command)")
@click.option("--cluster", type=click.Choice(CLUSTERS), default="local", show_default=True,
              help="where the replays' servers run (never the provider a run dir names)")
@ssh_options
def shrink(run_dir, trials, rate, budget, store, client_cmd, cluster, hosts, ssh_user, ssh_key, ssh_port,
           ssh_known_hosts, swarm_nodes):
    """Search for the smallest fault schedule of RUN_DIR that still shows its finding."""
    from harness.commands.cliargs import check_writable_dir, ssh_settings
    from harness.core import interrupts
    from harness.core.pathcheck import DIR, check_path

    # shrink.json is written into RUN_DIR at the end, and the replays into the store: both
    # are checked before the first replay, not found unwritable after an hour of them
    check_path(run_dir, want=DIR, write=True, replaces=(SHRINK_FILE,),
               hint="give a run directory you can write to (shrink.json goes into it), such as store/latest")
    check_writable_dir(store, "--store")
    if Path(run_dir).is_dir():  # store/latest moves to each replay: shrink the run it named when asked
        run_dir = str(Path(run_dir).resolve())
    known = (Path(run_dir) / "results.json").is_file()
    summary = read_summary(run_dir) if known else {}
    if known and not findings(summary):
        _nothing(run_dir, summary)
    here = Here(store=store, cluster=cluster, client=client_cmd,
                ssh=ssh_settings(cluster, hosts, ssh_user, ssh_key, ssh_port, ssh_known_hosts, swarm_nodes))
    spec, schedule = replay_spec(run_dir, here)  # one sentence for what is not a replayable run
    summary = summary or read_summary(run_dir)
    target = findings(summary)
    if not target:
        _nothing(run_dir, summary)
    print(f"chaos shrink {run_dir}: {words(schedule.faults)}; looking for {', '.join(sorted(target))}, "
          f"{trials} trial(s) each, kept at {rate:g}, budget {budget:g} min", flush=True)
    got = smallest(run_dir, here, spec, schedule, lambda doc: reproduces(target, findings(doc.get("summary") or {})),
                   sorted(target), trials=trials, rate=rate, budget_s=budget * 60)
    print(f"smallest: {got.words}, {got.best.time_limit:g} s of workload; {got.rate_said}; "
          f"{got.candidates} candidates, {got.replays} replays, {got.minutes:.1f} min"
          f"{got.ended}; replay it: {replay_command(got.final, client_cmd, store)}")
    if got.interrupted:
        return interrupts.exit_code(got.signal or signal.SIGINT)
    if not got.reproduced:
        print(f"chaos shrink: nothing reproduced: {', '.join(sorted(target))} showed in none of the {got.replays} "
              f"replay(s) of {run_dir}'s schedule or a smaller one"
              + (" within the budget (give more --budget)" if got.stopped or len(got.outcomes) < trials else "")
              + "; the finding may need a timing the replay does not give (try --trials, or chaos run --repeat)",
              file=sys.stderr)
        return EXIT_UNKNOWN
    return 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Shrunk:
    """What a shrink found: the smallest schedule kept, its trials, and the run dir to replay."""

    start: Any  # engine.shrink.Candidate: the run's own schedule
    best: Any  # the smallest candidate kept (start when nothing smaller was)
    outcomes: list  # the best's trials (True: it showed the finding again)
    final: str  # a replay of the best that showed it, else the original run dir
    candidates: int
    replays: int
    minutes: float
    interrupted: bool
    stopped: bool  # the budget ran out
    reproduced: bool  # any replay showed the finding
    signal: Any = None  # the signal that interrupted a replay

    @property
    def words(self) -> str:
        return words(self.best.faults)

    @property
    def rate_said(self) -> str:
        if self.outcomes:
            return f"reproduced in {sum(self.outcomes)} of {len(self.outcomes)}"
        return "nothing smaller reproduced, and the original schedule was not replayed"

    @property
    def ended(self) -> str:
        return " (INTERRUPTED: the best so far)" if self.interrupted else \
            " (budget spent: the best so far)" if self.stopped else ""


def smallest(run_dir: str, here: Here, spec: Any, schedule: Schedule, shows, target: list[str], *, trials: int,
             rate: float, budget_s: float, out=None) -> Shrunk:
    """Search for the smallest schedule of run_dir whose replays still show its finding
    (`shows(results doc)`, one replay per trial); shrink.json is written into run_dir and the
    reports relinked. A Ctrl-C ends the replay in hand and the search with the best so far
    (`interrupted`); `out` (stdout by default) gets a progress line per candidate."""
    from harness.core import interrupts
    from harness.engine.shrink import Candidate, Search

    out = out or sys.stdout
    deadline = time.monotonic() + budget_s
    started = time.monotonic()
    ended_by: list = []  # the signal that ended a replay (SIGINT, SIGTERM)
    replays: dict[str, list[str]] = {}  # candidate (its key) -> its replays' run dirs

    def oracle(c: Candidate) -> bool:
        from harness.engine.runner import run as run_spec

        s, sched = replay_spec(run_dir, here, c.faults, c.time_limit)
        outcome = run_spec(s, progress=False, replay=sched)
        if outcome.interrupted:
            ended_by.append(outcome.signal)
            raise KeyboardInterrupt
        replays.setdefault(c.key(), []).append(str(outcome.run_dir))
        return bool(shows(getattr(outcome, "results", None) or {"summary": outcome.summary}))

    def said(t, s: Search) -> None:
        hits = sum(t.outcomes)
        print(f"  [{len(s.tried)} tried, {s.trials_run} replays, {(time.monotonic() - started) / 60:.1f} min] "
              f"{t.step}: {len(t.candidate.faults)} fault(s), {t.candidate.time_limit:g} s: {hits} of "
              f"{len(t.outcomes)} {'KEPT' if t.kept else 'no'}; smallest: {words(s.best.faults)}", file=out, flush=True)

    search = Search(oracle, trials=trials, rate=rate, recovery=spec.recovery,
                    stop=lambda: time.monotonic() > deadline, on_tried=said)
    start = Candidate(faults=schedule.faults, time_limit=spec.time_limit)
    interrupted = False
    try:
        search.run(start)  # each replay ends on the first Ctrl-C, healed and stopped (runner.run)
        search.confirm()  # the best's full `trials`, for its rate
        if not search.best_outcomes:  # nothing smaller kept: replay the original too, its rate measured, not assumed
            while len(search.best_outcomes) < trials and time.monotonic() <= deadline:
                search.trials_run += 1
                search.best_outcomes.append(bool(oracle(start)))
    except KeyboardInterrupt:
        interrupted = True
    best = search.best or start
    with interrupts.shielded("writing shrink.json"):
        final = _write(run_dir, here.store, target, search, start, best, replays, trials, rate, interrupted)
    return Shrunk(start=start, best=best, outcomes=list(search.best_outcomes), final=final,
                  candidates=len(search.tried), replays=search.trials_run,
                  minutes=(time.monotonic() - started) / 60, interrupted=interrupted, stopped=search.stopped,
                  reproduced=bool(sum(search.best_outcomes) or any(any(t.outcomes) for t in search.tried)),
                  signal=next(iter(ended_by), None))


def _write(run_dir, store, target, search, start, best, replays, trials, rate, interrupted) -> str:
    """shrink.json into the original run dir; the final schedule as a replayable run (a run dir
    of the best candidate's last replay; the original itself when nothing smaller was kept)."""
    from results import store as results_store

    # a replay of the best that showed the finding, else (nothing did) the original itself
    final = replays[best.key()][-1] if replays.get(best.key()) and any(search.best_outcomes) else str(run_dir)
    here = Path(run_dir).resolve()  # absolute: the reports and the index link by these, from any directory
    doc = {"of": str(here), "findings": sorted(target), "trials": trials, "rate": rate,
           "interrupted": interrupted, "budget_spent": search.stopped, "replays": search.trials_run,
           "start": start.to_dict(), "best": best.to_dict(), "best_outcomes": search.best_outcomes,
           "best_run": str(Path(final).resolve()),
           "candidates": [{**t.to_dict(), "runs": replays.get(t.candidate.key(), [])} for t in search.tried]}
    results_store.write_json(Path(run_dir) / SHRINK_FILE, doc)
    redraw = [Path(run_dir)]
    if final != str(run_dir):
        results_store.write_json(Path(final) / "shrunk-from.json", {"of": str(here), "shrink": str(here / SHRINK_FILE)})
        redraw.append(Path(final))
    print(f"wrote {Path(run_dir) / SHRINK_FILE}", file=sys.stderr)
    for line in relink(*redraw):  # their reports were written before the shrink: now they link to each other
        print(f"chaos shrink: {line}", file=sys.stderr)
    return final


def relink(*run_dirs: Path) -> list[str]:
    """Redraw the report.html of each run dir from its stored results.json and history (no
    checker runs again), so a report written before its shrink links to it. Returns one
    line per report that could not be redrawn (its old report stays)."""
    from harness.core.safefile import read_inside
    from results.report import write_report
    from results.store import load_run

    failed = []
    for d in run_dirs:
        try:
            spec, history = load_run(Path(d), need_dir=True)
            doc = json.loads(read_inside(Path(d), Path(d) / "results.json").decode("utf-8"))
            write_report(Path(d), spec, history, doc)
        except Exception as e:  # shrink.json is the record; a report left without its links is only an inconvenience
            failed.append(f"could not redraw {Path(d) / 'report.html'} with its shrink links ({type(e).__name__}: {e}); "
                          f"`chaos report {d}` draws it again")
    return failed


def repeat(spec: Any, times: int, schedule: Schedule | None, human, junit: str | None = None) -> tuple[int, list]:
    """`chaos run --repeat M`: the same spec (and replayed schedule, if any) M times, each run
    kept; one line per run, then "invalid in k of M"; with `junit`, one JUnit file with one
    testcase per run (results/junit.py cases_from_runs). Returns (exit code, summaries): 1 if
    any run was invalid, else 2 if any was unknown, else 0; 130/143 when a signal ended it
    (the runs so far are reported, and are the JUnit file's cases)."""
    from harness.core import interrupts
    from harness.engine.runner import run as run_spec

    summaries = []
    ended = None
    for n in range(1, times + 1):
        outcome = run_spec(spec, progress=True, replay=schedule)
        s = outcome.summary
        summaries.append(s)
        finding = ", ".join(sorted(findings(s))) or ("valid" if s.get("valid") is True else "unknown")
        word = "INVALID" if s.get("valid") is False else finding.upper()
        if outcome.interrupted and s.get("valid") is not False:
            word = f"INTERRUPTED ({finding} in the part that ran)"  # never VALID for a run cut short
        print(f"run {n} of {times}: {word}"
              f"{' (' + finding + ')' if s.get('valid') is False else ''} {outcome.run_dir}", file=human, flush=True)
        if outcome.interrupted:
            ended = outcome.signal or interrupts.ended_by()
            break
    if junit:
        from results.junit import cases_from_runs, write_junit

        write_junit(junit, cases_from_runs(summaries, of=times), suite="chaoslock-repeat")
    k = sum(s.get("valid") is False for s in summaries)
    unknown = sum(s.get("valid") not in (True, False) for s in summaries)
    print(f"invalid in {k} of {len(summaries)}" + (f" ({unknown} unknown)" if unknown else "")
          + (f"; INTERRUPTED after {len(summaries)} of {times}" if ended else ""), file=human)
    if ended is not None:
        return interrupts.exit_code(ended), summaries
    return (1 if k else 2 if unknown else 0), summaries
