"""How a benchmark ends on Ctrl-C, SIGTERM or SIGHUP: as a chaos command does.

A benchmark runs clusters and whole chaos runs for minutes. The first press (or signal) stops
it: the run in progress heals and tears down (harness/engine/runner.py, which returns an
interrupted outcome instead of raising: `stop_if_interrupted` turns that into the end of the
benchmark, never the next run), what was measured so far stays printed, and the last line
says it was interrupted; exit 130, 143 or 129. SIGTERM and SIGHUP no longer kill it on the
spot, which left the cluster of the moment (namespaces, servers) behind.
"""

from __future__ import annotations

import sys
from typing import Any, Callable

from harness.core import interrupts


def stop_if_interrupted(outcome: Any) -> Any:
    """The outcome of runner.run, unless a signal interrupted that run: then end the benchmark."""
    if getattr(outcome, "interrupted", False):
        raise KeyboardInterrupt
    return outcome


def main_of(main: Callable[[], Any], name: str) -> None:
    """Run a benchmark's main and exit with its code (None counts as 0), or with 130/143/129
    and one line when a signal ended it."""
    interrupts.handle_stops()
    try:
        with interrupts.first_press_ends():
            code = main()
    except KeyboardInterrupt:
        interrupts.exiting_interrupted()  # a second press must not end the exit itself
        print(f"{name}: INTERRUPTED; what is printed above is what was measured; {interrupts.exit_line()}",
              file=sys.stderr, flush=True)
        sys.exit(interrupts.exit_code())
    sys.exit(code or 0)
