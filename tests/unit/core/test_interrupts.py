"""harness/core/interrupts.py with real signals: Ctrl-C never cuts a shielded step short, unless
the step offers a safe faster path, which the second press takes."""

import os
import signal

import pytest

from harness.core import interrupts


def press() -> None:
    os.kill(os.getpid(), signal.SIGINT)  # delivered before os.kill returns, to this thread


def test_presses_inside_a_shield_are_counted_and_ignored_until_it_ends(capsys):
    before = interrupts.presses()
    done = False
    with pytest.raises(KeyboardInterrupt):  # handed on once the step is done: never swallowed
        with interrupts.shielded("cleaning up"):
            press()
            press()
            os.kill(os.getpid(), signal.SIGTERM)
            done = True
    assert done and interrupts.presses() == before + 3
    err = capsys.readouterr().err
    assert err.count("cleaning up") == 1 and "ignored until it is done" in err


def test_a_press_in_a_shield_of_a_run_start_up_ends_the_run_when_the_step_is_done():
    """The start-up step (removing a probe's namespace, say) finishes; then the run ends."""
    steps = []
    with interrupts.first_press_ends():
        try:
            with interrupts.shielded("removing the probe"):
                press()
                steps.append("step finished")
            steps.append("not reached: the run went on")
        except KeyboardInterrupt:
            steps.append("ended")
        interrupts.ending()
        with interrupts.shielded("cleaning up"):  # the teardown: counted, never handed on
            press()
        steps.append("tore down")
    assert steps == ["step finished", "ended", "tore down"]


def test_after_the_end_began_a_press_is_only_counted():
    before = interrupts.presses()
    with interrupts.first_press_ends():
        interrupts.ending()
        press()  # a run that ended normally and is tearing down: counted (it exits 130), not raised
        with interrupts.shielded("checking"):
            press()
    assert interrupts.presses() == before + 2


def test_the_second_press_takes_the_offered_faster_path(capsys):
    reached = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts.shielded("checking", skip="skip the checks"):
            press()
            reached.append("after the first")
            press()
            reached.append("after the second")
    assert reached == ["after the first"]
    assert "press Ctrl-C again to skip the checks" in capsys.readouterr().err


def test_the_handlers_are_restored():
    h_int, h_term = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    with interrupts.shielded("x"):
        assert signal.getsignal(signal.SIGINT) is not h_int
    assert signal.getsignal(signal.SIGINT) is h_int and signal.getsignal(signal.SIGTERM) is h_term
    with pytest.raises(KeyboardInterrupt):
        press()  # outside a shield Ctrl-C interrupts as usual


def test_around_a_run_only_the_first_press_interrupts():
    steps = []
    with interrupts.first_press_ends():
        try:
            press()
            steps.append("not reached")
        except KeyboardInterrupt:
            steps.append("ended")
        press()  # between two shielded steps: ignored, not raised
        press()
        steps.append("tore down")
    assert steps == ["ended", "tore down"]


def test_sighup_is_a_stop_too_and_exits_129(capsys):
    before = interrupts.presses()
    with interrupts.first_press_ends():
        interrupts.ending()
        with interrupts.shielded("cleaning up"):
            os.kill(os.getpid(), signal.SIGHUP)  # a closed terminal: counted and held, never the default death
    assert interrupts.presses() == before + 1
    assert interrupts.exit_code(signal.SIGHUP) == 129 and interrupts.how(signal.SIGHUP) == "SIGHUP"
    assert interrupts.signal_name(signal.SIGHUP) == "SIGHUP"
    assert interrupts.exit_line(signal.SIGTERM) == "exit code: 143 (interrupted by SIGTERM)"
    assert interrupts.exit_code(signal.SIGINT) == 130


def test_a_process_that_ignores_stops_survives_each_of_them():
    """What the fork server and every worker do: the runner stops them, a group signal does not."""
    import subprocess
    import sys

    code = ("import os, signal, time\nfrom harness.core.interrupts import ignore_stops\nignore_stops()\n"
            "for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):\n    os.kill(os.getpid(), s)\n"
            "time.sleep(0.05)\nprint('alive')")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0 and p.stdout.strip() == "alive", p.stderr


_FORK_PRESS = """
import os, signal, subprocess, sys
from harness.core import interrupts

# a press that lands inside the at-fork hooks Python runs around a fork with a preexec_fn
# (logging's lock release is one): what a press 0.6 s into `chaos run` once hit in CI
os.register_at_fork(after_in_parent=lambda: os.kill(os.getpid(), signal.SIGINT))
with interrupts.first_press_ends():
    try:
        if sys.argv[1] == "deferred":
            with interrupts.deferred():
                subprocess.Popen(["true"], preexec_fn=lambda: None).wait()
        else:
            subprocess.Popen(["true"], preexec_fn=lambda: None).wait()
        print("went on")
    except KeyboardInterrupt:
        print("ended")
"""


@pytest.mark.parametrize("held, said, ignored", [("deferred", "ended", False), ("bare", "went on", True)])
def test_a_press_in_a_forks_hooks_is_held_by_deferred_and_lost_without_it(held, said, ignored):
    """Why every Popen with a preexec_fn in the harness sits in `deferred()`: bare, the press
    raised inside a hook is printed as "Exception ignored" with a traceback and lost."""
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    r = subprocess.run([sys.executable, "-c", _FORK_PRESS, held], capture_output=True, text=True, cwd=root,
                       timeout=60)
    assert r.stdout.strip() == said, r.stdout + r.stderr
    assert ("Exception ignored" in r.stderr) is ignored, r.stderr


def test_every_popen_with_a_preexec_fn_in_the_harness_is_deferred():
    """The harness's main process starts children with a preexec_fn in several places; each must
    hold presses (the test above). Worker-side code (workloads/) ignores stops altogether."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[3] / "harness"
    bare = []
    for path in root.rglob("*.py"):
        tree = ast.parse(path.read_text())
        held = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.With) and any(
                    isinstance(i.context_expr, ast.Call) and getattr(i.context_expr.func, "id", "") == "deferred"
                    for i in node.items):
                held.update(id(n) for n in ast.walk(node))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and any(k.arg == "preexec_fn" for k in node.keywords) \
                    and id(node) not in held:
                bare.append(f"{path.relative_to(root.parent)}:{node.lineno}")
    assert not bare, f"a Popen with a preexec_fn outside deferred(): {bare}"


def test_the_exit_of_an_interrupted_command_clears_cpythons_record_of_a_press_in_exec():
    """A KeyboardInterrupt that left code run by exec() of a string (dataclasses and namedtuple
    make their methods so, while the harness imports) stays recorded in CPython even once it is
    caught, and made an interrupted command die of SIGINT (-2) instead of exiting 130: 1 press in
    10 in its first quarter second (`test_a_press_at_any_moment_of_start_up_ends_the_run`)."""
    import ctypes

    try:
        record = ctypes.c_int.in_dll(ctypes.pythonapi, "_Py_UnhandledKeyboardInterrupt")
    except ValueError:
        pytest.skip("this Python does not export its record of an unhandled KeyboardInterrupt")
    before = {s: signal.getsignal(s) for s in interrupts.STOPS}
    try:
        try:
            exec("raise KeyboardInterrupt")
        except KeyboardInterrupt:
            pass
        assert record.value == 1
        interrupts.exiting_interrupted()
        assert record.value == 0
        assert all(signal.getsignal(s) is signal.SIG_IGN for s in interrupts.STOPS)
    finally:
        for s, h in before.items():
            signal.signal(s, h)
