"""`chaos matrix`: every backend x nemesis x fencing x seed, judged against expectations.

A cell is (backend, nemesis, fencing); it holds one run per seed (1..N). Its expected
verdict comes from expectations.toml; its observed verdict is, first match wins:
  crash        a run crashed, hung or was interrupted (exit 255/130, a timeout, no summary)
  unsupported  a run was refused as asked (exit 254: a nemesis this backend's servers
               cannot take here, a missing server binary); the reason is kept
  unsafe       a run was invalid (a violation was proven)
  unknown      a run could not be decided
  safe         every run was valid
A cell matches its expectation when:
  safe         observed safe (every run valid)
  unsafe       observed unsafe and no run unknown (a fault that exposes a flaw need not do
               so in every seed; one proven violation is enough)
  either       observed safe, unsafe or unknown (not a crash, not a refusal)
  unsupported  observed unsupported in every run (the harness refuses this cell on purpose
               here; if it starts running, the cell is flagged so its verdict gets looked at)
The command exits 0 when every cell matches, 1 when one does not, 254 on bad arguments.
`--recheck DIR` judges a stored matrix.csv against an expectations file, running nothing.

Each run is a `chaos run` subprocess rather than `runner.run` in this process, because
(1) a run that crashes hard (a segfault in grpc, an os._exit in a library) or hangs must
cost one cell, not the matrix: a subprocess can be timed out, interrupted (SIGINT makes
the runner heal and tear down as on Ctrl-C) and finally killed, with its servers reaped
by the run id in their environment or process title; (2) `run` sets process-global state (the
multiprocessing context, signal handlers, toxiproxy's class-level API address) that a
fresh interpreter resets; (3) cells can run side by side. The cost is ~1 s per run.

`--parallel K` runs K cells at once. Runs are isolated from each other (each has its own
run id, network namespaces, a /24 of 198.18.0.0/15 picked under a host-wide lock, and
free ports), so K > 1 is safe for correctness. It changes timing: on a host with fewer
than 2 cores per parallel run, CPU starvation stretches pauses and delays renewals, so
timing-sensitive cells (unfenced locks under pause-holder, clock-skew) can flip. The
command warns then; nightly CI uses K = 1.
"""

from __future__ import annotations

import csv
import html
import json
import os
import re
import signal
import subprocess
import sys
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from harness.cliargs import Seconds, check_writable_dir, check_writable_file
from harness.errors import BadArgument

VERDICTS = ("safe", "unsafe", "either", "unsupported")
FENCING_KEYS = {True: "fenced", False: "nofence"}
CSV_FIELDS = ("backend", "nemesis", "fencing", "seed", "valid", "violations", "stale_writes_accepted",
              "stale_writes_rejected", "lost_updates", "acquires_ok", "p50_acquire_ms", "p99_acquire_ms", "run_dir",
              "expected", "matched", "cell_observed", "cell_matched", "wall_s", "error")


# -- expectations ------------------------------------------------------------------------------
def _line_of(text: str, table: tuple[str, ...], key: str | None = None) -> int | None:
    """1-based line of `key` inside [table] (or of the [table] header), for error messages."""
    current: tuple[str, ...] = ()
    for i, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if m := re.fullmatch(r"\[([^\[\]]+)\]", line):
            current = tuple(part.strip().strip("\"'") for part in m.group(1).split("."))
            if key is None and current[:len(table)] == table:  # [a.b] also defines [a]
                return i
        elif key is not None and current == table and re.match(rf"[\"']?{re.escape(key)}[\"']?\s*=", line):
            return i
        elif table and current == table[:-1] and re.match(  # a dotted key: [redis] then pause.fenced = ...
                rf"[\"']?{re.escape(table[-1])}[\"']?\s*\.\s*{re.escape(key or '')}", line):
            return i
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class Expectations:
    """expectations.toml, validated. Lookup falls back from [backend.nemesis] to [backend]
    to [default]; inside a table, `nofence`/`fenced` win over `expect`."""

    path: str | None = None
    tables: dict = field(default_factory=dict)

    @classmethod
    def load(cls, path: str | os.PathLike | None) -> "Expectations":
        if path is None:
            return cls()
        p = Path(path)
        try:
            text = p.read_text()
        except OSError as e:
            raise BadArgument(f"cannot read expectations file {p}: {e.strerror}; pass an existing --expectations PATH") from None
        try:
            doc = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise BadArgument(f"{p} is not valid TOML ({e}); fix that line") from None
        from harness import plugins

        backends, nemeses = set(plugins.backend_names()), set(plugins.nemesis_names())

        def where(table: tuple[str, ...], key: str | None = None) -> str:
            line = _line_of(text, table, key)
            name = " ".join(filter(None, ["[" + ".".join(table) + "]" if table else "", key or ""]))
            return f"{p}:{line} {name}" if line else f"{p} {name}"

        def check_values(table: tuple[str, ...], t: dict, subtables_ok: bool) -> None:
            for k, v in t.items():
                if isinstance(v, dict):
                    if not subtables_ok:
                        raise BadArgument(f"{where(table + (k,))}: tables nest only as [backend.nemesis]; remove this level")
                    unknown = [n for n in k.split("+") if n not in nemeses]
                    if unknown:
                        raise BadArgument(f"{where(table + (k,))}: unknown nemesis {unknown[0]!r}; choose one of: {', '.join(sorted(nemeses))}")
                    check_values(table + (k,), v, False)
                elif k not in ("expect", "nofence", "fenced"):
                    raise BadArgument(f"{where(table, k)}: unknown key {k!r}; use expect, nofence or fenced")
                elif v not in VERDICTS:
                    raise BadArgument(f"{where(table, k)}: {v!r} is not a verdict; use one of: {', '.join(VERDICTS)}")

        for name, t in doc.items():
            if not isinstance(t, dict):
                raise BadArgument(f"{where((), name)}: top-level keys must be tables like [default] or [redlock.clock-skew]")
            if name != "default" and name not in backends:
                raise BadArgument(f"{where((name,))}: unknown backend {name!r}; choose one of: {', '.join(sorted(backends))}")
            check_values((name,), t, name != "default")
        return cls(path=str(p), tables=doc)

    def expect(self, backend: str, nemesis: str, fencing: bool) -> str:
        fk = FENCING_KEYS[fencing]
        b = self.tables.get(backend, {})
        for t in (b.get(nemesis, {}), b, self.tables.get("default", {})):
            for k in (fk, "expect"):
                if isinstance(t.get(k), str):
                    return t[k]
        return "either"


def default_expectations() -> Path | None:
    for cand in (Path.cwd() / "expectations.toml", Path(__file__).resolve().parent.parent / "expectations.toml"):
        if cand.is_file():
            return cand
    return None


# -- judging -----------------------------------------------------------------------------------
def _vstr(valid: Any) -> str:
    return {True: "true", False: "false"}.get(valid, "unknown")


def run_matches(valid: str, expected: str) -> bool:
    """Whether one run by itself shows the expected verdict."""
    if valid in ("crash", "unsupported"):
        return valid == expected
    return {"safe": valid == "true", "unsafe": valid == "false", "either": True}.get(expected, False)


def judge_cell(valids: list[str], expected: str) -> tuple[str, bool]:
    """(observed verdict, matched) of a cell from its runs' `valid` strings (module docstring)."""
    for verdict, v in (("crash", "crash"), ("unsupported", "unsupported"), ("unsafe", "false"), ("unknown", "unknown")):
        if v in valids or not valids:
            observed = verdict if valids else "crash"
            break
    else:
        observed = "safe"
    if observed == "crash":
        return observed, False
    if expected == "unsupported" or observed == "unsupported":
        return observed, expected == observed and set(valids) == {"unsupported"}
    if expected == "either":
        return observed, True
    return observed, observed == expected and "unknown" not in valids


def rejudge(rows: list[dict], exp: Expectations) -> list[dict]:
    """Fill expected/matched/cell_* of every row from `exp`; return the cells, in row order."""
    cells: dict[tuple, dict] = {}
    for r in rows:
        fenced = r["fencing"] == "on"
        key = (r["backend"], r["nemesis"], fenced)
        c = cells.setdefault(key, {"backend": key[0], "nemesis": key[1], "fencing": fenced,
                                   "expected": exp.expect(key[0], key[1], fenced), "runs": []})
        c["runs"].append(r)
    for c in cells.values():
        c["observed"], c["matched"] = judge_cell([r["valid"] for r in c["runs"]], c["expected"])
        for r in c["runs"]:
            r.update(expected=c["expected"], matched=run_matches(r["valid"], c["expected"]),
                     cell_observed=c["observed"], cell_matched=c["matched"])
    return list(cells.values())


# -- running -----------------------------------------------------------------------------------
def _descendant_run_ids(root_pid: int) -> set[str]:
    """Run ids of the servers below root_pid (a `chaos run`), while they are still its children."""
    from harness.cluster.reaper import processes

    parent: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                parent[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                pass

    def below(pid: int) -> bool:
        for _ in range(64):
            pid = parent.get(pid, 0)
            if pid in (0, 1) or pid == root_pid:
                return pid == root_pid
        return False

    return {rid for pid, rid in processes().items() if below(pid)}


def _stop(proc: subprocess.Popen, grace: float = 60.0) -> None:
    """SIGINT (the runner heals and tears down), then SIGKILL the group and reap its servers."""
    ids = _descendant_run_ids(proc.pid)
    try:
        proc.send_signal(signal.SIGINT)
        proc.wait(grace)
    except (subprocess.TimeoutExpired, ProcessLookupError):
        ids |= _descendant_run_ids(proc.pid)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(10)
    from harness.cluster.reaper import kill_run

    for rid in ids:
        kill_run(rid)


@dataclass(frozen=True, slots=True, kw_only=True)
class Job:
    backend: str
    nemesis: str
    fencing: bool
    seed: int


class Runner:
    """Runs jobs as `chaos run --json` subprocesses; remembers them so Ctrl-C can stop them."""

    def __init__(self, *, time_limit: float, concurrency: int, store: str, log_dir: Path):
        self.time_limit, self.concurrency, self.store, self.log_dir = time_limit, concurrency, store, log_dir
        self.timeout = 2 * time_limit + 180  # cluster up + workload + teardown + two 10 s checkers, generously
        self.live: set[subprocess.Popen] = set()

    def argv(self, job: Job) -> list[str]:
        return [sys.executable, "-m", "harness", "run", "--backend", job.backend, "--nemesis", job.nemesis.replace("+", ","),
                "--time-limit", f"{self.time_limit:g}", "--concurrency", str(self.concurrency), "--seed", str(job.seed),
                "--fencing" if job.fencing else "--no-fencing", "--store", self.store, "--json"]

    def __call__(self, job: Job) -> dict:
        name = f"{job.backend}-{job.nemesis}-{'fenced' if job.fencing else 'nofence'}-s{job.seed}"
        log = self.log_dir / f"{name}.log"
        row: dict[str, Any] = {"backend": job.backend, "nemesis": job.nemesis, "fencing": "on" if job.fencing else "off",
                               "seed": job.seed, "valid": "crash", "run_dir": "", "error": ""}
        t = time.monotonic()
        with open(log, "w") as err:
            proc = subprocess.Popen(self.argv(job), stdout=subprocess.PIPE, stderr=err, text=True, start_new_session=True)
            self.live.add(proc)
            try:
                out, _ = proc.communicate(timeout=self.timeout)
            except subprocess.TimeoutExpired:
                _stop(proc)
                out, _ = proc.communicate()
                row["error"] = f"timed out after {self.timeout:.0f}s and was stopped"
            finally:
                self.live.discard(proc)
        row["wall_s"] = round(time.monotonic() - t, 1)
        summary = next((json.loads(line) for line in reversed(out.splitlines()) if line.startswith("{")), None)
        row["run_dir"] = (summary or {}).get("run_dir") or ""
        if proc.returncode == 254 and not row["error"]:  # refused as asked: the one sentence says why
            tail = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
            row.update(valid="unsupported", error=(tail[-1] if tail else "exit 254")[:300])
        elif summary is not None and proc.returncode in (0, 1, 2):
            row["valid"] = _vstr(summary.get("valid"))
            for k in CSV_FIELDS[5:12]:
                row[k] = summary.get(k, "")
            row["error"] = "; ".join(summary.get("errors") or [])[:300]
        elif not row["error"]:
            tail = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
            row["error"] = f"exit {proc.returncode}: " + (tail[-1] if tail else "no output")[:300]
        return row

    def interrupt(self) -> None:
        for p in list(self.live):
            _stop(p)


# -- writing -----------------------------------------------------------------------------------
def write_csv(path: Path, rows: list[dict]) -> None:
    tmp = path.with_suffix(".csv.tmp")
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: ("true" if v is True else "false" if v is False else v) for k, v in r.items()})
    os.replace(tmp, path)


def read_csv(path: Path) -> list[dict]:
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        raise BadArgument(f"cannot read {path}: {e.strerror}; pass a matrix dir written by `chaos matrix`") from None
    missing = {"backend", "nemesis", "fencing", "seed", "valid"} - set(rows[0] if rows else CSV_FIELDS)
    if missing:
        raise BadArgument(f"{path} lacks column(s) {', '.join(sorted(missing))}; it was not written by `chaos matrix`")
    return rows


COLOURS = {"safe": "#c8f0c8", "unsafe": "#f6c1c1", "unknown": "#fbe3a6", "unsupported": "#d8d8f0", "crash": "#b9b9b9",
           "skipped": "#eeeeee"}


def write_html(path: Path, cells: list[dict], skipped: list[dict], *, title: str, note: str = "") -> None:
    """A self-contained grid: rows backend (+fencing), columns nemesis, one <td class=cell> each."""
    e = html.escape
    present = {(c["backend"], c["fencing"]) for c in cells + skipped}
    rows = [(b, f) for b in dict.fromkeys(c["backend"] for c in cells + skipped) for f in (False, True) if (b, f) in present]
    cols = list(dict.fromkeys(c["nemesis"] for c in cells + skipped))
    by = {(c["backend"], c["fencing"], c["nemesis"]): c for c in cells}
    skip = {(s["backend"], s["fencing"], s["nemesis"]): s for s in skipped}
    out = [f"<!doctype html><html><head><meta charset='utf-8'><title>{e(title)}</title><style>"
           "body{font:14px system-ui,sans-serif;margin:1.5em}table{border-collapse:collapse}"
           "th,td{border:1px solid #999;padding:.4em .6em;vertical-align:top}td.cell{min-width:9em}"
           "td.mismatch{outline:3px solid #c00;outline-offset:-3px}.exp{color:#444;font-size:12px}"
           "a{color:#024}.legend span{padding:.1em .5em;margin-right:.4em}</style></head><body>",
           f"<h1>{e(title)}</h1><p class='exp'>{e(note)}</p><p class='legend'>"
           + "".join(f"<span style='background:{c}'>{e(k)}</span>" for k, c in COLOURS.items())
           + " a red outline marks a cell that did not match its expectation</p>",
           "<table><tr><th>backend</th>" + "".join(f"<th>{e(n)}</th>" for n in cols) + "</tr>"]
    for backend, fenced in rows:
        out.append(f"<tr><th>{e(backend)}{' +fencing' if fenced else ''}</th>")
        for n in cols:
            attrs = f"data-backend='{e(backend)}' data-nemesis='{e(n)}' data-fencing='{'on' if fenced else 'off'}'"
            if (c := by.get((backend, fenced, n))) is not None:
                cls = "cell" + ("" if c["matched"] else " mismatch")
                seeds = "<br>".join(_seed_html(r, path.parent) for r in c["runs"])
                mark = "matches" if c["matched"] else "MISMATCH"
                out.append(f"<td class='{cls}' {attrs} style='background:{COLOURS[c['observed']]}'><b>{e(c['observed'])}</b> "
                           f"<span class='exp'>expected {e(c['expected'])}: {mark}</span><br>{seeds}</td>")
            elif (s := skip.get((backend, fenced, n))) is not None:
                out.append(f"<td class='cell skipped' {attrs} style='background:{COLOURS['skipped']}'>skipped: {e(s['reason'])}</td>")
            else:
                out.append("<td></td>")
        out.append("</tr>")
    out.append("</table></body></html>")
    path.write_text("\n".join(out))


def _seed_html(r: dict, base: Path) -> str:
    e = html.escape
    v = r.get("valid")
    text = f"seed {r['seed']}: " + (f"{r.get('violations') or 0} violations" if v in ("true", "false") else v)
    for k in ("stale_writes_accepted", "stale_writes_rejected"):
        if r.get(k) not in (None, "", 0, "0"):
            text += f", {r[k]} stale {k.rsplit('_', 1)[1]}"
    report = Path(r["run_dir"]) / "report.html" if r.get("run_dir") else None
    if report is not None and report.exists():
        return f"<a href='{e(os.path.relpath(report, base))}'>{e(text)}</a>"
    return e(text) + (f" <span class='exp'>{e(r['error'][:120])}</span>" if r.get("error") else "")


def table(cells: list[dict], skipped: list[dict]) -> str:
    lines = [f"{'backend':<22}{'fencing':<8}{'nemesis':<18}{'expected':<9}{'observed':<9}{'':<9}per seed (violations)"]
    for c in cells:
        seeds = " ".join(f"s{r['seed']}:{r.get('violations') if r['valid'] in ('true', 'false') else r['valid']}" for r in c["runs"])
        lines.append(f"{c['backend']:<22}{'on' if c['fencing'] else 'off':<8}{c['nemesis']:<18}{c['expected']:<9}"
                     f"{c['observed']:<9}{'ok' if c['matched'] else 'MISMATCH':<9}{seeds}")
    for s in skipped:
        lines.append(f"{s['backend']:<22}{'on':<8}{s['nemesis']:<18}{'-':<9}{'skipped':<9}{'':<9}{s['reason']}")
    return "\n".join(lines)


def write_junit(path: str, cells: list[dict]) -> None:
    """One testcase per cell: passed when it matched; failure for a definite wrong verdict, error otherwise."""
    from results.junit import write_junit as write

    cases = [{"name": f"{c['nemesis']} {'fenced' if c['fencing'] else 'nofence'}", "classname": f"chaoslock.matrix.{c['backend']}",
              "valid": True if c["matched"] else (False if c["observed"] in ("safe", "unsafe") else "unknown"),
              "message": f"expected {c['expected']}, observed {c['observed']}\n" + "\n".join(
                  f"seed {r['seed']}: valid={r['valid']} violations={r.get('violations', '')} run_dir={r.get('run_dir', '')}"
                  + (f" error={r['error']}" if r.get("error") else "") for r in c["runs"]),
              "time_s": sum(float(r.get("wall_s") or 0) for r in c["runs"])} for c in cells]
    write(path, cases, suite="chaoslock-matrix")


def report(cells: list[dict], skipped: list[dict], *, as_json: bool, junit: str | None, matrix_dir: Path | None,
           wall_s: float | None) -> int:
    """Print the table (or JSON), the mismatches, write JUnit; return the exit code."""
    human = sys.stderr if as_json else sys.stdout
    print(table(cells, skipped), file=human)
    bad = [c for c in cells if not c["matched"]]
    if skipped:
        names = ", ".join(dict.fromkeys(s["backend"] for s in skipped))
        print(f"note: {len(skipped)} fenced cells skipped: {names} hand out no fencing tokens (has_fencing is False)", file=human)
    for c in bad:
        print(f"MISMATCH {c['backend']} {c['nemesis']} fencing {'on' if c['fencing'] else 'off'}: expected "
              f"{c['expected']}, observed {c['observed']}"
              + "".join(f"; seed {r['seed']} {r['error']}" for r in c["runs"] if r.get("error")), file=human)
    print(f"{len(cells) - len(bad)}/{len(cells)} cells match their expectations"
          + (f"; matrix in {matrix_dir}" if matrix_dir else "") + (f"; {wall_s:.0f} s" if wall_s else ""), file=human)
    if junit:
        write_junit(junit, cells)
    if as_json:
        print(json.dumps({"ok": not bad, "matrix_dir": str(matrix_dir) if matrix_dir else None, "wall_s": wall_s,
                          "cells": [{k: v for k, v in c.items() if k != "runs"} | {"runs": c["runs"]} for c in cells],
                          "mismatches": [f"{c['backend']}/{c['nemesis']}/{'fenced' if c['fencing'] else 'nofence'}" for c in bad],
                          "skipped": skipped}, default=str))
    return 1 if bad else 0


def _new_dir(store: str) -> Path:
    from results.store import stamped_dir

    d = stamped_dir(Path(store) / "matrix")
    (d / "logs").mkdir()
    return d


def _names(text: str, what: str) -> list[str]:
    from harness import plugins

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
@click.option("--concurrency", "-c", type=click.IntRange(1, 64), default=5, show_default=True)
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

    Exit 0 when every cell matches its expectation, 1 when one does not, 254 on bad arguments.
    --parallel K > 1 keeps runs isolated but shares CPUs: with fewer than 2 cores per run,
    timing-sensitive cells can change verdict. --recheck DIR re-judges a stored matrix.
    """
    check_writable_dir(store, "--store")
    if junit:
        check_writable_file(junit, "--junit")
    exp = Expectations.load(exp_path if exp_path is not None else default_expectations())
    human = sys.stderr if as_json else sys.stdout
    if exp.path is None:
        print("note: no expectations.toml found; every cell is expected \"either\"", file=human)
    if recheck:
        rows = read_csv(Path(recheck) / "matrix.csv")
        try:
            skipped = json.loads((Path(recheck) / "matrix.json").read_text()).get("skipped", [])
        except (OSError, ValueError):
            skipped = []
        return report(rejudge(rows, exp), skipped, as_json=as_json, junit=junit, matrix_dir=Path(recheck), wall_s=None)

    from harness import plugins

    bs = _names(backends, "backends") if backends else plugins.backend_names()
    ns = _names(nemeses, "nemeses")
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
    (mdir / "matrix.json").write_text(json.dumps({"command": " ".join(["chaos"] + sys.argv[1:]), "expectations": exp.path,
                                                  "jobs": len(jobs), "skipped": skipped}, indent=1))
    runner = Runner(time_limit=time_limit, concurrency=concurrency, store=store, log_dir=mdir / "logs")
    rows: list[dict] = []
    t0 = time.monotonic()
    print(f"chaos matrix: {len(jobs)} runs ({len(bs)} backends x {len(ns)} nemeses x {len(fences)} fencing x {seeds} "
          f"seeds{f', {len(skipped)} skipped' if skipped else ''}), {parallel} at a time, into {mdir}", file=human)
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
        print("chaos matrix: interrupted; stopping the running cells", file=sys.stderr)
        pool.shutdown(wait=False, cancel_futures=True)
        runner.interrupt()
    pool.shutdown(wait=True)
    wall = round(time.monotonic() - t0, 1)
    cells = rejudge(rows, exp)
    write_csv(mdir / "matrix.csv", rows)
    write_html(mdir / "matrix.html", cells, skipped, title=f"chaos matrix {mdir.name}",
               note=f"{' '.join(['chaos'] + sys.argv[1:])} (expectations: {exp.path or 'none'})")
    code = report(cells, skipped, as_json=as_json, junit=junit, matrix_dir=mdir, wall_s=wall)
    return 130 if interrupted else code
