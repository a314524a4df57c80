"""Builds the golden histories of liveness and outlived under faults (issue 37), with the
project's own fault schedule (harness/engine/generator.plan: quiet 2.25-3.75 s, a fault held
2.25-3.75 s, at the default interval of 3 s). Run it from the repository root to write them
again: `python3 tests/golden/liveness/make_faulted.py`. TTL 2 s, acquire timeout 2 s (bound 9 s).

- stuck-under-periodic-faults-bad: a holder whose key has no TTL (tests/clients/liar.py
  no-ttl; it reports its validity as usual) is killed at 5 s; the lock is never granted again
  for 55 s while waiters ask all along, and a slow link is faulted every ~3 s. It was VALID:
  no fault-free stretch was longer than 9 s, and outlived said "unknown".
- faulted-periodic-ok: the same schedule; the key expires with its dead holder (granted again at
  6.1 s); afterwards the lock is free and asked for only during each slow link and 0.5 s after
  its heal, and once from 3 s before a fault to 2 s after its heal (5 s outside it): not stuck.
- stuck-across-a-fault-bad: released at 1 s; acquires fail 5 s, under a 2 s partition, and 5.5 s
  after its heal: 10.5 s outside the fault in all (it was judged as two stretches, each short).
- outlived-near-fault-bad: a holder killed at 1.5 s (valid to 3 s); a server paused from 3 s to
  4 s; granted again at 12 s: 9.5 s no fault explains, past lease + margin (7 s). It was
  "unknown": any other fault before the next grant blurred the death.
- outlived-faulted-ok: the same death; a partition from 2.1 s to 9 s; granted again at 10 s: the
  partition could explain all of the wait past the bound, so outlived is "unknown" for it,
  which (partial) leaves the verdict to the rest.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from harness.core.contracts.nemesis import Fault  # noqa: E402
from harness.engine.generator import plan  # noqa: E402

S = 1_000_000_000
HERE = Path(__file__).resolve().parent
TTL = 2 * S
SLOW = {"between": "clients", "shape": "delay 100 ms"}


class SlowLink:
    """The slow-link nemesis's schedule, without its cluster: what plan() asks of a nemesis."""

    def next_fault(self, rng: random.Random) -> Fault:
        return Fault(start=("slow-link", SLOW), stop=("fast-link", None))

    def heal_ops(self):
        return [("fast-link", None)]


def schedule(seed: int = 3, fault_phase: float = 57.0) -> list[tuple[int, int]]:
    ops = plan(SlowLink(), seed, fault_phase, 3.0)
    starts = [p.at for p in ops if p.f == "slow-link"]
    heals = [p.at for p in ops if p.f == "fast-link"]
    return [(int(a * S), int(min(h for h in heals if h >= a) * S)) for a in starts]


class History:
    def __init__(self):
        self.ops: list[dict] = []

    def op(self, t: int, p, type_: str, f: str, **kw) -> None:
        self.ops.append({"time_ns": t, "process": p, "type": type_, "f": f, **kw})

    def fault(self, a: int, b: int) -> None:
        self.op(a, "nemesis", "invoke", "slow-link", value=SLOW)
        self.op(a + 50_000_000, "nemesis", "ok", "slow-link", value=SLOW)
        self.op(b, "nemesis", "invoke", "fast-link")
        self.op(b + 50_000_000, "nemesis", "ok", "fast-link")

    def hold(self, p, t: int, until: int, value: int | None = None) -> None:
        """p is granted at t (invoked 1 ms before), writes `value`, releases ok at `until`."""
        self.op(t - S // 1000, p, "invoke", "acquire", key="lock")
        self.op(t, p, "ok", "acquire", key="lock", value=f"v{p}-{t}", valid_until_ns=t + TTL)
        if value is not None:
            self.op(t + S // 100, p, "invoke", "write", key="lock:counter", value=value)
            self.op(t + 2 * S // 100, p, "ok", "write", key="lock:counter", value=value)
        self.op(until, p, "invoke", "release", key="lock")
        self.op(until + S // 1000, p, "ok", "release", key="lock")

    def asking(self, p, lo: int, hi: int) -> None:
        """p's acquires fail from lo to hi (each timing out after 2 s, then 10 ms of back-off)."""
        t = lo
        while t < hi:
            done = min(t + 2 * S, hi)
            self.op(t, p, "invoke", "acquire", key="lock")
            self.op(done, p, "fail", "acquire", key="lock", error="timed out")
            t = done + S // 100

    def kill(self, p, t: int, respawned) -> None:
        self.op(t - S // 100, "nemesis", "invoke", "kill-holder", value={"process": p, "worker": 0})
        self.op(t, "nemesis", "ok", "kill-holder", value={"process": p, "worker": 0})
        self.op(t, p, "invoke", "release", key="lock")
        self.op(t + 1, p, "info", "release", key="lock", error="killed: the process was SIGKILLed holding the lock")
        self.op(t + S // 2, "nemesis", "invoke", "respawn-holder", value={"worker": 0})
        self.op(t + S // 2 + S // 100, "nemesis", "ok", "respawn-holder", value={"worker": 0, "process": respawned})

    def final(self, t: int, value: int) -> None:
        self.op(t, "final", "invoke", "read", key="lock:counter")
        self.op(t + S // 1000, "final", "ok", "read", key="lock:counter", value=value)

    def write(self, name: str) -> None:
        ops = sorted(self.ops, key=lambda o: (o["time_ns"], str(o["process"])))
        with open(HERE / f"{name}.jsonl", "w") as f:
            for i, o in enumerate(ops):
                f.write(json.dumps({"index": i, **o}) + "\n")


def stuck_under_periodic_faults() -> None:
    h = History()
    h.hold(1, S // 10, S)
    h.hold(2, S + S // 10, 2 * S, value=1)
    h.op(4 * S - S // 1000, 0, "invoke", "acquire", key="lock")  # the holder whose key has no TTL
    h.op(4 * S, 0, "ok", "acquire", key="lock", value="v0", valid_until_ns=4 * S + TTL)
    h.op(4 * S + S // 100, 0, "invoke", "write", key="lock:counter", value=2)
    h.op(4 * S + 2 * S // 100, 0, "ok", "write", key="lock:counter", value=2)
    h.kill(0, 5 * S, respawned=5)
    h.asking(1, 2 * S + S // 10, 60 * S)
    h.asking(2, 3 * S, 60 * S)
    h.asking(5, 5 * S + S // 2 + S // 50, 60 * S)
    for a, b in schedule():
        h.fault(a, b)
    h.final(60 * S + S // 10, 2)
    h.write("stuck-under-periodic-faults-bad")


def faulted_periodic() -> None:
    h = History()
    faults = schedule()
    h.hold(1, S // 10, S)
    h.hold(2, S + S // 10, 2 * S, value=1)
    h.op(4 * S - S // 1000, 0, "invoke", "acquire", key="lock")
    h.op(4 * S, 0, "ok", "acquire", key="lock", value="v0", valid_until_ns=4 * S + TTL)
    h.kill(0, 5 * S, respawned=5)
    h.asking(1, 5 * S, 6 * S + S // 10 - 5 * S // 1000)
    writes, free = 1, []  # (from, to): the lock free and asked for
    # the key expired with its lease: granted again at 6.1 s; then held back to back outside
    # faults, free (and asked for) during each fault and 0.5 s after its heal; before the
    # third fault, free from 3 s before it
    t = 6 * S + S // 10
    later = [(a, b) for a, b in faults if a > t + 4 * S]
    for k, (a, b) in enumerate(later):
        start_free = a - 3 * S if k == 2 else a
        p = 1
        while t + S // 2 <= start_free:
            writes += 1
            h.hold(p, t, t + S // 2, value=writes)
            t += S // 2 + 2 * S // 1000
            p = 2 if p == 1 else 1
        end_free = b + (2 * S if k == 2 else S // 2)
        free.append((max(t, start_free), end_free))
        t = end_free
    for lo, hi in free:
        h.asking(5, lo, hi - 5 * S // 1000)
    writes += 1
    h.hold(2, t, t + S // 2, value=writes)
    for a, b in faults:
        h.fault(a, b)
    h.final(t + S, writes)
    h.write("faulted-periodic-ok")


def stuck_across_a_fault() -> None:
    h = History()
    h.hold(0, S // 10, S, value=1)
    h.asking(1, S + S // 100, 6 * S)
    h.op(6 * S, "nemesis", "invoke", "partition", value={"shape": "halves"})
    h.op(6 * S + S // 100, "nemesis", "ok", "partition", value={"shape": "halves"})
    h.asking(1, 6 * S + S // 50, 8 * S)
    h.op(8 * S, "nemesis", "invoke", "heal")
    h.op(8 * S + S // 100, "nemesis", "ok", "heal")
    h.asking(1, 8 * S + S // 50, 13 * S + S // 2)
    h.final(13 * S + S // 2 + S // 100, 1)
    h.write("stuck-across-a-fault-bad")


def outlived_near(name: str, fault: tuple[str, str, int, int], grant_at: int) -> None:
    """A holder renewed to 3 s is killed at 1.5 s; another fault from `fault`; granted again at grant_at."""
    h = History()
    h.op(0, 0, "invoke", "acquire", key="lock")
    h.op(S // 1000, 0, "ok", "acquire", key="lock", value="v0", valid_until_ns=2 * S)
    h.op(S, 0, "invoke", "renew", key="lock")
    h.op(S + S // 100, 0, "ok", "renew", key="lock", valid_until_ns=3 * S)
    h.kill(0, 3 * S // 2, respawned=3)
    f, heal, a, b = fault
    h.op(a, "nemesis", "invoke", f, value={"nodes": ["n1"]})
    h.op(a + S // 100, "nemesis", "ok", f, value={"nodes": ["n1"]})
    h.op(b, "nemesis", "invoke", heal, value={"nodes": ["n1"]})
    h.op(b + S // 100, "nemesis", "ok", heal, value={"nodes": ["n1"]})
    h.asking(1, S // 2, grant_at - 5 * S // 1000)
    h.hold(1, grant_at, grant_at + S // 2, value=1)
    h.final(grant_at + S, 1)
    h.write(name)


if __name__ == "__main__":
    stuck_under_periodic_faults()
    faulted_periodic()
    stuck_across_a_fault()
    # a server paused 1 s of a 10.5 s wait: 9.5 s of it no fault explains (bound 7 s)
    outlived_near("outlived-near-fault-bad", ("pause", "resume", 3 * S, 4 * S), 12 * S)
    # a partition of 7 s of an 8.5 s wait: it could explain all that went past the bound
    outlived_near("outlived-faulted-ok", ("partition", "heal", 2 * S + S // 10, 9 * S), 10 * S)
