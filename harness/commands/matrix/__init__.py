"""`chaos matrix`: every backend x nemesis x fencing x seed, judged against expectations.

A cell is (backend, nemesis, fencing); it holds one run per seed (1..N). Its expected
verdict comes from expectations.toml (expectations.py); its observed verdict and whether
that matches are decided in judge.py, from the runs' rows only. The runs are `chaos run`
subprocesses (cells.py says why); each finished run is one row of matrix.csv (rows.py),
re-judged as the matrix grows. matrix.html (html.py) and the table, JSON and JUnit
(report.py) only read the judged cells.
The command exits 0 when every cell matches, 1 when one does not, 254 on bad arguments,
130 (Ctrl-C) or 143 (SIGTERM) when interrupted: the cells running then are stopped, the
pages cover the runs that finished, and the last line says INTERRUPTED.
`--recheck DIR` judges a stored matrix.csv against an expectations file, running nothing; a
row whose `valid` is not a word the matrix writes is judged unknown, named in one line, and
fails its cell whatever the expectation.

`--parallel K` runs K cells at once. Runs are isolated from each other (each has its own
run id, network namespaces, a /24 of 198.18.0.0/15 picked under a host-wide lock, and
free ports), so K > 1 is safe for correctness. It changes timing: on a host with fewer
than 2 cores per parallel run, CPU starvation stretches pauses and delays renewals, so
timing-sensitive cells (unfenced locks under pause-holder, clock-skew) can flip. The
command warns then; nightly CI uses K = 1.
"""

from __future__ import annotations

import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import click

from harness.commands.cliargs import Seconds, check_writable_dir, check_writable_file
from harness.core import interrupts
from harness.core.errors import BadArgument
from harness.core.safefile import read_inside, write_atomic
from harness.commands.matrix.cells import Job, Runner
from harness.commands.matrix.expectations import Expectations, default_expectations
from harness.commands.matrix.html import write_html
from harness.commands.matrix.judge import rejudge
from harness.commands.matrix.report import report
from harness.commands.matrix.rows import read_csv, unrecognised, write_csv


def _new_dir(store: str) -> Path:
    from results.store import stamped_dir

    d = stamped_dir(Path(store) / "matrix")
    (d / "logs").mkdir()
    return d


def _names(text: str, what: str) -> list[str]:
    from harness.core import plugins

    names = list(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    if not names:
        raise BadArgument(f"--{what} names nothing; give a comma-separated list (see chaos list)")
    for n in names:
        for part in (n.split("+") if what == "nemeses" else [n]):
            (plugins.nemesis_class if what == "nemeses" else plugins.backend_class)(part)
    return names


@click.command()
@click.option("--backends", default=None, help="comma-separated backends (default: every registered one)")
@click.option("--nemeses", default="none", show_default=True, help="comma-separated nemeses; a+b composes two in one run")
@click.option("--fencing", type=click.Choice(["on", "off", "both"]), default="both", show_default=True)
@click.option("--seeds", type=click.IntRange(1, 1000), default=1, show_default=True, help="runs per cell, seeds 1..N")
@click.option("--time-limit", type=Seconds(1, 86_400), default=30.0, show_default=True, help="seconds per run")
@click.option("--concurrency", "-c", type=click.IntRange(1, 256), default=5, show_default=True)
@click.option("--parallel", type=click.IntRange(1, 32), default=1, show_default=True, help="runs at once (see above)")
@click.option("--expectations", "exp_path", type=click.Path(dir_okay=False), default=None,
              help="expectations.toml (default: ./expectations.toml, else the repo's)")
@click.option("--store", default="store", show_default=True, help="where runs and store/matrix/<timestamp>/ land")
@click.option("--junit", default=None, help="write one JUnit testcase per cell to this file")
@click.option("--recheck", type=click.Path(file_okay=False), default=None,
              help="judge a stored matrix dir's matrix.csv against the expectations; run nothing")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object on stdout (the table goes to stderr)")
def matrix(backends, nemeses, fencing, seeds, time_limit, concurrency, parallel, exp_path, store, junit, recheck, as_json):
    """Run backend x nemesis x fencing x seed, compare each cell with expectations.toml.

    Exit 0 when every cell matches its expectation, 1 when one does not, 254 on bad arguments,
    130/143 when interrupted (Ctrl-C/SIGTERM).
    --parallel K > 1 keeps runs isolated but shares CPUs: with fewer than 2 cores per run,
    timing-sensitive cells can change verdict. --recheck DIR re-judges a stored matrix.
    """
    check_writable_dir(store, "--store")
    if junit:
        check_writable_file(junit, "--junit")
    if recheck:
        from harness.core.pathcheck import DIR, check_path

        check_path(recheck, flag="--recheck", want=DIR, hint="give a matrix dir written by `chaos matrix`")
    exp = Expectations.load(exp_path if exp_path is not None else default_expectations())
    human = sys.stderr if as_json else sys.stdout
    if exp.path is None:
        print("note: no expectations.toml found; every cell is expected \"either\"", file=human)
    if recheck:
        rows = read_csv(Path(recheck) / "matrix.csv")
        if not rows:  # nothing to re-judge is not a pass
            raise BadArgument(f"{Path(recheck) / 'matrix.csv'} holds no cells, so there is nothing to re-judge; "
                              f"give the dir of a matrix that finished at least one run")
        if note := unrecognised(rows):
            print(note, file=human)
        try:
            skipped = json.loads(read_inside(Path(recheck), Path(recheck) / "matrix.json")).get("skipped", [])
        except (OSError, ValueError, AttributeError, BadArgument):  # not there, not ours, not an object
            skipped = []
        skipped = [s for s in skipped if isinstance(s, str)] if isinstance(skipped, list) else []
        return report(rejudge(rows, exp), skipped, as_json=as_json, junit=junit, matrix_dir=Path(recheck), wall_s=None)

    from harness.core import plugins

    bs = _names(backends, "backends") if backends else [b for b in plugins.backend_names() if b != "external"]
    ns = _names(nemeses, "nemeses")
    from harness.core.refusals import fit
    from harness.core.spec import TestSpec

    for n in ns:  # each cell runs `chaos run` with this time limit and its default recovery: refused now, not per cell
        if why := fit(TestSpec(backend=bs[0], nemesis=tuple(n.split("+")), time_limit=time_limit,
                               recovery=min(3.0, time_limit / 4), concurrency=concurrency)):
            raise BadArgument(f"--time-limit {time_limit:g} is too short for --nemeses {n}: {why.split('; lengthen')[0]}")
    fences = {"on": [True], "off": [False], "both": [False, True]}[fencing]
    jobs, skipped = [], []
    for b in bs:
        has = bool(getattr(plugins.backend_class(b), "has_fencing", False))
        for f in fences:
            for n in ns:
                if f and not has:
                    skipped.append({"backend": b, "nemesis": n, "fencing": True,
                                    "reason": f"{b} hands out no fencing tokens (has_fencing is False)"})
                    continue
                jobs += [Job(backend=b, nemesis=n, fencing=f, seed=s) for s in range(1, seeds + 1)]
    if not jobs:
        raise BadArgument("nothing to run: every backend asked for lacks fencing tokens; use --fencing off or both")
    cpus = os.cpu_count() or 1
    if parallel > 1 and parallel > cpus // 2:
        print(f"warning: --parallel {parallel} on {cpus} cores: runs share CPUs, so timing-sensitive cells may "
              f"change verdict; use --parallel {max(1, cpus // 2)} for stable results", file=human)
    mdir = _new_dir(store)
    write_atomic(mdir / "matrix.json", json.dumps({"command": " ".join(["chaos"] + sys.argv[1:]), "expectations": exp.path,
                                                  "jobs": len(jobs), "skipped": skipped}, indent=1))
    runner = Runner(time_limit=time_limit, concurrency=concurrency, store=store, log_dir=mdir / "logs")
    t0 = time.monotonic()
    print(f"chaos matrix: {len(jobs)} runs ({len(bs)} backends x {len(ns)} nemeses x {len(fences)} fencing x {seeds} "
          f"seeds{f', {len(skipped)} skipped' if skipped else ''}), {parallel} at a time, into {mdir}", file=human)
    with interrupts.first_press_ends():  # later presses cannot cut the cells' teardown short
        return _run_cells(runner, jobs, parallel, exp, skipped, mdir, human, t0, as_json, junit)


def _run_cells(runner, jobs, parallel, exp, skipped, mdir, human, t0, as_json, junit) -> int:
    rows: list[dict] = []
    interrupted = False
    pool = ThreadPoolExecutor(max_workers=parallel)
    try:
        for i, row in enumerate(pool.map(runner, jobs), 1):
            rows.append(row)
            rejudge(rows, exp)
            write_csv(mdir / "matrix.csv", rows)
            print(f"[{i}/{len(jobs)}] {row['backend']} {row['nemesis']} fencing {row['fencing']} seed {row['seed']}: "
                  f"valid={row['valid']} violations={row.get('violations', '')} ({row['wall_s']} s)"
                  + (f" {row['error']}" if row.get("error") else ""), file=human)
    except KeyboardInterrupt:
        interrupted = True
        print(f"chaos matrix: interrupted by {interrupts.how()}; stopping the running cells", file=sys.stderr)
        with interrupts.shielded("stopping the running cells (each heals and tears down its cluster)"):
            pool.shutdown(wait=False, cancel_futures=True)
            runner.interrupt()
    pool.shutdown(wait=True)
    wall = round(time.monotonic() - t0, 1)
    cells = rejudge(rows, exp)
    write_csv(mdir / "matrix.csv", rows)
    write_html(mdir / "matrix.html", cells, skipped, title=f"chaos matrix {mdir.name}",
               note=f"{' '.join(['chaos'] + sys.argv[1:])} (expectations: {exp.path or 'none'})")
    code = report(cells, skipped, as_json=as_json, junit=junit, matrix_dir=mdir, wall_s=wall)
    if not interrupted:
        return code
    print(f"chaos matrix: INTERRUPTED by {interrupts.how()} after {len(rows)} of {len(jobs)} runs; the table covers "
          f"only those; {interrupts.exit_line()}", file=human)
    return interrupts.exit_code()
