"""Does the client process stay alive? (external clients: `chaos run --client CMD`)

A lock client that dies of its own unhandled error (a background refresh that throws after
a release, a watchdog thread that crashes the process) takes its application down with it.
The harness restarts it and goes on (the op it left is `info`, in doubt), but the death is
a finding: "client died", with what the client last wrote on its stderr. Deaths the harness
caused are not: a nemesis kill takes the worker with it (no op is left), a client the harness
ended after a hang or a bad reply was alive, and the end of the run closes every client.
"""

from __future__ import annotations

from typing import Any, Sequence

from harness.core.contracts.checker import CheckResult
from harness.core.errors import CLIENT_DIED
from harness.core.history import NEMESIS, Op

MAX_LISTED = 50


def check_alive(spec: Any, history: Sequence[Op]) -> CheckResult:
    deaths = [o for o in history if o.process not in (NEMESIS, "final") and o.type == "info"
              and CLIENT_DIED in (o.error or "")]
    words = [{"index": o.index, "process": o.process, "time_ns": o.time_ns, "f": o.f,
              "words": (o.error or "")[(o.error or "").index(CLIENT_DIED):][:300]} for o in deaths]
    return CheckResult(name="alive", valid=not deaths, summary={"client_deaths": len(deaths)},
                       details={"findings": words[:MAX_LISTED]})
