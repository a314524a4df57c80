"""`chaos audit`: search for the bug in one lock client, and a report card of every promise.

It learns the client's numbers (its TTL, acquire timeout and, for a session design, its
session), plans the battery (harness/engine/audit.py: one fault kind per scenario, scaled to
those numbers), refuses up front what this provider or client cannot run (each such scenario
is NOT TESTED, with the refusal's own sentence), then runs the scenarios through the same
`runner.run` as `chaos run`, every one once and the budget's rest on those that found
something. The card (terminal, audit.json and audit.html in store/audit/<timestamp>/, JUnit)
has one row per promise. Exit 1 on any FAIL, 0 when every tested row passed, 2 when nothing
could be judged, 254 on bad input (nothing started), 130 or 143 when Ctrl-C or SIGTERM ended
it: the run in hand is torn down and the card covers the runs that finished.
Each FAIL's first run is then shrunk (`chaos shrink`'s search, `--shrink MIN` each): the
smallest schedule whose replays still fail that row, its reproduce rate and replay command.
"""

from __future__ import annotations

import json
import shlex
import signal
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from harness.commands.cliargs import Seconds, check_writable_dir, check_writable_file
from harness.commands.shrink import replay_command
from harness.core.errors import BadArgument
from harness.engine import audit as plan

DEFAULT_BUDGET_MIN = 10.0
DEFAULT_SHRINK_MIN = 3.0
DEFAULT_TTL_MS, DEFAULT_TIMEOUT_S = 2000, 2.0  # when neither a flag nor the client's describe reply gives them
SHRINK_TRIALS, SHRINK_RATE = 2, 0.5  # a schedule is kept when one of its two replays fails the row again


def _client(backend: str, options: dict, ttl_ms: int, timeout_s: float, renew: bool,
            stated: dict | None = None) -> plan.Client:
    from harness.core import plugins
    from harness.core.options import values
    from workloads.external import option_ms

    cls = plugins.backend_class(backend)
    declared = values(options, getattr(cls, "OPTIONS", ()) or ())
    stated = stated or {}
    session = declared.get("session_timeout_ms") or option_ms(options, "session_timeout_ms") or stated.get("session_ms")
    command = option_ms(options, "command_timeout_ms") or stated.get("command_timeout_ms")
    return plan.Client(ttl_ms=ttl_ms, acquire_timeout_s=timeout_s, session_s=session / 1000 if session else None,
                       command_timeout_s=command / 1000 if command else None,
                       renew=renew, fencing=bool(getattr(cls, "has_fencing", False)))


def _spec(base, s: plan.Scenario, seed: int):
    from harness.core.refusals import fit

    spec = replace(base, nemesis=s.nemesis, options={**base.options, **s.options}, clock_jump_s=s.clock_jump_s,
                   nemesis_interval=s.interval or base.nemesis_interval,
                   concurrency=min(base.concurrency, s.concurrency)
                   if s.concurrency and not str(base.lock).startswith("semaphore") else base.concurrency,
                   hold_until_expiry=s.hold_until_expiry and not base.renew, time_limit=s.time_limit,
                   recovery=s.recovery, seed=seed, command=f"{base.command} (scenario {s.name})")
    while spec.nemesis and fit(spec) and spec.time_limit < 600:  # the fault must fit in the fault phase
        spec = replace(spec, time_limit=spec.time_limit + 5)
    return spec


def _refusal(spec) -> str | None:
    """The sentence this scenario is refused with, before any server starts (None: it can run)."""
    from harness.engine.runner import refuse_early

    try:
        refuse_early(spec.validate())
    except BadArgument as e:
        return str(e)
    return None


@click.command()
@click.option("--backend", "-b", default=None, help="a built-in lock design (chaos list)")
@click.option("--client", "client_cmd", default=None, metavar="CMD",
              help="your own lock client: a command speaking the client protocol (docs/client-protocol.md)")
@click.option("--servers", default=None, metavar="KIND:N", help="with --client: the lock service, e.g. valkey:1")
@click.option("--lock", "lock", default="mutex", show_default=True, metavar="mutex|rw|semaphore:N",
              help="the lock kind to audit: a read-write lock's or a semaphore's exclusion is judged as such")
@click.option("--renew", is_flag=True, help="holders renew every TTL/3; adds the faults that bite after k renews")
@click.option("--budget", type=Seconds(0, 24 * 60), default=DEFAULT_BUDGET_MIN, show_default=True, metavar="MIN",
              help="minutes to spend; every scenario runs once even past it, the rest goes to those that found something")
@click.option("--shrink", "shrink_min", type=Seconds(0, 24 * 60), default=DEFAULT_SHRINK_MIN, show_default=True,
              metavar="MIN", help="minutes to shrink each FAIL's first run to its smallest schedule (0: none), "
                                  "after the budget")
@click.option("--seed", type=int, default=1, show_default=True, help="first seed; a scenario's k-th run uses seed+k")
@click.option("--ttl", "ttl_ms", type=int, default=None,
              help=f"the client's lock TTL in ms (default: what its describe reply states, else {DEFAULT_TTL_MS})")
@click.option("--acquire-timeout", type=Seconds(0, 600, open_lo=True), default=None,
              help=f"the client's acquire timeout, s (default: what its describe reply states, else {DEFAULT_TIMEOUT_S:g})")
@click.option("--concurrency", "-c", type=click.IntRange(2, 16), default=3, show_default=True,
              help="client processes per run")
@click.option("--scenarios", default=None, metavar="NAME,...",
              help="run only these scenarios of the battery (docs/audit.md); the other promises' rows say so")
@click.option("--option", "-o", "options", multiple=True, help="option NAME=VALUE for every run (chaos list --options)")
@click.option("--store", default="store", show_default=True, help="where the runs and store/audit/<timestamp>/ land")
@click.option("--recheck", "recheck", default=None, metavar="AUDIT_DIR",
              help="judge a finished audit's runs again with today's checkers and write its card anew (no server "
                   "starts; the other flags but --json and --junit are not used)")
@click.option("--json", "as_json", is_flag=True, help="print the card as one JSON object on stdout (the rest to stderr)")
@click.option("--junit", type=click.Path(dir_okay=False), default=None, help="also write one JUnit testcase per promise")
def audit(backend, client_cmd, servers, lock, renew, budget, shrink_min, seed, ttl_ms, acquire_timeout, concurrency, scenarios, options,
          store, recheck, as_json, junit):
    """Run a battery of faults scaled to one client's TTL and timeouts; print a card per promise.

    Exit 1 on any FAIL, 0 when every tested promise held, 2 when nothing could be judged,
    254 on bad input, 130/143 when interrupted (the card covers the finished runs).
    """
    from harness.commands.cli import parse_options
    from harness.core.spec import TestSpec

    if recheck is not None:
        return _recheck(recheck, as_json, junit)
    opts = parse_options(options)
    if client_cmd is not None:
        if backend not in (None, "external"):
            raise BadArgument(f"--client audits your own client; drop --backend {backend} (or drop --client)")
        if not servers:
            raise BadArgument("--client needs --servers KIND:N, the lock service it talks to (e.g. valkey:1)")
        if not client_cmd.strip():
            raise BadArgument("--client needs the client's command: chaos audit --client 'CMD ARGS' --servers KIND:N")
        backend, opts["command"], opts["servers"] = "external", client_cmd, servers
    elif servers is not None:
        raise BadArgument("--servers goes with --client; a built-in backend declares its own servers")
    elif backend is None:
        raise BadArgument("name what to audit: --client 'CMD' --servers KIND:N, or --backend NAME (chaos list)")
    given = sorted(set(opts) & {"pause_multiple", "cut_ms", "lose", "during", "clock_target", "clock_mode", "delay_ms"})
    if given:
        raise BadArgument(f"-o {given[0]} is the audit's to set per scenario; drop it (chaos run tries one setting)")
    if ttl_ms is not None and not 100 <= ttl_ms <= 600_000:
        raise BadArgument(f"--ttl {ttl_ms} must be 100..600000 ms")
    if client_cmd is not None:
        from harness.core.pathcheck import check_program

        check_program(client_cmd, "--client")
    stated, told = {}, None
    if client_cmd is not None and (ttl_ms is None or acquire_timeout is None or not renew):
        from workloads.describe import describe

        stated, told = describe(client_cmd)
    ttl_ms = ttl_ms if ttl_ms is not None else stated.get("ttl_ms", DEFAULT_TTL_MS)
    acquire_timeout = acquire_timeout if acquire_timeout is not None else stated.get("acquire_timeout_s",
                                                                                       DEFAULT_TIMEOUT_S)
    renew = renew or bool(stated.get("renews"))
    base = TestSpec(backend=backend, ttl_ms=ttl_ms, acquire_timeout=acquire_timeout, concurrency=concurrency,
                    renew=renew, lock=lock, options=opts, store=store, seed=seed,
                    command=shlex.join(["chaos"] + sys.argv[1:])).validate()
    client = _client(backend, opts, ttl_ms, acquire_timeout, renew, stated)
    base = replace(base, fencing=client.fencing)
    battery = plan.battery(client)
    only = None if scenarios is None else list(dict.fromkeys(n.strip() for n in scenarios.split(",") if n.strip()))
    unknown = [n for n in only or () if n not in {s.name for s in battery}]
    if only is not None and (unknown or not only):
        raise BadArgument(f"--scenarios: {', '.join(map(repr, unknown)) or 'nothing'} is no scenario of this battery; "
                          f"choose from: {', '.join(s.name for s in battery)}")
    check_writable_dir(store, "--store")
    if junit:
        check_writable_file(junit, "--junit")
    scenarios, refused = [], {}
    for s in battery:
        if only is not None and s.name not in only:
            continue
        s = replace(s, time_limit=_spec(base, s, seed).time_limit)
        why = _refusal(_spec(base, s, seed))
        if why and not s.nemesis:  # no fault at all, and still refused: the input is bad
            raise BadArgument(why)
        if why:
            refused[s.name] = why
        else:
            scenarios.append(s)
    return _audit(base, client, scenarios, refused, budget * 60, client_cmd, as_json, junit, shrink_min * 60, told)


def _audit(base, client, scenarios, refused, budget_s, client_cmd, as_json, junit, shrink_s=0.0,
           told: str | None = None) -> int:
    from harness.core import interrupts
    from harness.engine.runner import run as run_spec
    from results.store import stamped_dir

    human = sys.stderr if as_json else sys.stdout
    adir = stamped_dir(Path(base.store) / "audit")
    what = client_cmd or base.backend
    print(f"chaos audit {what}: TTL {client.ttl_ms} ms, acquire timeout {client.acquire_timeout_s:g} s"
          + (f", session {client.session_s:g} s" if client.session_s else "")
          + (f", command timeout {client.command_timeout_s:g} s" if client.command_timeout_s else "")
          + (", renewing" if client.renew else "")
          + (f" (asked to describe itself, {told})" if told else "")
          + f"; {len(scenarios)} scenarios (one pass about {plan.first_pass_s(scenarios) / 60:.1f} min), "
            f"budget {budget_s / 60:g} min; into {adir}", file=human)
    for name, why in refused.items():
        print(f"  NOT TESTED {name}: {why}", file=human)
    runs: list[plan.Run] = []
    done: list[tuple[str, bool]] = []
    calibration: dict = {}
    stopped = None  # why the audit stopped before its budget (a client that never acquires)
    t0, ended, interrupted = time.monotonic(), None, False
    try:
        while (s := plan.next_run(scenarios, done, time.monotonic() - t0, budget_s)) is not None:
            k = sum(1 for n, _ in done if n == s.name)
            spec = _spec(base, s, base.seed + k)
            of = plan.planned_runs(scenarios, done, time.monotonic() - t0, budget_s)
            print(f"[run {len(done) + 1} of {of}] {s.name} seed {spec.seed}: {s.what} ({spec.time_limit:g} s)",
                  file=human, flush=True)
            try:
                out = run_spec(spec, progress=False)
            except BadArgument as e:  # refused by the cluster it met (a capability it lacks): not tested
                refused[s.name] = str(e)
                scenarios = [x for x in scenarios if x.name != s.name]
                print(f"  NOT TESTED {s.name}: {e}", file=human)
                continue
            run = plan.Run(scenario=s.name, seed=spec.seed, run_dir=str(out.run_dir), doc=out.results,
                           replay=replay_command(str(out.run_dir), client_cmd, base.store))
            if out.interrupted:  # a prefix of a run: what it found stands, but it keeps no promise, calibrates nothing
                run = replace(run, partial=True)
            runs.append(run)
            if out.interrupted:
                done.append((s.name, plan.found(out.results, client.fencing)))
                interrupted, ended = True, out.signal or interrupts.ended_by()
                break
            if s.name == "contention" and k == 0:
                calibration = plan.calibration(out.results)
                print(f"  fault-free: {plan.calibration_words(calibration)}", file=human, flush=True)
                if not calibration.get("acquires_ok"):
                    stopped = (f"the client never acquired the lock in the fault-free run ({run.run_dir}: "
                               f"{plan.calibration_words(calibration)}); no fault can be judged on it")
                    print(f"chaos audit: {stopped}", file=human)
                    done.append((s.name, False))
                    break
            hit = plan.found(out.results, client.fencing)
            done.append((s.name, hit))
            rows = plan.card(scenarios, runs, refused, fenced=client.fencing, lock=str(base.lock))
            fails = [r["title"] for r in rows if r["status"] == plan.FAIL]
            print(f"  {s.name}: {'FOUND something' if hit else 'nothing found'}; findings so far: "
                  f"{', '.join(fails) if fails else 'none'} ({round(time.monotonic() - t0)} s of a {budget_s:g} s "
                  f"budget)", file=human, flush=True)
    except KeyboardInterrupt:  # between two runs: nothing is half done
        interrupted, ended = True, interrupts.ended_by()
    interrupted = interrupted or bool(interrupts.presses())
    rows = plan.card(scenarios, runs, refused, fenced=client.fencing, lock=str(base.lock))
    if stopped:
        rows = [{**r, "status": plan.NOT_TESTED, "why": stopped} if r["status"] != plan.FAIL else r for r in rows]
    if not interrupted and shrink_s > 0:
        ended = _shrink(rows, base, client_cmd, shrink_s, human)
        interrupted = ended is not None or bool(interrupts.presses())
    if interrupted:
        interrupts.ignore_stops()  # the card is written whatever is pressed next
    doc = {"client": what, "backend": base.backend, "servers": base.options.get("servers"),
           "ttl_ms": client.ttl_ms, "acquire_timeout_s": client.acquire_timeout_s, "session_s": client.session_s,
           "command_timeout_s": client.command_timeout_s, "described": told, "calibration": calibration,
           "calibration_said": plan.calibration_words(calibration) if calibration else None,
           "stopped": stopped, "renew": client.renew, "lock": str(base.lock), "fenced": client.fencing, "budget_s": budget_s,
           "wall_s": round(time.monotonic() - t0, 1), "command": base.command,
           "scenarios": [{"name": s.name, "what": s.what, "nemesis": list(s.nemesis), "options": s.options,
                          "runs": sum(1 for r in runs if r.scenario == s.name)} for s in scenarios],
           "not_tested": refused, "rows": rows, "exit_code": plan.exit_code(rows),
           "runs": [{"scenario": r.scenario, "seed": r.seed, "run_dir": r.run_dir,
                     "valid": (r.doc.get("summary") or {}).get("valid")} for r in runs]}
    if interrupted:
        doc["interrupted"] = interrupts.how(ended)
    from results.audit import write_card_html
    from results.store import write_json

    write_json(adir / "audit.json", doc)
    write_card_html(adir / "audit.html", doc)
    try:  # store/index.html lists the audit beside the runs (chaos serve renders it fresh anyway)
        from results.index import write_index

        write_index(Path(base.store))
    except OSError as e:
        print(f"chaos audit: could not refresh {Path(base.store) / 'index.html'}: {e}", file=human)
    if junit:
        from results.junit import write_junit

        write_junit(junit, junit_cases(rows, what), suite="chaos audit")
    print(card_text(rows), file=human)
    print(f"card: {adir / 'audit.json'} and {adir / 'audit.html'}", file=human)
    if as_json:
        print(json.dumps(doc, default=str))
    if interrupted:
        print(f"chaos audit: INTERRUPTED by {interrupts.how(ended)} after {len(runs)} finished run(s); the card "
              f"covers only those; {interrupts.exit_line(ended)}", file=human)
        return interrupts.exit_code(ended)
    print(f"exit code: {doc['exit_code']}", file=human)
    return doc["exit_code"]


def _recheck(adir: str, as_json: bool, junit: str | None) -> int:
    """`--recheck AUDIT_DIR`: each of the audit's runs judged again from its history (as `chaos
    report` does: results.json and the report rewritten), and the card made again from them, with
    the battery of the audit's own numbers; the shrinks already made are kept beside their runs."""
    from harness.core.pathcheck import DIR, check_path
    from harness.core.safefile import read_inside
    from harness.engine.analysis import analyse
    from results.audit import write_card_html
    from results.store import load_run, write_json

    check_path(adir, want=DIR, write=True, replaces=("audit.json", "audit.html"),
               hint="give an audit's directory, store/audit/<timestamp>/")
    d = Path(adir)
    try:
        doc = json.loads(read_inside(d, d / "audit.json").decode("utf-8"))
        client = plan.Client(ttl_ms=int(doc["ttl_ms"]), acquire_timeout_s=float(doc["acquire_timeout_s"]),
                             session_s=doc.get("session_s"), command_timeout_s=doc.get("command_timeout_s"),
                             renew=bool(doc["renew"]), fencing=bool(doc["fenced"]))
        names = [s["name"] for s in doc["scenarios"]]
        stored = [(r["scenario"], int(r["seed"]), str(r["run_dir"])) for r in doc["runs"]]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise BadArgument(f"{d / 'audit.json'} is not an audit's card ({type(e).__name__}: {e}); give the "
                          f"directory chaos audit wrote, store/audit/<timestamp>/") from None
    battery = {s.name: s for s in plan.battery(client)}
    scenarios = [battery[n] for n in names if n in battery]
    external = doc.get("backend") == "external"
    shrunk = {f["run_dir"]: f["shrunk"] for r in doc.get("rows") or [] for f in r.get("failures") or [] if f.get("shrunk")}
    runs = []
    for scenario, seed, run_dir in stored:
        spec, _ = load_run(run_dir, need_dir=True)
        runs.append(plan.Run(scenario=scenario, seed=seed, run_dir=run_dir, doc=analyse(spec, Path(run_dir)),
                             replay=replay_command(run_dir, doc.get("client") if external else None,
                                                   str(Path(run_dir).parent.parent))))
    rows = plan.card(scenarios, runs, doc.get("not_tested") or {}, fenced=client.fencing, lock=doc.get("lock") or "mutex")
    _attach(rows, shrunk)
    doc.update(rows=rows, exit_code=plan.exit_code(rows), rechecked=time.strftime("%Y-%m-%dT%H:%M:%S"),
               runs=[{"scenario": r.scenario, "seed": r.seed, "run_dir": r.run_dir,
                      "valid": (r.doc.get("summary") or {}).get("valid")} for r in runs])
    write_json(d / "audit.json", doc)
    write_card_html(d / "audit.html", doc)
    if junit:
        from results.junit import write_junit

        write_junit(junit, junit_cases(rows, str(doc.get("client"))), suite="chaos audit")
    human = sys.stderr if as_json else sys.stdout
    print(f"chaos audit --recheck {d}: {len(runs)} run(s) judged again", file=human)
    print(card_text(rows), file=human)
    if as_json:
        print(json.dumps(doc, default=str))
    print(f"exit code: {doc['exit_code']}", file=human)
    return doc["exit_code"]


def _shrink(rows: list[dict], base, client_cmd: str | None, budget_s: float, human) -> Any:
    """Shrink each FAIL row's first run (plan.to_shrink) to the smallest schedule whose replays
    still fail that row; each failure gains "shrunk" (shared by the rows that failed in the same
    run). Returns the signal that interrupted a replay, else None."""
    from harness.commands.shrink import replay_spec, smallest
    from harness.engine.replay_input import Here

    here = Here(store=base.store, client=client_cmd)
    done: dict[str, dict] = {}
    for promise, failure in plan.to_shrink(rows):
        print(f"shrinking {failure['scenario']} seed {failure['seed']} ({promise}), at most {budget_s / 60:g} min: "
              f"{failure['run_dir']}", file=human, flush=True)
        try:
            spec, schedule = replay_spec(failure["run_dir"], here)
        except BadArgument as e:  # a run whose faults cannot be replayed: said, not shrunk
            done[failure["run_dir"]] = {"error": str(e)}
            print(f"  not shrunk: {e}", file=human)
            continue
        got = smallest(failure["run_dir"], here, spec, schedule, lambda doc, p=promise: plan.fails(p, doc),
                       [f"audit:{promise}"], trials=SHRINK_TRIALS, rate=SHRINK_RATE, budget_s=budget_s, out=human)
        done[failure["run_dir"]] = {
            "schedule": got.words, "faults": len(got.best.faults), "of_faults": len(got.start.faults),
            "time_limit": got.best.time_limit, "reproduced": f"{sum(got.outcomes)} of {len(got.outcomes)}",
            "rate": got.rate_said + got.ended, "minutes": round(got.minutes, 1), "run_dir": got.final,
            "replay": replay_command(got.final, client_cmd, base.store)}
        print(f"  smallest: {got.words}; {got.rate_said}{got.ended}", file=human, flush=True)
        if got.interrupted:
            _attach(rows, done)
            return got.signal or signal.SIGINT
    _attach(rows, done)
    return None


def _attach(rows: list[dict], done: dict[str, dict]) -> None:
    for r in rows:
        for f in r["failures"]:
            if f["run_dir"] in done:
                f["shrunk"] = done[f["run_dir"]]


def card_text(rows: list[dict]) -> str:
    """The card as the terminal shows it: one line per promise, then each FAIL's runs."""
    width = max(len(r["title"]) for r in rows)
    lines = [f"{'promise':{width}}  {'verdict':10}  why"]
    for r in rows:
        lines.append(f"{r['title']:{width}}  {r['status']:10}  {r['why']}")
    for r in rows:
        for f in r["failures"][:3]:
            lines.append(f"FAIL {r['title']}: {f['scenario']} seed {f['seed']}: {f['cause']}")
            lines.append(f"  run dir: {f['run_dir']}")
            lines.append(f"  replay:  {f['replay']}")
            sh = f.get("shrunk") or {}
            if sh.get("error"):
                lines.append(f"  not shrunk: {sh['error']}")
            elif sh:
                lines.append(f"  shrunk:  {sh['schedule']} ({sh['faults']} of {sh['of_faults']} fault(s), "
                             f"{sh['time_limit']:g} s); {sh['rate']}")
                lines.append(f"  replay the smallest: {sh['replay']}")
        if len(r["failures"]) > 3:
            lines.append(f"  ... and {len(r['failures']) - 3} more run(s) (audit.json)")
    return "\n".join(lines)


def _shrunk_line(f: dict) -> str:
    sh = f.get("shrunk") or {}
    if not sh or sh.get("error"):
        return ""
    return f"\n  shrunk: {sh['schedule']}; {sh['rate']}\n  replay the smallest: {sh['replay']}"


def junit_cases(rows: list[dict], what: str) -> list[dict]:
    """One testcase per promise: PASS passes, FAIL fails, NOT TESTED is skipped with its reason."""
    out = []
    for r in rows:
        msg = r["why"] + "".join(f"\n{f['scenario']} seed {f['seed']}: {f['cause']}\n  run dir: {f['run_dir']}\n"
                                 f"  replay: {f['replay']}" + _shrunk_line(f) for f in r["failures"])
        case = {"name": r["title"], "classname": f"audit.{what}", "valid": r["status"] != plan.FAIL, "message": msg}
        if r["status"] == plan.NOT_TESTED:
            case["skipped"] = r["why"]
        out.append(case)
    return out
