"""The facts about a run's lock service that a checker needs, recorded by the runner.

`spec.facts` (written into spec.json beside the options) holds them:

  kind              server kind of the lock service: "valkey", "etcd" or "zookeeper"
  servers           how many lock servers
  clock_expiry      whether moving a server's clock moves its key expiry (valkey: yes;
                    etcd: no, leases run on the monotonic clock; ZooKeeper: zk_clock)
  persists          whether a server's data survives a restart (valkey only with appendonly)
  session_timeout_ms  the session timeout asked for, when the backend has sessions
  faults            the fault kinds of the run's nemeses (harness/core/faults.py)
  release_checks_owner  whether the client's release deletes only its own lock (compare-and-
                    delete); None: unknown (an external client that did not say)
  validity          how the clients' valid_until_ns was counted: "from-grant" (from when the
                    service granted or renewed the lease); absent in runs stored before, whose
                    validity some clients counted from when the acquire was sent
  retry_delay_ms    the longest a built-in design that polls sleeps between tries (its
                    -o retry_delay_ms with the default); None for one that is woken instead

A history stored before facts were recorded gets what can be derived purely: the built-in
backends' service (`BUILTIN_SERVICE`, held equal to their `servers` by
tests/unit/core/test_facts.py) and the cluster options. What cannot be derived stays None, and a
cause that would need it is "unknown", never a pass.
"""

from __future__ import annotations

from dataclasses import dataclass

VALIDITY = "from-grant"  # how this version's clients count the validity they report
from typing import Any, Mapping

BUILTIN_SERVICE: dict[str, tuple[str, int]] = {
    "redlock": ("valkey", 5), "redis": ("valkey", 1), "redis-unsafe-release": ("valkey", 1),
    "redis-setnx-expire": ("valkey", 1), "pottery": ("valkey", 5), "python-redis-lock": ("valkey", 1),
    "zookeeper": ("zookeeper", 3), "zookeeper-recipe": ("zookeeper", 3),
    "etcd": ("etcd", 3), "etcd-recipe": ("etcd", 3),
}
SESSIONS = ("etcd", "zookeeper")  # kinds whose locks live as long as a client session or lease


def clock_expiry(kind: str | None, options: Mapping[str, Any] | None = None) -> bool:
    """Whether a clock move on a kind's servers reaches key expiry (they start under
    libfaketime): valkey always; ZooKeeper only with zk_clock=faketime; etcd never (Go reads
    time through the vDSO, and its leases run on the monotonic clock)."""
    from harness.core.options import cluster_option

    if kind == "valkey":
        return True
    return kind == "zookeeper" and cluster_option(options or {}, "zk_clock") == "faketime"


def persists(kind: str | None, options: Mapping[str, Any] | None = None) -> bool:
    """Whether a kind's servers keep their data across a restart."""
    from harness.core.options import cluster_option

    if kind != "valkey":
        return True
    try:
        return bool(cluster_option(options or {}, "appendonly"))
    except Exception:
        return False


def service_facts(kind: str, count: int, options: Mapping[str, Any] | None = None,
                  ttl_ms: float | None = None, traits: Mapping[str, bool] | None = None) -> dict:
    """The server facts of a lock service of `count` `kind` servers, as the runner records them.
    `traits` are the kind's own word on clock_expiry, persists and sessions (the runner has
    the kind itself: harness/cluster/kinds.py recorded_facts), so a kind this module has never
    heard of is recorded right; without them (a stored run) the built-in kinds' are derived.
    The session timeout: the session_timeout_ms option; etcd's lease of ceil(TTL) s."""
    t = traits or {}
    session = (options or {}).get("session_timeout_ms")
    if kind == "etcd" and isinstance(ttl_ms, (int, float)):
        session = -(-ttl_ms // 1000) * 1000.0
    sessions = t.get("sessions", kind in SESSIONS)
    return {"kind": kind, "servers": int(count), "clock_expiry": t.get("clock_expiry", clock_expiry(kind, options)),
            "persists": t.get("persists", persists(kind, options)),
            "session_timeout_ms": session if sessions and isinstance(session, (int, float)) else None}


@dataclass(frozen=True, slots=True, kw_only=True)
class Service:
    """What a checker knows about the lock service. kind None: nothing (a foreign history)."""

    kind: str | None = None
    servers: int = 0
    clock_expiry: bool | None = None
    persists: bool | None = None
    session_timeout_ms: float | None = None
    release_checks_owner: bool | None = None
    validity: str | None = None  # VALIDITY when the run's clients counted it from the grant
    recorded: bool = False  # from the run's facts, not derived afterwards

    @property
    def known(self) -> bool:
        return self.kind is not None


def service_of(spec: Any) -> Service:
    """The lock service's facts: recorded ones first, else derived from the spec (pure)."""
    facts = getattr(spec, "facts", None) or {}
    options = getattr(spec, "options", None) or {}
    if isinstance(facts, Mapping) and isinstance(facts.get("kind"), str):
        try:
            return Service(kind=facts["kind"], servers=int(facts.get("servers") or 0),
                           clock_expiry=facts.get("clock_expiry"), persists=facts.get("persists"),
                           session_timeout_ms=facts.get("session_timeout_ms"), recorded=True, **_client_facts(facts))
        except (TypeError, ValueError):
            pass
    found = BUILTIN_SERVICE.get(getattr(spec, "backend", None) or "")
    if found is None:
        return Service()
    d = service_facts(*found, options, getattr(spec, "ttl_ms", None))
    return Service(kind=d["kind"], servers=d["servers"], clock_expiry=d["clock_expiry"], persists=d["persists"],
                   session_timeout_ms=d["session_timeout_ms"], **_client_facts(facts if isinstance(facts, Mapping) else {}))


def _client_facts(facts: Mapping[str, Any]) -> dict:
    """What the run recorded about its client (release_checks_owner, validity), typed or None."""
    owner, validity = facts.get("release_checks_owner"), facts.get("validity")
    return {"release_checks_owner": owner if isinstance(owner, bool) else None,
            "validity": validity if isinstance(validity, str) else None}
