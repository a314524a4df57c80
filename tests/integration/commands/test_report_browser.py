"""The report in a real browser: headless Chromium opens report.html (and the store index)
from disk, runs its script without a console message, and draws a non-trivial screenshot.

No servers: the run dir is made from a synthetic history (tests/unit/results/test_report.py) and
checked by `analyse`, exactly as after a real run. Chromium is Debian's /usr/bin/chromium.
"""

from __future__ import annotations

import re
import struct
import subprocess
from pathlib import Path

import pytest

from harness.engine.analysis import analyse
from harness.core.history import HistoryWriter
from harness.core.spec import TestSpec
from results import store
from tests.conftest import installed
from tests.unit.results.test_report import EVIL_ERROR, realistic_history

CHROMIUM = Path("/usr/bin/chromium")
pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def chromium_installed():
    installed(CHROMIUM.exists(), f"{CHROMIUM} (apt package chromium)")


FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars"]


def chromium(tmp: Path, *args: str, timeout: float = 90) -> subprocess.CompletedProcess:
    profile = tmp / "chromium-profile"
    profile.mkdir(exist_ok=True)
    return subprocess.run([str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=timeout)


def console_messages(stderr: str) -> list[str]:
    """Every message the page logged (errors, uncaught exceptions, blocked loads)."""
    return [ln for ln in stderr.splitlines() if ":CONSOLE" in ln or "Uncaught" in ln]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("browser") / "store"
    d = root / "redlock-clock-skew" / "20260101T000000"
    (d / "nodes").mkdir(parents=True)
    spec = TestSpec(backend="redlock", nemesis=("clock-skew",), seed=7, time_limit=25, store=str(root),
                    command="chaos run --backend redlock --nemesis clock-skew --time-limit 25 --seed 7")
    (d / "spec.json").write_text(spec.to_json())
    history = realistic_history(n_ops=4000, seed=7, fault_every_s=2.0, fault_len_s=1.0)
    writer = HistoryWriter(d / "history.jsonl")  # the writer a real run uses
    for op in history:
        writer.append(op)
    writer.close()
    for n in ("n1", "n2", "n3", "n4", "n5"):
        (d / "nodes" / f"{n}.log").write_text(f"{n} * Ready to accept connections\n{EVIL_ERROR}\n")
    store.link_latest(root, d)
    doc = analyse(spec, d)
    assert doc["summary"]["valid"] is False and doc["summary"]["violations"] > 0
    assert (d / "report.html").exists() and (root / "index.html").exists()
    return d


def test_report_runs_clean_in_chromium(run_dir, tmp_path):
    r = chromium(tmp_path, "--enable-logging=stderr", "--v=0", "--dump-dom", (run_dir / "report.html").as_uri())
    assert r.returncode == 0, r.stderr[-2000:]
    assert console_messages(r.stderr) == []
    dom = r.stdout
    assert 'data-ready="1"' in dom  # the script ran to its end
    timeline = re.search(r'<svg class="chart timeline".*?</svg>', dom, re.S).group(0)
    assert len(re.findall(r'<g class="lane"', timeline)) == 5
    assert timeline.count('class="fault-band"') >= 5
    assert 'class="violation"' in timeline
    assert EVIL_ERROR not in dom


def test_index_runs_clean_in_chromium(run_dir, tmp_path):
    index = run_dir.parent.parent / "index.html"
    r = chromium(tmp_path, "--enable-logging=stderr", "--v=0", "--dump-dom", index.as_uri())
    assert r.returncode == 0 and console_messages(r.stderr) == []
    assert "redlock-clock-skew/20260101T000000/report.html" in r.stdout and "INVALID" in r.stdout


def test_report_screenshot(run_dir, tmp_path):
    shot = tmp_path / "report.png"
    r = chromium(tmp_path, f"--screenshot={shot}", "--window-size=1400,2000", (run_dir / "report.html").as_uri())
    assert r.returncode == 0, r.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (1400, 2000)
    assert len(data) > 50_000  # a blank or error page compresses to a few kB
    print(f"screenshot: {shot}")
