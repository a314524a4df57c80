"""How long a 100k-op run takes to check, to write as report.html, and to draw in a browser.

    python benchmarks/bench_report.py [--ops 100000] [--out DIR] [--no-browser]

Generates a synthetic history shaped like a Redlock run under clock-skew (5 client
processes, a clock fault every few seconds; see tests/unit/results/test_report.py), writes it as
a run dir, then times analyse() (every checker, ops.csv, report.html and the index) and
write_report() alone, then headless Chromium loading the report (--dump-dom, which waits
for the scripts) and screenshotting it, each minus Chromium's start-up on an empty page.
Target: the report draws in under 5 s. Prints the figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # for tests.unit.results.test_report, when run as a script

from harness.engine.analysis import analyse  # noqa: E402
from harness.core.history import HistoryWriter, read_history  # noqa: E402
from harness.core.spec import TestSpec  # noqa: E402
from results import store  # noqa: E402
from results.report import write_report  # noqa: E402
from tests.unit.results.test_report import realistic_history  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars"]


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def browser(profile: Path, *args: str) -> float:
    t = time.perf_counter()
    subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True, timeout=120, check=True)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--fault-every", type=float, default=3.0, help="seconds between clock faults")
    ap.add_argument("--out", type=Path, help="store dir to write the run into (default: a temp dir, kept)")
    ap.add_argument("--repeat", type=int, default=3, help="browser timings to take the median of")
    ap.add_argument("--no-browser", action="store_true")
    a = ap.parse_args()

    root = a.out or Path(tempfile.mkdtemp(prefix="bench-report-")) / "store"
    run_dir = root / "redlock-clock-skew" / time.strftime("%Y%m%dT%H%M%S")
    (run_dir / "nodes").mkdir(parents=True)
    spec = TestSpec(backend="redlock", nemesis=("clock-skew",), seed=a.seed, store=str(root),
                    command=f"python benchmarks/bench_report.py --ops {a.ops} --seed {a.seed}")
    (run_dir / "spec.json").write_text(spec.to_json())

    history, t_gen = timed(lambda: realistic_history(n_ops=a.ops, seed=a.seed, fault_every_s=a.fault_every,
                                                     fault_len_s=a.fault_every / 2))
    w = HistoryWriter(run_dir / "history.jsonl")
    for op in history:
        w.append(op)
    w.close()
    for n in ("n1", "n2", "n3", "n4", "n5"):
        (run_dir / "nodes" / f"{n}.log").write_text("".join(f"{n} line {i}\n" for i in range(2000)))
    store.link_latest(root, run_dir)

    doc, t_analyse = timed(lambda: analyse(spec, run_dir))
    hist = read_history(run_dir / "history.jsonl")
    _, t_report = timed(lambda: write_report(run_dir, spec, hist, doc))
    report = run_dir / "report.html"
    s = doc["summary"]
    print(f"history: {len(history):,} ops ({s['ops']:,} client ops), {s['duration_s']} s of run, "
          f"{s['violations']} violations, generated in {t_gen:.2f} s")
    print(f"analyse() (checkers + ops.csv + report + index): {t_analyse:.2f} s")
    print(f"write_report() alone:                            {t_report:.2f} s")
    print(f"report.html: {report.stat().st_size / 1e6:.2f} MB  ->  {report}")
    if a.no_browser or not Path(CHROMIUM).exists():
        print("browser: skipped" + ("" if a.no_browser else f" ({CHROMIUM} missing)"))
        return
    profile = run_dir.parent / "chromium-profile"
    blank = run_dir.parent / "blank.html"
    blank.write_text("<!DOCTYPE html><title>blank</title>")
    shot = run_dir.parent / "report.png"
    browser(profile, "--dump-dom", blank.as_uri())  # warm the profile and the page cache
    base = statistics.median(browser(profile, "--dump-dom", blank.as_uri()) for _ in range(a.repeat))
    dom = statistics.median(browser(profile, "--dump-dom", report.as_uri()) for _ in range(a.repeat))
    png = statistics.median(browser(profile, f"--screenshot={shot}", "--window-size=1400,2000", report.as_uri())
                            for _ in range(a.repeat))
    print(f"chromium start-up on an empty page:  {base:.2f} s (median of {a.repeat})")
    print(f"chromium --dump-dom of the report:   {dom:.2f} s wall, {dom - base:.2f} s over start-up")
    print(f"chromium --screenshot 1400x2000:     {png:.2f} s wall, {png - base:.2f} s over start-up  ->  {shot}")
    print(f"target: under 5 s in the browser: {'met' if dom - base < 5 and png - base < 5 else 'NOT met'}")


if __name__ == "__main__":
    from benchmarks.stops import main_of

    main_of(main, "bench_report")
