"""chaos compare's pure parts: reading metrics from histories, holding them against the
articles' claims, and the three pages. The runs themselves are real (tests/integration)."""

from __future__ import annotations

import csv
import re

import pytest

from harness.commands.compare import summarize
from harness.commands.compare.battery import Measured, best_and_knee, cut_grants, cycles_per_s, latencies, median, spread
from harness.commands.compare.claims import (CONFIRMED, DRIVER_BOUND, INCONCLUSIVE, NOT_CLAIMED, REFUTED, ROWS,
                                             verdict)
from harness.commands.compare.page import table, write_csv, write_html, write_md
from harness.core.history import NEMESIS, Op

MS = 1_000_000


def ops(rows) -> list[Op]:
    return [Op(index=i, time_ns=int(ms * MS), process=p, type=t, f=f, value=v) for i, (ms, p, t, f, v) in enumerate(rows)]


def test_latencies_and_rate_come_from_the_history():
    h = ops([(0, 0, "invoke", "acquire", None), (2, 0, "ok", "acquire", None),
             (3, 0, "invoke", "release", None), (4, 0, "ok", "release", None),
             (10, 0, "invoke", "acquire", None), (11, 0, "ok", "acquire", None),
             (12, 0, "invoke", "release", None), (14, 0, "ok", "release", None),
             (20, 1, "invoke", "acquire", None), (25, 1, "fail", "acquire", None)])
    acquire, cycle = latencies(h)
    assert acquire == [2.0, 1.0] and cycle == [4.0, 4.0]
    assert cycles_per_s(h) == round(2 / 0.014, 1)


def test_cut_grants_split_the_holders_side_from_the_rest():
    h = ops([(0, NEMESIS, "invoke", "partition-client", {}), (1, NEMESIS, "ok", "partition-client", {"worker": 1}),
             (2, 6, "invoke", "acquire", None), (3, 6, "ok", "acquire", None),  # worker 1, a later process id
             (4, 2, "invoke", "acquire", None), (5, 2, "ok", "acquire", None),
             (6, NEMESIS, "invoke", "heal-client", None), (7, NEMESIS, "ok", "heal-client", None),
             (8, 3, "invoke", "acquire", None), (9, 3, "ok", "acquire", None)])
    assert cut_grants(h, workers=5) == {"cuts": 1, "minority_grants": 1, "majority_grants": 1}


def test_repetitions_give_a_median_a_spread_and_a_knee():
    assert median([3, 1, 2]) == 2 and median(["blocks", "blocks", "mixed"]) == "blocks" and median([None]) is None
    assert spread([1.0, 4.0, 2.0]) == (1.0, 4.0) and spread([1.0]) is None
    best, knee, sp = best_and_knee({1: [100.0, 110.0], 8: [900.0], 32: [1000.0]})
    assert best == 1000.0 and knee == 8 and sp is None


@pytest.mark.parametrize("row_id, backend, value, word", [
    ("acquire_p50_ms", "redis", 0.8, CONFIRMED), ("acquire_p50_ms", "etcd", 40.0, REFUTED),
    ("acquire_p99_ms", "redis", 1.0, NOT_CLAIMED),
    ("contended_p99_ms", "zookeeper", 30.0, CONFIRMED), ("contended_p99_ms", "redis", 162.0, REFUTED),
    ("throughput", "redis", 1585.0, INCONCLUSIVE),  # no yardstick measured: nothing says who set the ceiling
    ("throughput", "redlock", 900.0, NOT_CLAIMED),
    ("conflicts_per_10k_none", "etcd", 0, CONFIRMED), ("conflicts_per_10k_none", "redis", 0, INCONCLUSIVE),
    ("conflicts_per_10k_none", "redis", 50.0, REFUTED),
    ("gc_boundary", "redis", "<2", CONFIRMED), ("gc_boundary", "etcd", 1.25, REFUTED),
    ("gc_boundary", "etcd", ">4", CONFIRMED),
    ("overtake_share", "zookeeper", 0.0, CONFIRMED), ("overtake_share", "redis", 0.0, REFUTED),
    ("reentrancy_design", "etcd", "blocks", REFUTED), ("reentrancy_design", "redis", "blocks", CONFIRMED),
    ("reentrancy_design", "zookeeper", "mixed", INCONCLUSIVE),
])
def test_each_claim_has_its_rule(row_id, backend, value, word):
    row = next(r for r in ROWS if r.id == row_id)
    assert verdict(row, backend, value, {})[1] == word


# Recorded figures (benchmarks/ceiling.py, 2 cores, 2026-12-03): redis-benchmark drove the design's
# acquire and release scripts at 14,800 cycles/s; chaoslock recorded 1,124 in load mode and 558 with
# a process per client. The etcd and zookeeper pairs are made up around their claims.
@pytest.mark.parametrize("backend, ours, yardstick, word", [
    ("redis", 1124.0, 14800.0, DRIVER_BOUND),  # 0.08x: our driver's ceiling, not valkey's
    ("redis", 558.0, 14800.0, DRIVER_BOUND),
    ("redis", 7400.0, 14800.0, REFUTED),  # exactly half: judged, and below the claimed 50,000+
    ("redis", 7399.0, 14800.0, DRIVER_BOUND),
    ("redis", 52000.0, 60000.0, CONFIRMED),
    ("zookeeper", 9000.0, 11000.0, CONFIRMED),
    ("etcd", 4000.0, 6000.0, REFUTED),  # within 2x, and the service itself is below the claimed 10,000
    ("etcd", 4000.0, None, INCONCLUSIVE),  # no yardstick
])
def test_a_throughput_claim_is_judged_only_within_2x_of_the_yardstick(backend, ours, yardstick, word):
    row = next(r for r in ROWS if r.id == "throughput")
    assert verdict(row, backend, ours, {"yardstick_cycles_per_s": yardstick})[1] == word


def test_a_performance_cell_shows_ours_the_yardstick_and_the_ratio(tmp_path):
    m = Measured(backend="redis")
    m.curve = {1: [500.0], 32: [1124.0]}
    m.add("yardstick_cycles_per_s", 14800.0)
    cells = table({"redis": summarize(m)}, ["redis"])
    tput = next(c for c in cells if c["row"] == "throughput")
    assert (tput["value"], tput["yardstick"], tput["ratio"], tput["verdict"]) == (1124.0, 14800.0, 0.076, DRIVER_BOUND)
    write_md(tmp_path / "c.md", cells, ["redis"], {"plan": "quick", "when": "now", "machine": "m", "took_s": 1.0})
    md = (tmp_path / "c.md").read_text()
    assert "| 1,124 (yardstick 14,800, 0.08x) — claim 50,000+ /s: **inconclusive (driver-bound)** |" in md
    assert "1 of them driver-bound" in md
    write_csv(tmp_path / "c.csv", cells)
    row = next(r for r in csv.DictReader(open(tmp_path / "c.csv")) if r["row"] == "throughput")
    assert (row["yardstick"], row["ratio"]) == ("14800.0", "0.076")


def test_clock_and_split_brain_read_their_companion_metrics():
    clock = next(r for r in ROWS if r.id == "server_clock_violations")
    split = next(r for r in ROWS if r.id == "split_majority_grants")
    assert verdict(clock, "etcd", 0, {"server_clock_violations": 0, "client_clock_violations": 0})[1] == CONFIRMED
    assert verdict(clock, "redlock", 3, {"server_clock_violations": 3, "client_clock_violations": 0})[1] == CONFIRMED
    assert verdict(split, "etcd", 0, {"split_cuts": 2, "split_majority_grants": 0})[1] == CONFIRMED
    assert verdict(split, "zookeeper", 0, {"split_cuts": 2, "split_majority_grants": 0})[1] == REFUTED
    assert verdict(split, "redis", 0, {"split_cuts": 0, "split_majority_grants": 0})[1] == INCONCLUSIVE


def measured(backend: str, scale: float) -> Measured:
    m = Measured(backend=backend)
    for rep in range(3):
        m.add("acquire_p50_ms", scale * (1 + rep / 10), f"/runs/{backend}-lat-{rep}")
        m.add("contended_p99_ms", scale * 9)
        m.add("requests_per_grant", 3.0 if backend in ("etcd", "zookeeper") else 12.0)
        m.add("reentrancy_design", "blocks")
        for n in (1, 8):
            m.curve.setdefault(n, []).append(1000 / scale * n ** 0.5 + rep)
    m.add("gc_breaks_at_2ttl", True)
    return m


@pytest.fixture
def pages(tmp_path):
    backends = ["redis", "redlock", "etcd", "zookeeper"]
    got = {b: summarize(measured(b, s)) for b, s in zip(backends, (0.3, 1.0, 4.0, 6.0))}
    cells = table(got, backends)
    meta = {"plan": "quick", "when": "2026-12-02 06:00", "machine": "2 cores <b>", "notes": ["a <note>"], "took_s": 9.0}
    write_md(tmp_path / "compare.md", cells, backends, meta)
    write_csv(tmp_path / "compare.csv", cells)
    write_html(tmp_path / "compare.html", cells, backends, meta)
    return tmp_path, cells


def test_the_three_pages_hold_every_cell(pages):
    d, cells = pages
    assert len(cells) == len(ROWS) * 4
    rows = list(csv.DictReader(open(d / "compare.csv")))
    assert len(rows) == len(cells)
    lat = {r["backend"]: r for r in rows if r["row"] == "acquire_p50_ms"}
    assert lat["redis"]["verdict"] == REFUTED and float(lat["redis"]["value"]) == 0.33  # median of 0.3, 0.33, 0.36
    assert lat["etcd"]["verdict"] == CONFIRMED and lat["etcd"]["spread_min"] == "4.0"
    md = (d / "compare.md").read_text()
    assert "| acquire latency p50, 1 client | 0.33 (0.3–0.36) — claim 0.5-5 ms: **refuted** |" in md
    assert "2 cores <b>" in md
    assert "- acquire p50, 1 client (ms), as a multiple of redis: redlock 3.3x, etcd 13x, zookeeper 20x" in md
    page = (d / "compare.html").read_text()
    assert len(re.findall(r"<svg class='chart' data-row=", page)) == 4
    assert page.count("class='bar'") == 16  # four charts, four backends, all measured
    assert "2 cores &lt;b&gt;" in page and "a &lt;note&gt;" in page
    assert len(re.findall(r"data-verdict='confirmed'", page)) == sum(c["verdict"] == CONFIRMED for c in cells)
