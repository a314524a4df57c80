"""An interrupted command says so on its last line and exits 128 + the signal: 130 for Ctrl-C
(SIGINT), 143 for SIGTERM, never 0 or 1 (harness/core/interrupts.py records which signal it was)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import pytest

from harness.core import interrupts
from harness.core.errors import EXIT_INTERRUPTED, EXIT_TERMINATED
from tests.conftest import ROOT

SUMMARY = {"valid": "unknown", "interrupted": True, "violations": 0, "critical_sections": 12, "run_dir": "/r",
           "unknown_reason": "the run was interrupted"}


def test_the_codes():
    assert (EXIT_INTERRUPTED, EXIT_TERMINATED) == (130, 143)
    assert interrupts.exit_code(signal.SIGINT) == 130 and interrupts.exit_code(signal.SIGTERM) == 143


@pytest.mark.parametrize("signum, last", [(signal.SIGINT, "  exit code: 130 (interrupted by Ctrl-C)"),
                                          (signal.SIGTERM, "  exit code: 143 (interrupted by SIGTERM)")])
def test_verdict_text_of_an_interrupted_run_ends_with_its_code(signum, last):
    from harness.commands.cli import verdict_text

    text = verdict_text(SUMMARY, interrupted_by=signum)
    assert text.splitlines()[-1] == last and "INTERRUPTED" in text.splitlines()[0]


def test_verdict_text_of_a_stored_interrupted_run_is_its_check_code():
    """`chaos check` of an interrupted run was not itself interrupted: its code is the verdict's."""
    from harness.commands.cli import verdict_text

    assert verdict_text(SUMMARY).splitlines()[-1] == "  exit code: 2"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_the_signal_that_ended_a_block_is_recorded(signum):
    import os

    with interrupts.first_press_ends():
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signum)
        os.kill(os.getpid(), signal.SIGINT if signum == signal.SIGTERM else signal.SIGTERM)  # a later press: ignored
    assert interrupts.ended_by() == signum and interrupts.exit_code() == 128 + signum


def _chaos_with(body: str) -> subprocess.CompletedProcess:
    """The real `chaos` main with one extra command, `slow`, whose body is `body`."""
    code = textwrap.dedent("""
        import os, signal, sys, time
        from harness.commands import cli
        @cli.cli.command()
        def slow():
        {body}
        cli.main(["slow"])
    """).format(body=textwrap.indent(textwrap.dedent(body), "    "))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)


@pytest.mark.parametrize("signum, code, words", [(signal.SIGINT, 130, "Ctrl-C"), (signal.SIGTERM, 143, "SIGTERM")])
def test_a_command_ended_by_a_signal_exits_with_its_code(signum, code, words):
    r = _chaos_with(f"os.kill(os.getpid(), {int(signum)})\ntime.sleep(30)")
    assert r.returncode == code, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert "INTERRUPTED" in last and f"exit code: {code} (interrupted by {words})" in last
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_matrix_exits_with_the_signal_and_says_so(tmp_path, signum, code):
    """The matrix's cells stop (each as its own Ctrl-C), its pages are written from the runs
    that finished, and its last line says it was interrupted."""
    r = _chaos_with(f"""
        import threading
        from pathlib import Path
        from harness.core import interrupts
        from harness.commands.matrix import _run_cells
        from harness.commands.matrix.cells import Job
        from harness.commands.matrix.expectations import Expectations

        class Cells:
            stopped = threading.Event()
            def __call__(self, job):
                if job.seed == 1:
                    return {{"backend": job.backend, "nemesis": job.nemesis, "fencing": "off", "seed": 1,
                            "valid": "true", "wall_s": 0.1}}
                os.kill(os.getpid(), {int(signum)})
                self.stopped.wait(20)
                return {{"backend": job.backend, "nemesis": job.nemesis, "fencing": "off", "seed": job.seed,
                        "valid": "crash", "wall_s": 0.1, "error": "interrupted"}}
            def interrupt(self):
                self.stopped.set()

        mdir = Path({str(tmp_path)!r})
        jobs = [Job(backend="redis", nemesis="none", fencing=False, seed=s) for s in (1, 2)]
        with interrupts.first_press_ends():
            return _run_cells(Cells(), jobs, 1, Expectations(), [], mdir, sys.stdout, 0.0, False, None)
    """)
    assert r.returncode == code, r.stdout + r.stderr
    last = r.stdout.strip().splitlines()[-1]
    assert "INTERRUPTED" in last and f"exit code: {code}" in last, r.stdout
    assert (tmp_path / "matrix.csv").exists() and (tmp_path / "matrix.html").exists()


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_reproduce_prints_the_finished_runs_and_says_so(tmp_path, signum, code):
    """The first seed finished, the second was cut short: the table has the first, the last
    line says INTERRUPTED, and the code is the signal's, not the table's 0."""
    script = textwrap.dedent(f"""
        import os, time
        from harness.commands import cli, reproduce

        def run_scenario(sc, seeds, *, on_row, **kw):
            on_row({{"scenario": sc.name, "variant": "nofence", "seed": 1, "expected": "unsafe", "matched": True,
                    "violations": 2, "stale_accepted": 1, "stale_rejected": 0, "lost": 1, "first_violation_s": 3.0,
                    "causes": {{}}, "run_dir": "x"}})
            os.kill(os.getpid(), {int(signum)})
            time.sleep(30)

        reproduce.run_scenario = run_scenario
        cli.main(["reproduce", "gc-pause", "--seeds", "2", "--store", {str(tmp_path)!r}])
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == code, r.stdout + r.stderr
    lines = r.stdout.strip().splitlines()
    assert "| gc-pause | nofence | unsafe | 1 | 1/1 |" in r.stdout
    assert "INTERRUPTED" in lines[-1] and f"exit code: {code}" in lines[-1], r.stdout
    assert "Traceback" not in r.stderr
