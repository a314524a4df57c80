"""Every contract of chaoslock in one place: the Protocols a plug-in implements, one module
per family beside this one (cluster, client, nemesis, checker), all in layer 1.

A provider implements `Cluster` and whichever capabilities it really has (`ProcessControl`,
`ClockControl`, `NetworkControl`, asked with isinstance); a server kind is a `ServerKind`; a
backend a `LockClient` (a class with `servers` or a `ChoosesServers`); a nemesis a `Nemesis`
(with its `FAULTS`, harness/core/faults.py); a checker a `Checker`. Import them from here to
depend on the contract, not on a family's code.
"""

from __future__ import annotations

from harness.core.contracts.checker import Checker, CheckResult
from harness.core.contracts.client import ChoosesServers, Lease, LockClient, ReadsWallClock, StillHeld
from harness.core.contracts.cluster import (ClockControl, ClockInLog, Cluster, ControlsClients, CountsRequests, HasLeader, NetworkControl,
                                            Node, ProcessControl, Provider, ServerKind, SetsClocksTogether, Shape,
                                            ShapesLinks, ShipsBinary)
from harness.core.contracts.nemesis import JudgesSpec, MovesServerClocks, Nemesis, NemesisContext, Reactive
from harness.core.faults import FaultKind

__all__ = [
    "CheckResult", "Checker", "ChoosesServers", "ClockControl", "ClockInLog", "Cluster", "ControlsClients", "CountsRequests", "FaultKind",
    "HasLeader", "JudgesSpec", "Lease", "LockClient", "MovesServerClocks", "Nemesis", "NemesisContext", "NetworkControl",
    "Node", "ProcessControl", "Provider", "Reactive", "ReadsWallClock", "ServerKind", "SetsClocksTogether", "Shape",
    "ShapesLinks", "ShipsBinary", "StillHeld",
]
