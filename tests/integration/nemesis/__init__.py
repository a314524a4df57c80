"""Every nemesis against real clusters in namespaces: in effect, visible, and gone after heal.

One file per nemesis (partition, pause, kill, clock; the seeded schedule apart). The
nemesis classes are driven as harness/engine/runner.py drives them (setup with a
NemesisContext, `invoke` with nemesis invoke ops, `teardown`), against one cluster per
server kind, shared by every file here and healed between tests (conftest.py). Faults
that need a workload (pause-holder, client clocks, the seeded schedule) run `chaos run`
subprocesses. Each test shows (a) the fault is in effect, (b) its effect on the servers,
(c) that nothing of it remains: no chaoslock iptables rule in any namespace of the run,
no task in state T, clocks back, killed nodes alive and serving.

Measured figures are printed as `[figure] ...` lines (run with -s); NEMESES.md
tabulates them.
"""
