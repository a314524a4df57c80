"""Known results as named experiments: `chaos reproduce NAME|--all [--seeds N]`.

A harness is trusted when it finds the failures known to exist and stays quiet where
there are none. Each scenario is a fixed workload and fault schedule (a TestSpec) with
one or two variants (without and with fencing) and an expected outcome per variant,
stated as a predicate over the run's summary and history. Every seed is a real run on
real servers; the table printed says expected vs observed per seed, and the exit code is
1 when any seed missed its expectation.

A campaign writes <store>/reproduce/<timestamp>/rows.jsonl, one line per run as it
completes (a campaign cut short keeps every finished run), and summary.md, the
per-scenario table. `chaos reproduce --summarize FILE...` merges the rows of several
campaigns (say seeds 1-5 and 6-10) into one table without running anything.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

import click

from harness.core.contracts.checker import CRASH, UNSUPPORTED, parse_valid, parse_verdict, recognised, verdict_word
from harness.checker.lock import holding_windows
from harness.commands.reproduce_aimed import (freed_at_expiry, queue_moves_past_dead_waiter, release_cut_until_expiry,
                                             slow_acquires_fail, waiter_kept_out)
from harness.commands.cliargs import CLUSTERS, Seconds, check_writable_dir, ssh_options, ssh_settings
from harness.core.errors import BadArgument, BadHistory
from harness.core.safefile import read_inside, write_atomic
from harness.core.history import NEMESIS, Op, read_history
from results.store import stamped_dir
from workloads.external import reference_client


@dataclass(frozen=True, slots=True, kw_only=True)
class Expect:
    verdict: str  # "unsafe" | "safe": what the scenario should show
    says: str  # the expectation in words, printed next to what was observed
    holds: Callable[[dict, Sequence[Op]], bool]
    causes: tuple[str, ...] | None = None  # the only causes its violations may have (harness/checker/causes.py)


def with_causes(e: Expect, *causes: str) -> Expect:
    return Expect(verdict=e.verdict, says=e.says, holds=e.holds, causes=causes)


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    name: str
    doc: str
    spec: dict  # TestSpec fields shared by every variant
    variants: dict[str, tuple[dict, Expect]] = field(default_factory=dict)


# --- what runs can show ------------------------------------------------------------------
def overlaps(s: dict, h: Sequence[Op]) -> bool:
    return (s.get("violations") or 0) >= 1


def data_broken(s: dict, h: Sequence[Op]) -> bool:
    return (s.get("stale_writes_accepted") or 0) >= 1 or (s.get("lost_updates") or 0) >= 1


def fencing_held(s: dict, h: Sequence[Op]) -> bool:
    """Stale writes happened (the fault bit) and every one of them was rejected."""
    return ((s.get("stale_writes_rejected") or 0) >= 1 and (s.get("stale_writes_accepted") or 0) == 0
            and (s.get("lost_updates") or 0) == 0)


def foreign_releases(h: Sequence[Op]) -> int:
    """Releases that returned ok although someone else had acquired since: the releaser
    deleted a lock that was not its own."""
    oks = sorted((o.time_ns, o.process) for o in h if o.f == "acquire" and o.type == "ok")
    count = 0
    for w in holding_windows(h):
        if w.release is None:
            continue
        done = next((o for o in h if o.process == w.process and o.f == "release" and o.type != "invoke"
                     and o.time_ns >= w.release.time_ns), None)
        if done is not None and done.type == "ok" and any(
                w.start_ns < t < w.release.time_ns and p != w.process for t, p in oks):
            count += 1
    return count


def stuck_after_crash(s: dict, h: Sequence[Op]) -> bool:
    """A client crashed between SETNX and EXPIRE, and nobody acquired ever after."""
    crashes = [o.time_ns for o in h if o.f == "acquire" and o.type == "info" and "Crash" in (o.error or "")]
    if not crashes:
        return False
    later_ok = [o for o in h if o.f == "acquire" and o.type == "ok" and o.time_ns > crashes[0]]
    later_fail = [o for o in h if o.f == "acquire" and o.type == "fail" and o.time_ns > crashes[0]]
    return not later_ok and len(later_fail) >= 3


def minority_blocked(s: dict, h: Sequence[Op]) -> bool:
    """While a client could reach only a minority, it acquired nothing; others did; and
    there were never two holders."""
    # The client is certainly cut from the cut's completion to the invocation of its heal
    # (the rules may go at any moment while the heal runs).
    cuts, start = [], None
    for o in sorted(h, key=lambda o: o.time_ns):
        if o.process != NEMESIS:
            continue
        if o.f == "partition-client" and o.type == "ok":
            start = (o.time_ns, o.value["worker"])
        elif o.f == "heal-client" and o.type == "invoke" and start:
            cuts.append((start[0], o.time_ns, start[1]))
            start = None
    if not cuts or (s.get("violations") or 0) != 0:
        return False
    n = max((o.process for o in h if isinstance(o.process, int)), default=0) + 1
    conc = s.get("concurrency") or n
    cut_ok = other_ok = 0
    for a, b, worker in cuts:
        invokes = {o.process: o.time_ns for o in h if o.f == "acquire" and o.type == "invoke"}
        for o in h:
            if o.f == "acquire" and o.type == "ok" and a < o.time_ns < b:
                mine = isinstance(o.process, int) and o.process % conc == worker
                if mine and invokes.get(o.process, 0) > a:
                    cut_ok += 1
                elif not mine:
                    other_ok += 1
    return cut_ok == 0 and other_ok >= 1


UNSAFE = Expect(verdict="unsafe", says="two holders at once, and data lost or a stale write accepted",
                holds=lambda s, h: overlaps(s, h) and data_broken(s, h))
FENCED = Expect(verdict="safe", says="stale writes all rejected by fencing, none accepted, no lost update",
                holds=fencing_held)
NOFENCE, FENCE = {"fencing": False}, {"fencing": True}
CLOCK_JUMPED = Expect(verdict="unsafe", says="two holders at once, granted early by a server clock jump", holds=overlaps,
                      causes=("early-server-clock",))


def paused() -> dict:
    """The variants of a holder paused past its lease: unsafe without fencing, safe with it,
    and every violation the holder overrunning its lease while paused."""
    return {"nofence": (NOFENCE, with_causes(UNSAFE, "overran-paused")),
            "fenced": (FENCE, with_causes(FENCED, "overran-paused"))}


def external(command: str, servers: str, **options: str) -> dict:
    """The spec fields of a run that drives a reference client over the client protocol."""
    return {"backend": "external", "options": {"command": command, "servers": servers, **options}}

SCENARIOS: dict[str, Scenario] = {s.name: s for s in [
    Scenario(name="gc-pause", doc="redis single instance; the holder is paused 2.5 x TTL right after it acquires",
             spec={"backend": "redis", "nemesis": ("pause-holder",), "options": {"pause_multiple": "2.5"}},
             variants=paused()),
    Scenario(name="redlock-clock-jump", doc="Redlock on 5 nodes; a majority's clocks jump forward past the TTL",
             spec={"backend": "redlock", "nemesis": ("clock-skew",)},
             variants={"nofence": (NOFENCE, CLOCK_JUMPED)}),
    Scenario(name="node-redlock-clock-jump", doc="Node's redlock (npm 4.2.0) over the client protocol; a majority's "
                                                  "clocks jump forward past the TTL",
             spec={**external(reference_client("node-redlock").command, "valkey:5"), "nemesis": ("clock-skew",)},
             variants={"nofence": (NOFENCE, CLOCK_JUMPED)}),
    Scenario(name="etcd-lock-pause", doc="etcd lease lock; the holder is paused past its lease (Jepsen etcd 3.4.3)",
             spec={"backend": "etcd", "nemesis": ("pause-holder",), "options": {"pause_multiple": "3"}},
             variants=paused()),
    Scenario(name="go-etcd-lock-pause", doc="etcd's own Go concurrency.Mutex over the client protocol; the holder "
                                             "(its keepalive too) is paused past its session",
             spec={**external(reference_client("go-etcd").command, "etcd:3", pause_multiple="3"),
                   "nemesis": ("pause-holder",)},
             variants=paused()),
    Scenario(name="zk-session-expiry", doc="ZooKeeper queue lock; the holder is paused past its session timeout",
             spec={"backend": "zookeeper", "nemesis": ("pause-holder",),
                   "options": {"pause_multiple": "2.5", "session_timeout_ms": "2000"}},
             variants=paused()),
    Scenario(name="curator-session-expiry", doc="Apache Curator's InterProcessMutex (Java) over the client protocol; "
                                                 "the holder is paused past its session timeout",
             spec={**external(reference_client("java-curator").command, "zookeeper:3",
                              pause_multiple="2.5", session_timeout_ms="2000"), "nemesis": ("pause-holder",)},
             variants=paused()),
    Scenario(name="unsafe-release", doc="constant value + plain DEL; the paused holder wakes and deletes the next holder's lock",
             spec={"backend": "redis-unsafe-release", "nemesis": ("pause-holder",), "options": {"pause_multiple": "1.5"}},
             variants={"nofence": (NOFENCE, Expect(verdict="unsafe", says="a release deleted another holder's lock",
                                                   holds=lambda s, h: foreign_releases(h) >= 1,
                                                   causes=("overran-paused", "early-foreign-release")))}),
    Scenario(name="setnx-expire-crash", doc="SETNX then EXPIRE as two commands; a client crashes between them",
             spec={"backend": "redis-setnx-expire", "nemesis": (), "options": {"crash_between": "0.3"}},
             variants={"nofence": (NOFENCE, Expect(verdict="unsafe", says="after the crash the lock is never free again",
                                                   holds=stuck_after_crash))}),
    Scenario(name="etcd-partition-minority", doc="etcd; the holder and one member are cut off from the majority",
             spec={"backend": "etcd", "nemesis": ("partition-client",), "nemesis_interval": 8.0,
                   "options": {"cut_servers": "2", "island": "true"}},
             variants={"nofence": (NOFENCE, Expect(verdict="safe", says="the cut client acquires nothing, others do, "
                                                   "never two holders", holds=minority_blocked))}),
    Scenario(name="zk-partition-minority", doc="ZooKeeper; the holder and one server are cut off from the majority",
             spec={"backend": "zookeeper", "nemesis": ("partition-client",), "nemesis_interval": 8.0,
                   "options": {"cut_servers": "2", "island": "true", "session_timeout_ms": "2000"}},
             variants={"nofence": (NOFENCE, Expect(verdict="safe", says="the cut client acquires nothing, others do, "
                                                   "never two holders", holds=minority_blocked))}),
    # The aimed client faults and slow links (issue 27): outcomes that follow from the design.
    Scenario(name="zk-waiter-session-expiry", doc="ZooKeeper queue lock; a waiter is paused mid-acquire past its "
                                                   "session timeout while another holds: its node goes with its session",
             spec={"backend": "zookeeper", "nemesis": ("pause-waiter",),
                   "options": {"pause_multiple": "2.5", "session_timeout_ms": "2000"}},
             variants={"nofence": (NOFENCE, Expect(verdict="safe", says="the paused waiter is not granted while paused, "
                                                   "never two holders", holds=waiter_kept_out("pause-waiter", "resume-waiter")))}),
    Scenario(name="redis-holder-killed", doc="redis single instance; the holder is SIGKILLed in its critical section",
             spec={"backend": "redis", "nemesis": ("kill-holder",)},
             variants={"nofence": (NOFENCE, Expect(verdict="safe", says="the dead holder's lock comes free when its TTL "
                                                   "ends, not before, not for ever", holds=freed_at_expiry))}),
    Scenario(name="redlock-slow-acquire", doc="Redlock on 5 nodes; every client's links to them slowed by 300 ms "
                                               "(5 SETs in turn: 1.5 s against a validity budget of 988 ms)",
             spec={"backend": "redlock", "nemesis": ("slow-link",), "ttl_ms": 1000, "acquire_timeout": 1.0,
                   "nemesis_interval": 6.0, "options": {"delay_ms": "300", "node_timeout_ms": "1000"}},
             variants={"nofence": (NOFENCE, Expect(verdict="safe", says="acquires over the slow link fail (validity "
                                                   "spent in transit), none succeeds", holds=slow_acquires_fail))}),
    Scenario(name="etcd-waiter-cut-off", doc="etcd lease lock; a waiter's namespace is cut from every member "
                                              "mid-acquire while another holds",
             spec={"backend": "etcd", "nemesis": ("partition-waiter",)},
             variants={"nofence": (NOFENCE, Expect(verdict="safe", says="the cut waiter is not granted while cut, "
                                                   "never two holders",
                                                   holds=waiter_kept_out("partition-waiter", "heal-waiter")))}),
    Scenario(name="redis-release-cut", doc="redis single instance; a holder's release is cut as it leaves, for 3 s "
                                            "against a 2 s TTL",
             spec={"backend": "redis", "nemesis": ("cut-in-flight",), "nemesis_interval": 4.0,
                   "options": {"cut_ms": "3000"}},
             variants={"nofence": (NOFENCE, Expect(verdict="safe", says="the key the release never reached lives to its "
                                                   "TTL: no grant before, one soon after", holds=release_cut_until_expiry))}),
    Scenario(name="zk-waiter-killed", doc="ZooKeeper queue lock; a waiter is SIGKILLed between its acquire request "
                                           "and the reply while another holds",
             spec={"backend": "zookeeper", "nemesis": ("kill-holder",),
                   "options": {"during": "acquire", "session_timeout_ms": "2000"}},
             variants={"nofence": (NOFENCE, Expect(verdict="safe", says="the queue moves past the dead waiter within its "
                                                   "session timeout, never two holders",
                                                   holds=queue_moves_past_dead_waiter(2000)))}),
]}


def first_violation_s(results: dict, history: Sequence[Op]) -> float | None:
    overlaps_ = results["checkers"].get("mutex", {}).get("details", {}).get("overlaps") or []
    if not overlaps_ or not history:
        return None
    t0 = min(o.time_ns for o in history)
    return round((min(o["start_ns"] for o in overlaps_) - t0) / 1e9, 2)


def judge(scenario: str, variant: str, seed: int, run_dir: Path) -> dict:
    """Judge one recorded run against its scenario's expectation: the row of the table.
    Works on any run dir, so a stored campaign can be re-judged (`--recheck`)."""
    from results.store import read_results

    expect = SCENARIOS[scenario].variants[variant][1]
    results = read_results(run_dir)
    history = read_history(run_dir)  # it and spec.json must resolve inside the run dir
    spec = json.loads(read_inside(run_dir, run_dir / "spec.json"))
    summary = dict(results["summary"], concurrency=spec.get("concurrency"))
    errors = []
    try:
        ok = bool(expect.holds(summary, history))
    except Exception as e:  # a predicate that cannot decide is a miss, never a pass
        ok, errors = False, [f"{type(e).__name__}: {e}"]
    stored = summary.get("valid")
    if not recognised(stored) or parse_verdict(stored) in (CRASH, UNSUPPORTED):  # words of matrix rows only
        ok = False
        errors.append(f"results.json says valid={stored!r}, which is no verdict (true, false or \"unknown\"); "
                      "judged unknown")
    if expect.verdict == "safe" and parse_valid(stored) is not True:
        ok = False  # what the checkers did not prove is never safe, whatever the counts say
        errors.append(f"the run's verdict is {verdict_word(stored)}, not VALID"
                      + (f" ({summary['unknown_reason']})" if summary.get("unknown_reason") else ""))
    causes = summary.get("violations_by_cause") or {}
    wrong = [c for c in causes if c == "unexplained" or (expect.causes is not None and c not in expect.causes)]
    if wrong:
        ok = False
        errors.append(f"violations caused by {', '.join(wrong)}; expected only {', '.join(expect.causes or ()) or 'explained causes'}")
        overlaps = (results.get("checkers", {}).get("mutex", {}).get("details") or {}).get("overlaps") or []
        first = next((o for o in overlaps if (o.get("cause") or {}).get("cause") in wrong), None)
        if first is not None:  # what CI's log keeps of a miss whose run dir is gone
            errors.append(f"the first: {first['cause'].get('detail')} (acquires #{first['first']['index']} and "
                          f"#{first['second']['index']} of {run_dir / 'history.jsonl'})")
    row = {"scenario": scenario, "variant": variant, "seed": seed, "expected": expect.verdict,
           "matched": ok, "violations": summary.get("violations"),
           "stale_accepted": summary.get("stale_writes_accepted"),
           "stale_rejected": summary.get("stale_writes_rejected"), "lost": summary.get("lost_updates"),
           "first_violation_s": first_violation_s(results, history), "causes": causes, "run_dir": str(run_dir)}
    return dict(row, errors=errors) if errors else row


def describe(row: dict) -> str:
    says = SCENARIOS[row["scenario"]].variants[row["variant"]][1].says
    return (f"{row['scenario']:24} {row['variant']:8} seed {row['seed']:3}  expected {row['expected']:6} ({says}): "
            f"{'MATCH' if row['matched'] else 'MISS '}  violations={row['violations']} stale accepted/rejected="
            f"{row['stale_accepted']}/{row['stale_rejected']} lost={row['lost']} "
            f"first violation at {row['first_violation_s']} s"
            + (f"; causes {', '.join(f'{k} {v}' for k, v in row['causes'].items())}" if row.get("causes") else "")
            + (f"; {'; '.join(row['errors'])}" if row.get("errors") else ""))


def scenario_spec(sc: Scenario, overrides: dict, seed: int, seeds: int, *, time_limit: float, store: str,
                  cluster: str = "local", ssh: dict | None = None):
    """The TestSpec of one run of a scenario's variant."""
    from harness.core.spec import TestSpec

    kw = dict(sc.spec, **overrides)
    kw["options"] = dict(kw.get("options", {}))
    where = ("" if cluster == "local" else f" --cluster {cluster}") + (f" --hosts {','.join(ssh['hosts'])}" if ssh and "hosts" in ssh else "") + (
        f" --swarm-nodes {ssh['nodes_file']}" if ssh and "nodes_file" in ssh else "")
    return TestSpec(**kw, seed=seed, time_limit=time_limit, store=store, cluster=cluster, ssh=ssh or {},
                    command=f"chaos reproduce {sc.name} --seeds {seeds}{where}")


def refuse_scenario(sc: Scenario, **kw) -> None:
    """BadArgument for a variant of `sc` that no run can serve with these settings (the spec's
    refusals, and a fault that cannot fit: harness/core/refusals.py), before anything starts."""
    from harness.core.refusals import fit

    for overrides, _ in sc.variants.values():
        if why := fit(scenario_spec(sc, overrides, 1, 1, **kw).validate()):
            raise BadArgument(f"scenario {sc.name}: {why.split('; lengthen')[0]}; give a longer --time-limit")


def run_scenario(sc: Scenario, seeds: Sequence[int], *, time_limit: float, store: str, echo=print,
                 on_row: Callable[[dict], None] = lambda row: None, cluster: str = "local",
                 ssh: dict | None = None) -> list[dict]:
    from harness.engine.runner import run

    rows = []
    for variant, (overrides, _) in sc.variants.items():
        for seed in seeds:
            spec = scenario_spec(sc, overrides, seed, len(seeds), time_limit=time_limit, store=store, cluster=cluster,
                                 ssh=ssh)
            out = run(spec, progress=False)
            if out.interrupted:  # Ctrl-C ends the whole batch, after this run's teardown
                raise KeyboardInterrupt
            row = judge(sc.name, variant, seed, out.run_dir)
            rows.append(row)
            on_row(row)
            echo(describe(row))
    return rows


# --- the campaign's record and its table ------------------------------------------------
def _span(values: list[float]) -> str:
    if not values:
        return "none"
    lo, hi = min(values), max(values)
    return f"{lo:g}" if lo == hi else f"{lo:g}-{hi:g}"


def seed_ranges(seeds: Iterable[int]) -> str:
    """1,2,3,5,7,8 -> "1-3, 5, 7-8"."""
    out: list[list[int]] = []
    for s in sorted(set(seeds)):
        if out and s == out[-1][1] + 1:
            out[-1][1] = s
        else:
            out.append([s, s])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in out)


def summarize(rows: Iterable[dict]) -> list[dict]:
    """One line per scenario and variant, in the order first seen: seeds run, seeds that
    reached the expected verdict, the spread of the time to the first overlap, and the
    data-safety counts (what a safe variant must keep at zero)."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["scenario"], r["variant"]), []).append(r)
    order = {name: i for i, name in enumerate(SCENARIOS)}  # the catalogue's order, whatever order the rows came in
    out = []
    for (scenario, variant), rs in sorted(groups.items(), key=lambda kv: order.get(kv[0][0], len(order))):
        firsts = [r["first_violation_s"] for r in rs if r.get("first_violation_s") is not None]
        out.append({"scenario": scenario, "variant": variant, "expected": rs[0]["expected"],
                    "seeds": len(rs), "seed_range": seed_ranges(r["seed"] for r in rs),
                    "hits": sum(1 for r in rs if r["matched"]), "first_violation_s": _span(firsts),
                    "runs_with_overlap": sum(1 for r in rs if (r.get("violations") or 0) > 0),
                    "stale_accepted": sum(r.get("stale_accepted") or 0 for r in rs),
                    "stale_rejected": sum(r.get("stale_rejected") or 0 for r in rs),
                    "lost": sum(r.get("lost") or 0 for r in rs), "causes": _causes(rs)})
    return out


def _causes(rows: list[dict]) -> str:
    """'overran-paused 31, unexplained 1': the causes of every violation of these runs."""
    total: dict[str, int] = {}
    for r in rows:
        for cause, n in (r.get("causes") or {}).items():
            total[cause] = total.get(cause, 0) + n
    return ", ".join(f"{c} {n}" for c, n in sorted(total.items(), key=lambda kv: -kv[1])) or "none"


def summary_table(rows: Iterable[dict]) -> str:
    """The per-scenario table as Markdown (what docs/reproduce.md shows)."""
    lines = ["| scenario | variant | expected | seeds | reached expected verdict | runs with two holders "
             "| first violation (s) | stale writes accepted / rejected | lost updates | causes of the violations |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for g in summarize(rows):
        lines.append(f"| {g['scenario']} | {g['variant']} | {g['expected']} | {g['seed_range']} "
                     f"| {g['hits']}/{g['seeds']} | {g['runs_with_overlap']}/{g['seeds']} | {g['first_violation_s']} "
                     f"| {g['stale_accepted']} / {g['stale_rejected']} | {g['lost']} | {g['causes']} |")
    return "\n".join(lines)


ROW_FIELDS = ("scenario", "variant", "seed", "expected", "matched")


def read_rows(paths: Sequence[str]) -> list[dict]:
    """Rows from rows.jsonl files (or the `--json` output) of earlier campaigns."""
    from harness.core.pathcheck import EITHER, check_path, read_text

    hint = "give a campaign's rows.jsonl or its directory"
    rows = []
    for path in paths:
        p = check_path(path, flag="--summarize", want=EITHER, hint=hint)
        if p.is_dir():
            p = p / "rows.jsonl"
            if not p.is_file() and not p.is_symlink():
                raise BadArgument(f"--summarize {path} holds no rows.jsonl; {hint}")
        text = read_text(p, flag="--summarize", hint=hint, what="a rows.jsonl")
        for n, line in enumerate(text.splitlines(), 1):
            if not line.startswith("{"):
                continue  # the `--json` output mixes the per-seed text lines with the rows
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise BadHistory(f"{p}:{n}: not a JSON row ({e.msg})") from None
            missing = [k for k in ROW_FIELDS if k not in row]
            if missing:
                raise BadHistory(f"{p}:{n}: a reproduce row needs {', '.join(ROW_FIELDS)}; missing {', '.join(missing)}")
            if row["matched"] is not True and row["matched"] is not False:  # "yes", 1, null: no verdict, so a miss
                row["stored_matched"], row["matched"] = row["matched"], False
            rows.append(row)
    if not rows:
        raise BadArgument(f"no reproduce rows in {', '.join(paths)}")
    return rows


def odd_matches(rows: Sequence[dict]) -> str | None:
    """One line naming the rows whose `matched` was neither true nor false (counted as misses)."""
    odd = [r for r in rows if "stored_matched" in r]
    if not odd:
        return None
    return (f"note: {len(odd)} row(s) have a matched that is not true or false, counted as misses: "
            + "; ".join(f"{r['scenario']}/{r['variant']} seed {r['seed']}: {r['stored_matched']!r}" for r in odd[:10])
            + (f"; and {len(odd) - 10} more" if len(odd) > 10 else ""))


def rejudge(row: dict) -> dict:
    import os

    from harness.core.pathcheck import DIR, check_path, too_long

    if row["scenario"] not in SCENARIOS or row["variant"] not in SCENARIOS[row["scenario"]].variants:
        raise BadArgument(f"row {row['scenario']}/{row['variant']} seed {row['seed']}: no such scenario variant today")
    name = f"row {row['scenario']}/{row['variant']} seed {row['seed']}: its run dir"
    if not isinstance(row.get("run_dir"), str) or not row["run_dir"]:
        raise BadArgument(f"{name} is not named (run_dir {row.get('run_dir')!r}); summarize without --recheck")
    run_dir = Path(row["run_dir"])
    if os.path.lexists(run_dir) or too_long(run_dir):  # a path from a file: too long, a FIFO, unreadable
        check_path(run_dir, flag=name, want=DIR, hint="summarize without --recheck")
    if not (run_dir / "results.json").is_file() or not (run_dir / "history.jsonl").is_file():
        raise BadArgument(f"row {row['scenario']}/{row['variant']} seed {row['seed']}: its run dir {run_dir} "
                          "is gone (needs results.json and history.jsonl); summarize without --recheck")
    return judge(row["scenario"], row["variant"], row["seed"], run_dir)


@click.command()
@click.argument("names", nargs=-1, metavar="[NAME]...")
@click.option("--all", "all_", is_flag=True, help="run every scenario")
@click.option("--seeds", type=int, default=1, show_default=True, help="how many seeds per variant")
@click.option("--first-seed", type=int, default=1, show_default=True, help="seeds run from here upwards")
@click.option("--time-limit", type=Seconds(5, 60), default=25.0, show_default=True, help="seconds per run (at most 60)")
@click.option("--store", default="store", show_default=True)
@click.option("--cluster", type=click.Choice(CLUSTERS), default="local", show_default=True,
              help="where the servers run: local processes, Docker Compose containers (make compose), your hosts over ssh, or a "
                   "Docker Swarm (make swarm)")
@ssh_options
@click.option("--json", "as_json", is_flag=True, help="print the rows as JSON lines")
@click.option("--summarize", "summarize_paths", multiple=True, metavar="ROWS",
              help="run nothing: print the table of earlier campaigns' rows.jsonl (repeatable)")
@click.option("--recheck", is_flag=True, help="with --summarize: judge the stored runs again with today's predicates")
def reproduce(names, all_, seeds, first_seed, time_limit, store, cluster, hosts, ssh_user, ssh_key, ssh_port,
              ssh_known_hosts, swarm_nodes, as_json, summarize_paths, recheck):
    """Run known-result scenarios (one or more NAMEs, or --all); exit 1 if any seed misses
    its expected verdict, 130/143 when interrupted (Ctrl-C/SIGTERM)."""
    name = " ".join(names)
    if recheck and not summarize_paths:
        raise BadArgument("--recheck re-judges stored runs: give their rows with --summarize ROWS")
    if summarize_paths:
        if names or all_:
            raise BadArgument("--summarize reads earlier rows and runs nothing; drop the scenario name / --all")
        rows = read_rows(summarize_paths)
        if note := odd_matches(rows):
            print(note, file=sys.stderr)
        if recheck:
            rows = [rejudge(r) for r in rows]
            for r in rows:
                print(describe(r))
        print(summary_table(rows))
        return 1 if any(not r["matched"] for r in rows) else 0
    if all_ == bool(names):
        raise BadArgument(f"name one or more scenarios or use --all; scenarios: {', '.join(SCENARIOS)}")
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        raise BadArgument(f"unknown scenario {unknown[0]!r}; choose from: {', '.join(SCENARIOS)}")
    ssh = ssh_settings(cluster, hosts, ssh_user, ssh_key, ssh_port, ssh_known_hosts, swarm_nodes)
    if not 1 <= seeds <= 100 or not 5 <= time_limit <= 60 or not 0 <= first_seed < 2**31:
        raise BadArgument("--seeds must be 1..100, --first-seed 0..2^31-1 and --time-limit 5..60 seconds")
    check_writable_dir(store, "--store")
    chosen = list(SCENARIOS.values()) if all_ else [SCENARIOS[n] for n in dict.fromkeys(names)]
    for sc in chosen:  # refused before the first run starts anything, not half way through the campaign
        refuse_scenario(sc, time_limit=time_limit, store=store, cluster=cluster, ssh=ssh)
    out_dir = stamped_dir(Path(store) / "reproduce")
    rows_file = (out_dir / "rows.jsonl").open("x")  # a fresh dir: a file or link already there is refused

    rows: list[dict] = []  # every finished run, also of a scenario that Ctrl-C cut short

    def record(row: dict) -> None:
        rows.append(row)
        rows_file.write(json.dumps(row) + "\n")
        rows_file.flush()

    interrupted = False
    try:
        for sc in chosen:
            run_scenario(sc, range(first_seed, first_seed + seeds), time_limit=time_limit, store=store,
                         on_row=record, cluster=cluster, ssh=ssh)
    except KeyboardInterrupt:  # the run in hand was torn down; the table covers the finished ones
        interrupted = True
    finally:  # a campaign cut short (Ctrl-C) still leaves the table of the runs it finished
        rows_file.close()
        if rows:
            write_atomic(
                out_dir / "summary.md",
                f"`chaos reproduce {name or '--all'} --seeds {seeds} --first-seed {first_seed} "
                f"--time-limit {time_limit:g}{'' if cluster == 'local' else ' --cluster ' + cluster}`, "
                f"{time.strftime('%Y-%m-%d')}\n\n{summary_table(rows)}\n")
    table = summary_table(rows)
    if as_json:
        for r in rows:
            print(json.dumps(r))
    missed = [r for r in rows if not r["matched"]]
    print(table)
    print(f"{len(rows) - len(missed)}/{len(rows)} runs reached their expected verdict; rows and table in {out_dir}")
    if interrupted:
        from harness.core import interrupts

        print(f"chaos reproduce: INTERRUPTED by {interrupts.how()} after {len(rows)} finished run(s); "
              f"{interrupts.exit_line()}")
        return interrupts.exit_code()
    return 1 if missed else 0


__all__ = ["SCENARIOS", "Scenario", "Expect", "reproduce", "run_scenario", "summarize", "summary_table", "read_rows"]
