"""One root exception, specific subclasses, and the exit codes they map to.

Every message names the offender and the fix, in one sentence, so the CLI can print it
as is: "unknown backend 'redlok'; choose one of: redis, redlock, zookeeper, etcd".
"""

EXIT_VALID = 0
EXIT_INVALID = 1
EXIT_UNKNOWN = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT: stopped by Ctrl-C; whatever it printed covers only what ran
EXIT_TERMINATED = 143  # 128 + SIGTERM: stopped by `kill` or a CI timeout, likewise
EXIT_HANGUP = 129  # 128 + SIGHUP: its terminal or ssh session closed, likewise
EXIT_BAD_ARGS = 254
EXIT_CRASH = 255


class ChaosError(Exception):
    """Root of every error chaoslock raises on purpose."""

    exit_code = EXIT_CRASH


class BadArgument(ChaosError):
    """The user asked for something that cannot be done as asked."""

    exit_code = EXIT_BAD_ARGS


class MissingDependency(BadArgument):
    """A server binary, library or kernel feature the run needs is not installed."""


class PortInUse(BadArgument):
    """A server could not bind its port because something else holds it."""


class BadHistory(BadArgument):
    """A file given as a history is not one (the message names the line and why)."""


class ClusterError(ChaosError):
    """A server failed to start, stop or answer; the message points at its log."""


class NemesisError(ChaosError):
    """A fault could not be applied or verified."""


class NotAcquired(Exception):
    """A lock client definitely did not get the lock (a `fail` op, not an error)."""


class LockLost(Exception):
    """A holder learned it no longer holds its lease (a watchdog renewal failed)."""


# An external client process that exited on its own, untold (workloads/external.py ClientDied):
# the error of the op it left in doubt begins with this, and harness/checker/alive.py judges it.
CLIENT_DIED = "client died"
