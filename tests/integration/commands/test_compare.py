"""chaos compare's parts on real servers: fairness and reentrancy measured on real runs, many
keys and many clients in one run, and compare.html in headless Chromium. The whole battery
(minutes per backend) belongs to `chaos compare --quick`, not to this suite."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from harness.checker.properties import check_fairness
from harness.core.history import read_history
from harness.engine.runner import run
from harness.core.spec import TestSpec
from tests.conftest import installed
from tests.unit.commands.test_compare import pages  # noqa: F401  (the fixture)

pytestmark = pytest.mark.integration
CHROMIUM = Path("/usr/bin/chromium")


def contended(backend: str, tmp_path: Path):
    spec = TestSpec(backend=backend, concurrency=4, time_limit=4.0, recovery=0.5, hold_max_ms=20, seed=3,
                    store=str(tmp_path))
    out = run(spec, progress=False)
    assert out.summary["valid"] is True, out.summary
    return check_fairness(spec, read_history(out.run_dir / "history.jsonl")).summary


def test_zookeepers_queue_is_fair_and_redis_polling_is_not(tmp_path):
    zk = contended("zookeeper", tmp_path)
    assert zk["grants"] >= 20 and zk["overtake_share"] <= 0.02, zk  # sequential znodes: first asked, first served
    redis = contended("redis", tmp_path)
    assert redis["grants"] >= 20 and redis["overtake_share"] >= 0.2 and redis["worst_overtake"] >= 2, redis


def test_a_redis_holder_asking_again_blocks(tmp_path):
    out = run(TestSpec(backend="redis", concurrency=1, reenter=True, time_limit=3.0, recovery=0.5, seed=1,
                       store=str(tmp_path)), progress=False)
    s = out.summary
    assert s["valid"] is True and s["checkers"]["reentrancy"] is True
    assert s["reacquires"] >= 2 and s["reentrant_behaviour"] == "blocks" and s["reacquire_succeeds"] == 0


def test_a_hundred_clients_over_twenty_four_keys(tmp_path):
    spec = TestSpec(backend="redis", concurrency=100, keys=24, time_limit=4.0, recovery=0.5, hold_max_ms=0, seed=2,
                    store=str(tmp_path))
    out = run(spec, progress=False)
    s = out.summary
    assert s["valid"] is True and not s.get("errors"), s
    assert s["keys"] == 24 and s["final_counter"] == s["writes_ok"] > 24 * 5
    history = read_history(out.run_dir / "history.jsonl")
    finals = {o.key for o in history if o.process == "final" and o.type == "ok"}
    assert finals == {f"chaos-lock-{i}:counter" for i in range(24)}
    assert {o.process % 100 for o in history if isinstance(o.process, int)} == set(range(100))


def test_compare_html_draws_its_charts_in_chromium(pages, tmp_path):  # noqa: F811
    installed(CHROMIUM.exists(), f"{CHROMIUM} (apt package chromium)")
    d, cells = pages
    profile = tmp_path / "chromium-profile"
    r = subprocess.run([str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                        "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
                        "--enable-logging=stderr", "--v=0", "--dump-dom", (d / "compare.html").as_uri()],
                       capture_output=True, text=True, timeout=90)
    assert r.returncode == 0, r.stderr[-2000:]
    assert [ln for ln in r.stderr.splitlines() if ":CONSOLE" in ln or "Uncaught" in ln] == []
    dom = r.stdout
    charts = re.findall(r'<svg class="chart" data-row="([^"]+)"', dom)
    assert charts == ["acquire_p50_ms", "contended_p99_ms", "throughput", "requests_per_grant"]
    assert len(re.findall(r'<rect class="bar"', dom)) == 16
    assert len(re.findall(r'<td class="cell"', dom)) == len(cells)
