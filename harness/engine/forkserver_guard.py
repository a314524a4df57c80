"""Imported by each run's fork server before anything else it preloads (pool._context):
the fork server dies with the chaos process that started it.

Without this a SIGKILLed runner leaves its fork server and every worker running: the
workers' own PR_SET_PDEATHSIG watches their parent, which is the fork server, and the fork
server lives as long as any worker holds its "alive" pipe, so each keeps the other up. With
clients in namespaces `chaos cluster down --all` finds the workers by namespace; with
clients in this machine's own network (the ssh provider, --no-netns) nothing else would.
Never import it anywhere else: it ties the importing process to its parent.

It ignores Ctrl-C, SIGTERM and SIGHUP: they reach it with the chaos process's group (a CI
runner or `docker stop` signals the whole group), and its death would SIGKILL every worker
with the ops it had recorded but not yet handed in. The runner stops it once its workers
are gone (harness/engine/pool.py).

It also joins the run's cgroup (harness/cluster/containment.py), so every worker it forks,
and everything those start, is born inside it.
"""

import signal

from harness.core.interrupts import STOPS, die_with_parent, ignore_stops

# The terminal's Ctrl-C reaches us too: the runner owns it (preload runs before
# multiprocessing's own SIG_IGN, and a press then killed the server with a KeyboardInterrupt).
ignore_stops()
signal.pthread_sigmask(signal.SIG_UNBLOCK, STOPS)  # blocked while we started (pool._start_forkserver)

from harness.cluster.containment import join_from_env  # noqa: E402

die_with_parent()
join_from_env()
