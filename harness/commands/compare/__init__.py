"""`chaos compare`: the articles' comparison table, measured on this machine.

One battery of real runs per backend (battery.py), in one invocation, one backend after
another so no two runs share the cores; every cell held against the articles' claim
(claims.py); store/compare/<stamp>/ gets compare.md, compare.csv and compare.html
(page.py) and, under runs/, every run dir it used. `--quick` is the small battery (one
repetition, short runs), the default the full one. Ctrl-C stops after the run in hand and
writes the pages from what was measured so far; the command then exits 130 (143 for SIGTERM)
and its last line says INTERRUPTED. A safety count from a run whose verdict was not decided
is not a measurement (battery.proven): the claim it would bear on is inconclusive.
"""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path

import click

from harness.commands.cliargs import check_writable_dir
from harness.core.errors import BadArgument


def machine() -> str:
    """What the numbers were measured on."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        kb = int(next(l for l in Path("/proc/meminfo").read_text().splitlines() if l.startswith("MemTotal")).split()[1])
        mem = f", {kb / 2**20:.0f} GiB"
    except (OSError, StopIteration, ValueError, IndexError):
        pass
    return f"{os.cpu_count()} cores ({model or platform.machine()}){mem}, Linux {platform.release()}"


def summarize(m) -> dict:
    """A backend's medians, spreads and run dirs, as the pages read them."""
    from harness.commands.compare.battery import best_and_knee, median, spread

    medians = {k: median(v) for k, v in m.values.items()}
    spreads = {k: spread(v) for k, v in m.values.items()}
    best, knee, best_spread = best_and_knee(m.curve)
    medians["throughput"], medians["knee_clients"], spreads["throughput"] = best, knee, best_spread
    if "gc_boundary" not in medians and medians.get("gc_breaks_at_2ttl") is not None:
        # the quick battery's one probe: the pause-holder run at 2 x TTL (None: it decided nothing)
        medians["gc_boundary"] = "<2" if medians["gc_breaks_at_2ttl"] == "True" else ">2"
    return {"medians": medians, "spreads": spreads, "runs": m.runs,
            "curve": {n: median(v) for n, v in sorted(m.curve.items())}, "yardstick": m.yardstick}


@click.command()
@click.option("--backends", default="redis,redlock,etcd,zookeeper", show_default=True,
              help="comma-separated, from redis, redlock, etcd, zookeeper")
@click.option("--quick", is_flag=True, help="the small battery: one repetition, short runs (under 10 minutes)")
@click.option("--store", default="store", show_default=True, help="where store/compare/<timestamp>/ lands")
def compare(backends, quick, store):
    """Measure the articles' comparison table on this machine, cell by cell against their claims."""
    from harness.core import interrupts
    from harness.commands.compare.battery import BACKENDS, FULL, QUICK, measure, run_yardstick
    from harness.commands.compare.page import table, write_csv, write_html, write_md
    from results.store import stamped_dir

    names = list(dict.fromkeys(b.strip() for b in backends.split(",") if b.strip()))
    unknown = [b for b in names if b not in BACKENDS]
    if not names or unknown:
        raise BadArgument(f"--backends takes {', '.join(BACKENDS)}; not {', '.join(unknown) or 'nothing'}")
    check_writable_dir(store, "--store")
    plan = QUICK if quick else FULL
    out = stamped_dir(Path(store) / "compare")
    runs = out / "runs"
    runs.mkdir()
    started = time.monotonic()
    print(f"chaos compare ({plan.name}): {', '.join(names)}; pages in {out}")
    measured: dict[str, dict] = {}
    interrupted = False
    with interrupts.first_press_ends():
        try:
            for b in names:
                measured[b] = summarize(measure(b, plan, str(runs), yardstick=run_yardstick))
        except KeyboardInterrupt:
            interrupted = True
    done = [b for b in names if b in measured]
    notes = ["A throughput cycle is the lock's alone, each client on a key of its own: acquire, the client's own "
             "`held`, release (as the yardstick measures it); every other run's cycle also reads and writes the "
             "protected counter on a separate valkey.",
             "P99 claims are confirmed within a factor of 2; a conflict rate claimed above 0 needs "
             "30,000 acquires per claimed 1 in 10,000 to show, so 0 measured is inconclusive.",
             "Throughput and contended runs use the native load driver where the design has one (clients/load-driver, "
             "clients/zk-load-driver: the design's own calls, every op recorded and checked), else Python clients "
             "16 per worker process. Throughput is shown beside the service's own load tool on the design's commands "
             "(the yardstick, same servers, same run); its claim is judged only when ours is within 2x of the "
             "yardstick, else it is inconclusive (driver-bound): the ceiling was our driver, not the service."]
    if interrupted:
        notes.append(f"Interrupted ({interrupts.how()}): measured {', '.join(done) or 'nothing'} of {', '.join(names)}.")
    for b in done:
        notes.append(f"{b} throughput by clients: " + ", ".join(f"{n}: {v}" for n, v in measured[b]["curve"].items()))
        if measured[b].get("yardstick"):
            notes.append(f"{b} yardstick: {measured[b]['yardstick']}")
    meta = {"plan": plan.name, "when": time.strftime("%Y-%m-%d %H:%M"), "machine": machine(), "notes": notes,
            "took_s": time.monotonic() - started}
    if done:
        cells = table(measured, done)
        write_md(out / "compare.md", cells, done, meta)
        write_csv(out / "compare.csv", cells)
        write_html(out / "compare.html", cells, done, meta)
        print((out / "compare.md").read_text())
        print(f"wrote {out} in {meta['took_s']:.0f} s")
    elif any(runs.iterdir()):
        print(f"wrote no pages (no design was measured to the end); the runs so far are in {runs}")
    else:  # nothing at all: leave no empty dir behind
        runs.rmdir()
        out.rmdir()
        print(f"wrote nothing (no design was measured; {out} was removed)")
    if interrupted:
        print(f"chaos compare: INTERRUPTED by {interrupts.how()}; the pages cover {', '.join(done) or 'nothing'} "
              f"of {', '.join(names)}; {interrupts.exit_line()}")
        return interrupts.exit_code()
    return 0
