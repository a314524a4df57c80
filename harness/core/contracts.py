"""Every contract of chaoslock in one place: the Protocols a plug-in implements.

Each lives beside its family (the contract modules, layer 1 in tests/layers.toml, though they
sit in their family's package): a provider implements `Cluster` and whichever capabilities it
really has (`ProcessControl`, `ClockControl`, `NetworkControl`, asked with isinstance); a
server kind is a `ServerKind`; a backend a `LockClient` (a class with `servers` or a
`ChoosesServers`); a nemesis a `Nemesis` (with its `FAULTS`, harness/core/faults.py); a checker a
`Checker`. Import them from here to depend on the contract, not on a family's code.
"""

from __future__ import annotations

from harness.checker.base import Checker, CheckResult
from harness.cluster.base import (ClockControl, Cluster, CountsRequests, HasLeader, NetworkControl, Node,
                                  ProcessControl, ServerKind, SetsClocksTogether)
from harness.core.faults import FaultKind
from nemesis.base import MovesServerClocks, Nemesis, NemesisContext, Reactive
from workloads.base import ChoosesServers, Lease, LockClient, ReadsWallClock, StillHeld

__all__ = [
    "CheckResult", "Checker", "ChoosesServers", "ClockControl", "Cluster", "CountsRequests", "FaultKind",
    "HasLeader", "Lease", "LockClient", "MovesServerClocks", "Nemesis", "NemesisContext", "NetworkControl",
    "Node", "ProcessControl", "Reactive", "ReadsWallClock", "ServerKind", "SetsClocksTogether", "StillHeld",
]
