"""kill-holder `-o during=acquire`: where a kill inside an acquire is aimed, and when it lands.

`-o when=held` (the default): at an ok acquire (someone holds now) another worker, chosen by
the seed, is armed to wait at its next acquire invoke: a waiter, killed while its request
waits behind the holder. `-o when=free`: the holder itself is armed at its ok acquire, so it
waits at its next acquire invoke, right after its release; that acquire is aimed at only if no
worker holds the lock then (the holding flags; with valkey
servers also the key read back, which must be absent), else the worker goes on and the next holder is
armed. A design that takes the key and sets its expiry in two round trips leaves an immortal
key when its acquirer dies between them.

The kill lands `after_ms` after the worker is let go (it notices within 0.5 ms and its request
leaves): a moment drawn by
the seed from `-o at_ms=A-B` (default: 50 ms when held, 0-5 ms when free, where an acquire
takes a round trip or two), recorded in the op's value so a replay kills at the same moment.
A stop that finds the acquire already answered is a miss ("missed: ..."). With valkey
servers the lock key is read back before the worker goes, at the kill and SETTLE_S later
(nemesis/readback.py): `server_state_before`, `server_state_at_kill` and `server_state` ("n1:
key present (no expiry)" there is the immortal key).
"""

from __future__ import annotations

import random
import re
from typing import Any

from harness.core.errors import BadArgument
from harness.core.options import Option

HEAD_START_S = 0.05  # when=held without at_ms: how long a waiter runs before the stop (its request leaves)
FREE_AT_MS = (0.0, 5.0)  # when=free without at_ms
MAX_AT_MS = 60_000.0
# The key is read back again this long after the kill: a live client's acquire in flight then
# (its SET landed, its EXPIRE not yet) has finished, so a key still without expiry is the dead one's.
SETTLE_S = 0.2
_RANGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(?:-\s*(\d+(?:\.\d+)?))?\s*$")

OPTIONS = (Option(name="when", type=str, default="held", choices=("held", "free"),
                  help="with during=acquire: kill a waiter while another process holds (held), or the next acquirer "
                       "of a free lock, between the round trips of its acquire (free)"),
           Option(name="at_ms", type=str, default=None,
                  help="with during=acquire: when the kill lands after the acquire request left, a range A-B in ms "
                       "(the moment drawn by the seed) or one number; default 50 (when=held), 0-5 (when=free)"))


def parse_at_ms(raw: str) -> tuple[float, float] | None:
    """(A, B) of `-o at_ms=A-B` (or of one number, A-A); None when not given; BadArgument
    (one sentence) for anything else."""
    if raw is None or str(raw).strip() == "":
        return None
    m = _RANGE.match(str(raw))
    lo, hi = (float(m.group(1)), float(m.group(2) or m.group(1))) if m else (None, None)
    if lo is None or not lo <= hi <= MAX_AT_MS:
        raise BadArgument(f"-o at_ms={raw}: give a range in ms, A-B with A <= B <= {MAX_AT_MS:g} (e.g. 0-20), "
                          f"or one number")
    return lo, hi


def refusal(name: str, spec: Any, v: dict) -> str | None:
    """Why during/when/at_ms/after_renews cannot go together in this run (None: they can)."""
    try:
        parse_at_ms(v["at_ms"])
    except BadArgument as e:
        return str(e)
    if v["during"] != "acquire":
        for opt, default in (("when", "held"), ("at_ms", None)):
            if v[opt] != default:
                return f"{name} -o {opt}={v[opt]} aims inside an acquire: add -o during=acquire, or drop -o {opt}"
        return None
    if v["after_renews"] is not None:
        who = "a waiter" if v["when"] == "held" else "an acquirer"
        return f"{name} -o during=acquire kills {who}, which has renewed nothing: drop -o after_renews"
    if v["when"] == "held" and spec.concurrency < 2:
        return (f"{name} -o during=acquire needs a waiter and a holder: use --concurrency 2 or more "
                f"(this run has {spec.concurrency}), or -o when=free")
    return None


def moment_ms(when: str, at: tuple[float, float] | None, rng: random.Random) -> float | None:
    """The seeded moment of the next kill after the request left, in ms (None: HEAD_START_S,
    today's fixed head start, which is not recorded)."""
    if at is None:
        if when == "held":
            return None
        at = FREE_AT_MS
    return round(rng.uniform(*at), 3)


def free_now(workers: Any, n: int, but: int) -> bool:
    """No worker but `but` holds a lock now (their own flags)."""
    return not any(workers.holding_lock(j) for j in range(n) if j != but)
