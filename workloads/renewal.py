"""What a client believes about the leases it holds, and the thread that renews them.

A watchdog (Redis) or a keepalive (etcd) renews a lease every `interval` while its holder
works. Each success moves the client's validity forward; an answer that the lease is gone
marks it lost at once; errors are retried at the next tick and mark it lost only once the
validity has passed without a success. `still_held()` is the worker's view: False once
lost or past validity. A renewal must never be swallowed: a lost lease is surfaced here.

What renewal cannot do: a paused (SIGSTOPped, GC'd) holder stops renewing without
knowing it, so `still_held()` checked before a pause says nothing about after it.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace
from typing import Callable

from harness.core.contracts.client import Lease


@dataclass(slots=True)
class Hold:
    valid_until_ns: int
    lost: str | None = None  # why the lease is known lost, or None
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None


class Renewals:
    """Holds keyed by the lease's unique value.

    `refresh()` (given to `hold`) performs one renewal and returns the new validity
    deadline (monotonic ns), or None when the server says the lease is gone; it raises
    when the outcome is unknown (a timeout, a dead node).
    """

    def __init__(self, *, what: str, gone: str, join_timeout: float):
        self.what = what  # "renewals", "keepalives": for the lost message
        self.gone = gone  # the message when the server says the lease is gone
        self.join_timeout = join_timeout
        self.holds: dict[str, Hold] = {}
        self.mu = threading.Lock()

    def hold(self, lease: Lease, interval_s: float | None, refresh: Callable[[], int | None]) -> None:
        """Remember the lease; with an interval, renew it in the background until unhold."""
        h = Hold(valid_until_ns=lease.valid_until_ns)
        with self.mu:
            self.holds[lease.value] = h
        if interval_s:
            h.thread = threading.Thread(target=self._loop, args=(h, interval_s, refresh),
                                        name=f"renew-{lease.value[:8]}", daemon=True)
            h.thread.start()

    def _loop(self, h: Hold, interval: float, refresh: Callable[[], int | None]) -> None:
        while not h.stop.wait(interval):
            try:
                valid = refresh()
            except Exception as e:
                if time.monotonic_ns() >= h.valid_until_ns:
                    h.lost = f"{self.what} failed until the lease expired: {type(e).__name__}: {e}"
                    return
                continue
            if h.stop.is_set():
                return  # released meanwhile: a "gone" now may be our own release
            if valid is None:
                h.lost = self.gone
                return
            h.valid_until_ns = valid

    def unhold(self, lease: Lease) -> None:
        with self.mu:
            h = self.holds.pop(lease.value, None)
        if h is not None:
            h.stop.set()
            if h.thread is not None and h.thread is not threading.current_thread():
                h.thread.join(self.join_timeout)

    def mark_lost(self, lease: Lease) -> None:
        h = self.holds.get(lease.value)
        if h is not None:
            h.lost = self.gone

    def extend(self, lease: Lease, valid_until_ns: int) -> Lease:
        h = self.holds.get(lease.value)
        if h is not None:
            h.valid_until_ns = max(h.valid_until_ns, valid_until_ns)
        return replace(lease, valid_until_ns=valid_until_ns)

    def current(self, lease: Lease) -> Lease:
        """The lease with the validity the client believes now (extended by renewals)."""
        h = self.holds.get(lease.value)
        return lease if h is None else replace(lease, valid_until_ns=h.valid_until_ns)

    def still_held(self, lease: Lease) -> bool:
        h = self.holds.get(lease.value)
        if h is None:
            return time.monotonic_ns() < lease.valid_until_ns
        return h.lost is None and time.monotonic_ns() < h.valid_until_ns

    def lost_reason(self, lease: Lease) -> str | None:
        h = self.holds.get(lease.value)
        return None if h is None else h.lost

    def close(self) -> None:
        with self.mu:
            holds, self.holds = list(self.holds.values()), {}
        for h in holds:
            h.stop.set()
