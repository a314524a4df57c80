"""The LockClient contract every backend implements, and the Lease it hands out.

One LockClient lives in one worker process. The harness calls `open(nodes)` once, then
repeatedly `acquire` -> critical section -> `release`, and `close()` at the end.

Outcomes are three-valued, as in the history: `acquire` returning a Lease is ok; raising
`NotAcquired` is fail (the lock was certainly not taken); any other exception is info
(it may have been taken). An implementation must not swallow errors into NotAcquired
when it cannot tell whether a server applied its write, and must not invent a fencing
token the design cannot guarantee to be monotonic (leave `token=None`).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

from harness.core.contracts.cluster import Node
from harness.core.errors import LockLost, NotAcquired
from harness.core.options import Option

__all__ = ["Clock", "Lease", "LockClient", "LockLost", "NotAcquired", "ReadsWallClock", "StillHeld",
           "recorded_validity", "unique_value"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Lease:
    key: str
    value: str  # unique per acquisition: the proof of ownership a release presents
    token: int | None = None  # fencing token; None where the design has no safe one
    acquired_ns: int  # host monotonic time at which acquire returned
    valid_until_ns: int  # monotonic deadline until which the client believes it holds the lock
    meta: Mapping[str, Any] = field(default_factory=dict)
    # False: the client said nothing of its validity; valid_until_ns is then only the harness's
    # own estimate to pace the holder's work, and the history records no validity (never a fact
    # the client did not state: fresh-leases is unknown for such a grant)
    reported: bool = True


def recorded_validity(lease: Lease) -> int | None:
    """The valid_until_ns a history records for a grant: the client's own, or None."""
    return lease.valid_until_ns if lease.reported else None


class Clock:
    """The wall clock a client reads. A nemesis may skew it, in-process.

    libfaketime breaks CPython's timed waits, so a Python worker's wall clock is skewed
    through this object instead: `time()` is the real wall clock plus an offset the
    runner writes into shared memory (`shared[index]`). Monotonic reads are deliberately
    untouched; a backend reaches the skew only where it reads `clock.time()`, and lists
    those reads in its `clock_reads` attribute so the report can say what was reached.
    """

    def __init__(self, shared=None, index: int = 0, reads=None):
        self.shared = shared
        self.index = index
        self.reads = reads  # where a client process's clock, read back, goes (external clients)

    @property
    def offset(self) -> float:
        return float(self.shared[self.index]) if self.shared is not None else 0.0

    def time(self) -> float:
        return time.time() + self.offset

    def report(self, measured_s: float) -> None:
        """Record the offset a client process says its own clock has (NaN: not read yet)."""
        if self.reads is not None:
            self.reads[self.index] = measured_s


@runtime_checkable
class LockClient(Protocol):
    """One worker's lock client. The class is constructed as `cls(options, clock)`:
    `options` the run's typed options (harness/core/options.py; declare what you read in
    `OPTIONS`), `clock` the wall clock a nemesis may skew (Clock), or None. It must not
    contact a server before `open`. `servers = (kind, count)` names the cluster it needs:
    kind one of harness.cluster.kinds.KINDS."""

    name: str
    has_fencing: bool  # whether leases carry a token safe for fencing
    servers: tuple[str, int]

    def __init__(self, options: Mapping[str, Any] | None, clock: Clock | None) -> None: ...

    def open(self, nodes: Sequence[Node]) -> None: ...

    def acquire(self, key: str, ttl_ms: int, timeout_s: float) -> Lease: ...

    def release(self, lease: Lease) -> bool:
        """True if this call released the lock; False if the lease was no longer held."""

    def renew(self, lease: Lease) -> Lease:
        """Extend the lease; raise LockLost if it is no longer held (`--renew` calls it)."""

    def close(self) -> None: ...


@runtime_checkable
class ChoosesServers(Protocol):
    """Optional, on the class: a client whose cluster depends on its options (an external
    client's `--servers`), instead of a fixed `servers`."""

    @classmethod
    def servers_for(cls, options: Mapping[str, Any]) -> tuple[str, int]: ...


@runtime_checkable
class StillHeld(Protocol):
    """Optional: the client's own belief that it still holds a lease (a watchdog whose
    renewal failed, a ZooKeeper session that was lost). The worker asks before the work
    and, on False, does no work and releases. A client without it has no opinion."""

    def still_held(self, lease: Lease) -> bool | None: ...  # None: no opinion after all


@runtime_checkable
class ReadsWallClock(Protocol):
    """Optional: which of the client's decisions read `clock.time()` (and so an in-process
    clock skew reaches), in words for the report; () when none does."""

    clock_reads: tuple[str, ...]


def node_timeout(default_ms: float) -> Option:
    return Option(name="node_timeout_ms", type=float, default=default_ms, above=0, max=60_000,
                  help="socket timeout of one call to one server, ms")


def retry_delay(default_ms: float = 50.0) -> Option:
    return Option(name="retry_delay_ms", type=float, default=default_ms, min=0, max=60_000,
                  help="pause between acquire attempts (jittered), ms")


DRIFT_FACTOR = Option(name="drift_factor", type=float, default=0.01, min=0, max=0.5,
                      help="share of the TTL assumed lost to clock drift when computing validity")


def unique_value() -> str:
    """A value no other acquisition will ever use (the articles: never a constant)."""
    return uuid.uuid4().hex

