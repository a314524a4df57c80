"""The articles' comparison table, as claims, and how a measurement is held against each.

Sources (shared/seeds/): the "横向对比" table (consistency, single-acquire latency, GC
tolerance, clock dependence, reentrancy, fairness, split brain, typical TPS) and the
flash-sale table (P99 acquire, conflict rate). The articles give one column "Redis
Redlock" for the first table and separate SET NX / Redlock rows for the second; here the
first table's Redis column is held against both Redis designs, except TPS, which it
claims for a single node (so: redis only).

Each row's rule says when a measurement *confirms* a claim; otherwise it *refutes* it, or
is *inconclusive* when the run cannot tell (a rate of 1 in 10,000 needs far more than
10,000 acquires to show). Absolute numbers hold only on the machine that measured them;
the page says which, and compares the backends as ratios too.

A performance row (throughput) measures our driver as much as the service: a Python
client process per lock client saturates 2 cores long before valkey does (issue 30). Such a
row names its *yardstick*, the same figure from the service's own load tool on the same
kind of servers in the same run (yardstick.py). Its claim is judged only when our figure is
within YARDSTICK_FACTOR of the yardstick's; below that it is "inconclusive (driver-bound)",
and with no yardstick measured it is inconclusive: nothing says who set the ceiling.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

CONFIRMED, REFUTED, INCONCLUSIVE, NOT_CLAIMED = "confirmed", "refuted", "inconclusive", "not claimed"
DRIVER_BOUND = "inconclusive (driver-bound)"  # our figure is far below the service's own tool's: it measures us
P99_FACTOR = 2.0  # a measured P99 within this factor of the claimed one confirms it
YARDSTICK_FACTOR = 2.0  # a performance figure judges a claim only within this factor of the yardstick's


@dataclass(frozen=True)
class Row:
    id: str  # the metric the row shows (battery.Measured.values)
    label: str
    unit: str
    claims: dict[str, Any]  # backend -> the articles' claim (absent: not claimed)
    judge: Callable[[Any, Any, dict], str] | None  # (measured, claim, all medians of the backend) -> verdict
    claim_text: Callable[[Any], str] = str
    yardstick: str | None = None  # the metric of the service's own tool for the same figure (a performance row)


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def in_range(v: Any, claim: tuple, _: dict) -> str:
    lo, hi = claim
    if not _num(v):
        return INCONCLUSIVE
    return CONFIRMED if v >= lo and (hi is None or v <= hi) else REFUTED


def near(v: Any, claim: float, _: dict) -> str:
    if not _num(v):
        return INCONCLUSIVE
    return CONFIRMED if claim / P99_FACTOR <= v <= claim * P99_FACTOR else REFUTED


def conflict_rate(v: Any, claim: float, m: dict) -> str:
    """Violations per 10k acquires, fault-free under contention. A claim of 0 is confirmed by
    0; a claim above 0 is refuted by a higher rate, and inconclusive at 0 unless the run
    had enough acquires (30,000 per claimed 1 in 10,000) to show it."""
    if not _num(v):
        return INCONCLUSIVE
    if claim == 0:
        return CONFIRMED if v == 0 else REFUTED
    if v > 3 * claim:
        return REFUTED
    return CONFIRMED if v > 0 else INCONCLUSIVE


def gc(v: Any, claim: str, _: dict) -> str:
    """"none": a pause a little past the TTL breaks it (boundary at most 2 x TTL);
    "tolerates": it still holds at 2 x TTL."""
    if v is None:
        return INCONCLUSIVE
    broke_by_2 = (isinstance(v, str) and v.startswith("<")) or (_num(v) and v <= 2.0) or v is True
    return CONFIRMED if broke_by_2 == (claim == "none") else REFUTED


def clock(v: Any, claim: str, m: dict) -> str:
    server, client = m.get("server_clock_violations"), m.get("client_clock_violations")
    if server is None and client is None:
        return INCONCLUSIVE
    broke = bool(server) or bool(client)
    return CONFIRMED if broke == (claim != "none") else REFUTED


def fairness(v: Any, claim: str, _: dict) -> str:
    if not _num(v):
        return INCONCLUSIVE
    fair = v <= 0.01
    return CONFIRMED if fair == (claim == "fair") else REFUTED


def reentrancy(v: Any, claim: str, _: dict) -> str:
    if v in (None, "unknown", "mixed"):
        return INCONCLUSIVE
    return CONFIRMED if (v == "succeeds") == (claim == "native") else REFUTED


def split_brain(v: Any, claim: str, m: dict) -> str:
    """What the majority side could do while the holder was cut off from most servers:
    "may lose": the lock moved (or two held it); "minority releases": the lock moved to the
    majority side; "blocks": nobody got it until the heal."""
    moved = m.get("split_majority_grants")
    if not m.get("split_cuts") or moved is None:
        return INCONCLUSIVE
    if claim == "blocks":
        return CONFIRMED if moved == 0 else REFUTED
    return CONFIRMED if moved > 0 or m.get("split_violations") else REFUTED


R, RL, E, Z = "redis", "redlock", "etcd", "zookeeper"
ROWS = (
    Row("acquire_p50_ms", "acquire latency p50, 1 client", "ms",
        {R: (0.5, 5), RL: (0.5, 5), Z: (3, 15), E: (3, 10)}, in_range, lambda c: f"{c[0]:g}-{c[1]:g} ms"),
    Row("acquire_p99_ms", "acquire latency p99, 1 client", "ms", {}, None),
    Row("cycle_p50_ms", "acquire + release p50, 1 client", "ms", {}, None),
    Row("cycle_p99_ms", "acquire + release p99, 1 client", "ms", {}, None),
    Row("throughput", "throughput, best over the client counts (cycles/s)", "/s",
        {R: (50_000, None), Z: (8_000, 12_000), E: (10_000, 30_000)}, in_range,
        lambda c: f"{c[0]:,}+ /s" if c[1] is None else f"{c[0]:,}-{c[1]:,} /s", yardstick="yardstick_cycles_per_s"),
    Row("yardstick_cycles_per_s", "throughput by the service's own load tool (yardstick, cycles/s)", "/s", {}, None),
    Row("knee_clients", "clients where throughput saturates (90 % of best)", "", {}, None),
    Row("contended_p99_ms", "P99 acquire, contended (flash sale)", "ms", {R: 2, RL: 8, E: 12, Z: 18}, near,
        lambda c: f"{c:g} ms"),
    Row("conflicts_per_10k_none", "conflicts per 10k acquires, contended, no fault", "",
        {R: 1.0, RL: 3.0, E: 0, Z: 0}, conflict_rate, lambda c: f"{c / 100:g} %"),
    Row("conflicts_per_10k_pause-holder", "conflicts per 10k acquires: holder paused 2 x TTL", "", {}, None),
    Row("conflicts_per_10k_clock-skew", "conflicts per 10k acquires: server clock jumps", "", {}, None),
    Row("conflicts_per_10k_partition", "conflicts per 10k acquires: partitions", "", {}, None),
    Row("conflicts_per_10k_kill", "conflicts per 10k acquires: servers killed", "", {}, None),
    Row("stale_rejected", "with fencing: stale writes rejected", "", {}, None),
    Row("stale_accepted", "with fencing: stale writes accepted", "", {}, None),
    Row("gc_boundary", "GC tolerance: pause that breaks it (x TTL)", "x TTL",
        {R: "none", RL: "none", Z: "none", E: "tolerates"}, gc,
        lambda c: "none (lost at TTL)" if c == "none" else "tolerates short pauses (renewal)"),
    Row("server_clock_violations", "clock: violations under server clock jumps", "",
        {R: "depends", RL: "depends", Z: "none", E: "none"}, clock,
        lambda c: "depends on clocks" if c == "depends" else "no clock dependence"),
    Row("client_clock_violations", "clock: violations under client clock skew", "", {}, None),
    Row("split_majority_grants", "split brain: grants on the majority side while the holder is cut", "",
        {R: "may lose", RL: "may lose", Z: "minority releases", E: "blocks"}, split_brain,
        lambda c: {"may lose": "may lose the lock", "minority releases": "minority side releases the lock",
                   "blocks": "blocks until healed"}[c]),
    Row("split_minority_grants", "split brain: grants to the cut holder's side", "", {}, None),
    Row("overtake_share", "fairness: share of grants that overtook an earlier waiter", "",
        {R: "unfair", RL: "unfair", Z: "fair", E: "fair"}, fairness,
        lambda c: "not fair" if c == "unfair" else "fair (FIFO)"),
    Row("worst_overtake", "fairness: most waiters one grant overtook", "", {}, None),
    Row("reentrancy_design", "reentrancy: the design as built here", "",
        {R: "extra", RL: "extra", Z: "native", E: "native"}, reentrancy,
        lambda c: "needs extra work" if c == "extra" else "native"),
    Row("reentrancy_library", "reentrancy: the shipped library", "", {}, None),
    Row("requests_per_grant", "herd: server requests per grant, contended", "", {}, None),
    Row("requests_per_grant_tight", "herd: the same with a tight poll (2 ms, no backoff)", "", {}, None),
)


def yardstick_ratio(row: Row, value: Any, medians: dict, digits: int | None = 3) -> float | None:
    """Our figure over the yardstick's, for a performance row with both measured (rounded
    for the pages; the verdict takes it whole)."""
    ys = medians.get(row.yardstick) if row.yardstick else None
    if not (_num(value) and _num(ys) and ys > 0):
        return None
    return value / ys if digits is None else round(value / ys, digits)


def verdict(row: Row, backend: str, value: Any, medians: dict) -> tuple[str, str]:
    """(claim text, verdict) of one cell. A performance row's claim is judged only when our
    figure is within YARDSTICK_FACTOR of its yardstick's (see the module docstring)."""
    if backend not in row.claims or row.judge is None:
        return "", NOT_CLAIMED
    claim = row.claims[backend]
    if row.yardstick is not None and _num(value):
        ratio = yardstick_ratio(row, value, medians, digits=None)
        if ratio is None:
            return row.claim_text(claim), INCONCLUSIVE
        if ratio < 1 / YARDSTICK_FACTOR:
            return row.claim_text(claim), DRIVER_BOUND
    return row.claim_text(claim), row.judge(value, claim, medians)
