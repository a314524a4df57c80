"""Running matrix cells: each run is a `chaos run --json` subprocess, its summary one row.

Each run is a `chaos run` subprocess rather than `runner.run` in this process, because
(1) a run that crashes hard (a segfault in grpc, an os._exit in a library) or hangs must
cost one cell, not the matrix: a subprocess can be timed out, interrupted (SIGINT makes
the runner heal and tear down as on Ctrl-C) and finally killed, with its servers reaped
by the run id in their environment or process title; (2) `run` sets process-global state (the
multiprocessing context, signal handlers) that a fresh interpreter resets; (3) cells can run side by side. The cost is ~1 s per run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.contracts.checker import parse_valid, verdict_csv
from harness.commands.matrix.rows import CSV_FIELDS


def _vstr(valid: Any) -> str:
    """A run summary's verdict as the row's word: true, false, or unknown for anything else
    (1 == True in a dict lookup, but 1 is no verdict)."""
    return verdict_csv(parse_valid(valid))


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
        elif summary is not None and proc.returncode in (0, 1, 2):  # 130/143: interrupted, a crash of the cell
            row["valid"] = _vstr(summary.get("valid"))
            for k in CSV_FIELDS[5:12]:
                row[k] = summary.get(k, "")
            row["unexplained"] = summary.get("unexplained", "")
            for k in ("stuck", "starved", "handover_stalls"):  # None (not judged) is blank: no count to hold a limit to
                row[k] = "" if summary.get(k) is None else summary[k]
            late, early = summary.get("acquires_late"), summary.get("acquires_early")
            row["timeouts"] = "" if late is None and early is None else (late or 0) + (early or 0)
            row["availability"] = ";".join(f"{p}={v['share']}" for p, v in (summary.get("availability") or {}).items()
                                           if isinstance(v, dict) and v.get("share") is not None)
            row["causes"] = ";".join(f"{k}={v}" for k, v in (summary.get("violations_by_cause") or {}).items())
            row["error"] = "; ".join(summary.get("errors") or [])[:300]
        elif not row["error"]:
            tail = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
            row["error"] = f"exit {proc.returncode}: " + (tail[-1] if tail else "no output")[:300]
        return row

    def interrupt(self) -> None:
        for p in list(self.live):
            _stop(p)
