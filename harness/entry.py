"""The first lines of the `chaos` command (and `python -m harness`).

Importing the harness takes a second or more on a loaded machine. A Ctrl-C, SIGTERM or SIGHUP
in that time ends the command with its exit code (130, 143, 129) and one line, never a
traceback nor a death by the signal; nothing has started yet, so nothing is left behind.
"""

import signal
import sys

from harness.core import interrupts  # light (signal, threading, the error codes): its words and exit codes



def main() -> None:
    arrived: list[int] = []

    def early(signum, frame) -> None:
        arrived.append(signum)
        raise KeyboardInterrupt

    before = {s: signal.getsignal(s) for s in interrupts.STOPS}
    for s, h in before.items():
        if h is not signal.SIG_IGN:  # an ignored signal (nohup, a background job) stays ignored
            signal.signal(s, early)
    try:
        from harness.commands.cli import main as cli_main
    except KeyboardInterrupt:
        interrupts.exiting_interrupted()
        got = arrived[0] if arrived else signal.SIGINT
        print(f"chaos: INTERRUPTED before it started; {interrupts.exit_line(got)}", file=sys.stderr)
        sys.exit(interrupts.exit_code(got))
    if before[signal.SIGINT] is not signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    cli_main()  # it sets its own handlers for SIGTERM and SIGHUP first thing
