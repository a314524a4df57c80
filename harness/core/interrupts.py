"""Ctrl-C must never cut a teardown short.

People press Ctrl-C two or three times. The first press ends a run (KeyboardInterrupt);
every press after that, while the harness heals faults, stops workers and servers,
removes namespaces and writes the results, would otherwise interrupt that cleanup half
way and leave namespaces, rules and processes behind. Inside `shielded()` SIGINT and
SIGTERM only say what is happening and are otherwise ignored until the step ends, unless
the step has a safe faster path (`skip`): checking a long history can be skipped and done
later with `chaos report`, so there a second press raises KeyboardInterrupt.

The terminal sends Ctrl-C to the whole foreground process group, so the commands a
teardown runs (`ip`, `iptables-restore`) must not be in it: start them with
`process_group=0` (see `quiet_group`).

SIGTERM (a CI runner, systemd, `docker stop`) and SIGHUP (a closed terminal or ssh session)
stop a command as Ctrl-C does (STOPS). They often go to a whole process group: every child
that records ops (the fork server and its workers) ignores all three and is stopped by the
runner, so no op it recorded is lost to the signal (harness/engine/forkserver_guard.py).

A command that was interrupted says so on its last line and exits 128 + the signal: 130
for Ctrl-C (SIGINT), 143 for SIGTERM, 129 for SIGHUP (`exit_code`, `exit_line`), never the 0
or 1 of a verdict that covers only part of what was asked. The handlers here record which
signal came first (`ended_by`); `first_press_ends` starts each run's record afresh.
"""

from __future__ import annotations

import signal
import sys
import threading
from contextlib import contextmanager
from typing import Iterator

from harness.core.errors import EXIT_HANGUP, EXIT_INTERRUPTED, EXIT_TERMINATED

STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # each ends a command as Ctrl-C does
_CODES = {signal.SIGINT: EXIT_INTERRUPTED, signal.SIGTERM: EXIT_TERMINATED, signal.SIGHUP: EXIT_HANGUP}
_WORDS = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP"}
_NAMES = {signal.SIGINT: "SIGINT", signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP"}

_presses = 0  # Ctrl-C (or SIGTERM) received while shielded, in this process
_ended_by: int | None = None  # the first SIGINT or SIGTERM since the record was started
_held: list | None = None  # reactions deferred() holds back until its step is done
_to_end = True  # a press must end the command (false once a run's end began: `ending`)


@contextmanager
def _on_press(react) -> Iterator[None]:
    """Within the block, every SIGINT, SIGTERM and SIGHUP is counted and handed to react(n), n the
    number of presses so far in this block; react may raise KeyboardInterrupt. A no-op
    outside the main thread (only it can set handlers)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    seen = 0

    def handler(signum, frame) -> None:
        global _presses
        nonlocal seen
        note(signum)
        _presses += 1
        seen += 1
        if _held is not None:  # inside deferred(): react once the step is done
            _held.append(lambda n=seen: react(n))
            return
        react(seen)

    before = {s: signal.signal(s, handler) for s in STOPS}
    try:
        yield
    finally:
        for s, h in before.items():
            signal.signal(s, h)


@contextmanager
def shielded(doing: str, skip: str | None = None) -> Iterator[None]:
    """Run the block with SIGINT, SIGTERM and SIGHUP deferred: the first press prints one line saying
    `doing` is under way. With `skip` (a safe faster path, in words) that line offers it and
    the next press raises KeyboardInterrupt; without, presses are ignored.

    A press inside a shield that a command's start-up (or a run's middle) enters is not
    swallowed: when the block ends, it ends the command as the press would have outside
    (KeyboardInterrupt), unless the run's end has begun already (`ending`)."""
    global _to_end
    pressed = 0

    def react(n: int) -> None:
        nonlocal pressed
        pressed = n
        if n == 1:
            then = f"press Ctrl-C again to {skip}" if skip else "Ctrl-C is ignored until it is done"
            print(f"\nchaos: {doing}; please wait ({then})", file=sys.stderr, flush=True)
        elif skip:
            raise KeyboardInterrupt

    with _on_press(react):
        yield
    if pressed and _to_end:
        _to_end = False
        raise KeyboardInterrupt


def first_press_ends():
    """Around a whole run: the first Ctrl-C (or SIGTERM, SIGHUP) raises KeyboardInterrupt, every
    later one is counted and ignored, so no press between two shielded steps (there is
    always a moment) can cut the teardown short. Shields inside it still apply."""

    def react(n: int) -> None:
        global _to_end
        if n == 1 and _to_end:
            _to_end = False
            raise KeyboardInterrupt

    global _ended_by
    _ended_by = None  # a new run: which signal ends it is yet to be seen
    return _run_block(react)


@contextmanager
def _run_block(react) -> Iterator[None]:
    global _to_end
    outer, _to_end = _to_end, True
    try:
        with _on_press(react):
            yield
    finally:
        _to_end = outer


def ending() -> None:
    """The run's end has begun (its teardown, interrupted or not): from here a press is only
    counted (`presses`), never raised by first_press_ends or handed on by a shield."""
    global _to_end
    _to_end = False


def _stop_like_ctrl_c(signum, frame) -> None:
    note(signum)  # so the command exits 143 (129), not Ctrl-C's 130
    raise KeyboardInterrupt


def handle_stops() -> None:
    """For a command's main: SIGTERM (a CI timeout, `kill`) and SIGHUP end it as Ctrl-C does,
    with KeyboardInterrupt, so its teardown runs and it exits 143 or 129 (`exit_code`)."""
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, _stop_like_ctrl_c)


def note(signum: int) -> None:
    """Record that `signum` (one of STOPS) arrived; the first one since the record
    started is what ended the command (`ended_by`)."""
    global _ended_by
    if _ended_by is None:
        _ended_by = signum


def ended_by() -> int | None:
    """The signal that interrupted the current run or command, if one was recorded (a Ctrl-C
    that Python's own handler turned into KeyboardInterrupt is not: that is SIGINT)."""
    return _ended_by


def _first(signum: int | None) -> int:
    return signum if signum in _CODES else (_ended_by if _ended_by in _CODES else signal.SIGINT)


def exit_code(signum: int | None = None) -> int:
    """The exit code of a command interrupted by `signum` (default: the recorded one, else
    SIGINT): 130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP."""
    return _CODES[_first(signum)]


def how(signum: int | None = None) -> str:
    """"Ctrl-C", "SIGTERM" or "SIGHUP": what interrupted the command, in words."""
    return _WORDS[_first(signum)]


def signal_name(signum: int | None = None) -> str:
    """"SIGINT", "SIGTERM" or "SIGHUP", for the records (outcome.json, the summary's interrupted_by)."""
    return _NAMES[_first(signum)]


def ignore_stops() -> None:
    """Ignore every signal in STOPS: for a process whose parent stops it (a worker, the fork
    server), and for the exit of a command already interrupted (a second or third press must
    not end the exit itself)."""
    for s in STOPS:
        signal.signal(s, signal.SIG_IGN)


def exiting_interrupted() -> None:
    """For the exit of a command a signal interrupted: ignore any further press (a second or
    third must not end the exit itself) and make the exit code ours (130, 143, 129).

    CPython (3.8+) dies of SIGINT at exit (-2, whatever sys.exit said) when it recorded a
    KeyboardInterrupt leaving code run by exec() of a string: a press landing inside
    dataclasses' or namedtuple's generated code while the harness imports (1 in 10 presses in
    the first quarter second here). Catching that KeyboardInterrupt does not clear the record;
    the next exec() of a string does, which is what the line below is for."""
    ignore_stops()
    exec("None")  # clears CPython's record of a KeyboardInterrupt left by an earlier exec()


def exit_line(signum: int | None = None) -> str:
    """The last line of an interrupted command: "exit code: 130 (interrupted by Ctrl-C)"."""
    return f"exit code: {exit_code(signum)} (interrupted by {how(signum)})"


@contextmanager
def deferred() -> Iterator[None]:
    """Within the block, Ctrl-C, SIGTERM and SIGHUP are counted but acted on only when it ends (then
    as the enclosing handler would have: the first press of a run raises KeyboardInterrupt).
    For steps that must not stop half way, such as starting processes: a child forked but
    not yet known to its parent object is orphaned, and a teardown waits on it for good.

    A signal mask cannot do this: it holds back a signal from the calling thread only, the
    kernel then hands it to any other thread, and the main thread runs the Python handler
    all the same at its next bytecode."""
    global _held
    outer, _held = _held, []
    try:
        yield
    finally:
        todo, _held = _held, outer
        for react in todo:
            react()


def die_with_parent() -> None:
    """Have the kernel SIGKILL this process when its parent dies (PR_SET_PDEATHSIG): for
    workers of a runner that may be SIGKILLed, and the client processes of those workers.
    Call it first thing in the child (also as a Popen preexec_fn)."""
    import ctypes
    import os

    parent = os.getppid()
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent died before the call took effect
        os._exit(1)


def presses() -> int:
    """How many Ctrl-Cs arrived while shielded (a run counts them as an interruption)."""
    return _presses


def quiet_group() -> dict:
    """Popen keywords that keep a helper command out of the terminal's process group."""
    return {"process_group": 0}
