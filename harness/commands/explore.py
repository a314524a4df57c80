"""`chaos explore`: bisect the smallest fault that breaks mutual exclusion.

For `--fault pause-holder` the varied quantity is the pause length, for `--fault
clock-skew` the size of the clock jump; both are expressed as a multiple of the TTL.
Each probe is a real run with a fixed seed; a probe "breaks" when the mutex checker
finds at least one overlap. Faults are random in where they land, so a single seed can
miss a break that exists: the boundary reported is an upper bound for that seed, and
`--seeds` probes each point with several seeds (any break counts). A probe that found no
overlap but whose verdict is unknown (a checker gave up, no critical section completed)
proves neither: the search stops there and exits 2. Ctrl-C or SIGTERM stops it after the
probe in hand and exits 130 or 143 (harness/commands/cli.py main says INTERRUPTED).
"""

from __future__ import annotations

from typing import Callable

import click

from harness.commands.cliargs import Seconds, check_writable_dir
from harness.core.contracts.checker import UNKNOWN, parse_valid
from harness.core.errors import EXIT_UNKNOWN, BadArgument

FAULTS = {"pause-holder": "pause_multiple", "clock-skew": "clock_jump"}


class Undecided(Exception):
    """A probe whose run found no overlap but did not prove there was none either (its verdict
    is unknown): it neither breaks nor holds, so no boundary can be stated from it."""


def probe(backend: str, fault: str, x: float, seeds: int, time_limit: float, store: str, ttl_ms: int) -> tuple[bool, int]:
    from harness.engine.runner import run
    from harness.core.spec import TestSpec

    total = 0
    # The pause must fit in the fault phase: it starts ~1.5 s in and the last 3 s recover.
    time_limit = max(time_limit, x * ttl_ms / 1000 + 8)
    for seed in range(1, seeds + 1):
        options = {"pause_multiple": str(x)} if fault == "pause-holder" else {"clock_jump_jitter": "0"}
        spec = TestSpec(backend=backend, nemesis=(fault,), seed=seed, time_limit=time_limit, store=store,
                        ttl_ms=ttl_ms, options=options,
                        clock_jump_s=x * ttl_ms / 1000 if fault == "clock-skew" else None,
                        command=f"chaos explore --backend {backend} --fault {fault}")
        out = run(spec, progress=False)
        if out.interrupted:  # Ctrl-C ends the search, after this probe's teardown
            raise KeyboardInterrupt
        v = out.summary.get("violations") or 0
        if not v and parse_valid(out.summary.get("valid")) == UNKNOWN:  # no overlap found, and none ruled out
            raise Undecided(f"seed {seed} decided nothing ({out.summary.get('unknown_reason') or 'its verdict is UNKNOWN'}; "
                            f"run dir {out.run_dir})")
        total += v
        if v:
            return True, total
    return False, total


def bisect_boundary(breaks: Callable[[float], bool], lo: float, hi: float, steps: int) -> tuple[str, float, float]:
    """Probe hi, then lo, then bisect `steps` times. Returns ("never", lo, hi) when even hi
    holds, ("below", lo, hi) when lo already breaks, else ("between", held, broke): the
    largest multiple that held and the smallest that broke."""
    if not breaks(hi):
        return "never", lo, hi
    if breaks(lo):
        return "below", lo, hi
    for _ in range(steps):
        mid = round((lo + hi) / 2, 4)
        lo, hi = (lo, mid) if breaks(mid) else (mid, hi)
    return "between", lo, hi


@click.command()
@click.option("--backend", "-b", required=True)
@click.option("--fault", type=click.Choice(sorted(FAULTS)), default="pause-holder", show_default=True)
@click.option("--vary", type=click.Choice(["duration"]), default="duration", show_default=True,
              help="what is varied: the pause length or the jump size")
@click.option("--lo", type=Seconds(0, 100, open_lo=True), default=0.25, show_default=True, help="smallest multiple of the TTL")
@click.option("--hi", type=Seconds(0, 100, open_lo=True), default=4.0, show_default=True, help="largest multiple of the TTL")
@click.option("--steps", type=int, default=5, show_default=True, help="bisection steps after the two ends")
@click.option("--seeds", type=int, default=1, show_default=True, help="seeds per probe (any break counts)")
@click.option("--ttl", "ttl_ms", type=int, default=2000, show_default=True)
@click.option("--time-limit", type=Seconds(2, 3600), default=15.0, show_default=True, help="seconds per probe")
@click.option("--store", default="store", show_default=True)
def explore(backend, fault, vary, lo, hi, steps, seeds, ttl_ms, time_limit, store):
    """Bisect the smallest fault, relative to the TTL, that breaks mutual exclusion."""
    from harness.core import plugins

    plugins.backend_class(backend)
    check_writable_dir(store, "--store")
    if not 0 < lo < hi:
        raise BadArgument(f"--lo ({lo}) must be positive and below --hi ({hi})")
    if not 0 <= steps <= 20 or not 1 <= seeds <= 20 or not 100 <= ttl_ms <= 600_000:
        raise BadArgument("--steps must be 0..20, --seeds 1..20 and --ttl 100..600000 ms")

    def breaks(x: float) -> bool:
        try:
            b, v = probe(backend, fault, x, seeds, time_limit, store, ttl_ms)
        except Undecided as e:
            print(f"  {fault} {x:.3f} x TTL ({x * ttl_ms / 1000:.2f} s): UNKNOWN: {e}")
            raise
        print(f"  {fault} {x:.3f} x TTL ({x * ttl_ms / 1000:.2f} s): {'BREAKS' if b else 'holds'} ({v} violations)")
        return b

    print(f"explore {backend} under {fault}, {lo}..{hi} x TTL ({ttl_ms} ms)")
    try:
        kind, lo, hi = bisect_boundary(breaks, lo, hi, steps)
    except Undecided:
        print("no boundary stated: a probe could not be decided (exit code 2); see its run dir")
        return EXIT_UNKNOWN
    if kind == "never":
        print(f"no break even at {hi} x TTL: mutual exclusion held at every probe")
    elif kind == "below":
        print(f"breaks already at {lo} x TTL: the boundary is at or below it")
    else:
        print(f"boundary: mutual exclusion breaks from about {hi:.3f} x TTL ({hi * ttl_ms / 1000:.2f} s); "
              f"it held at {lo:.3f} x TTL")
    return 0
