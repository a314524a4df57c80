"""The yardstick's pure parts: the cycle rate from its two halves, and reading redis-benchmark's CSV."""

from __future__ import annotations

import pytest

from harness.commands.compare.yardstick import cycle_rate, measure_yardstick, parse_csv_rps
from harness.core.errors import ChaosError


def test_a_cycle_is_both_halves_one_after_the_other():
    assert cycle_rate(30_000, 60_000) == pytest.approx(20_000)
    assert cycle_rate(0, 60_000) == 0.0


def test_redis_benchmark_csv_gives_the_rate():
    out = ('"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms"\n'
           '"EVAL ...","31616.45","0.838","0.128","0.751"\n')
    assert parse_csv_rps(out) == pytest.approx(31616.45)


def test_no_rate_is_one_sentence_not_a_number():
    with pytest.raises(ChaosError, match="printed no rate"):
        parse_csv_rps("Could not connect to Redis at 1.2.3.4:6379: Connection refused\n")


def test_a_design_without_a_yardstick_is_named():
    with pytest.raises(ChaosError, match="no yardstick for 'nosuch'"):
        measure_yardstick("nosuch", (), None)
