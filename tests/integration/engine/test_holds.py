"""`--hold-until-expiry`: holders keep the lock until `-o margin_ms` before the validity their
client reported, then write and release, so releases race the expiry on the server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import chaos

pytestmark = pytest.mark.integration


def test_holders_write_within_the_margin_of_their_validity(tmp_path):
    r = chaos("run", "--backend", "redis", "--hold-until-expiry", "-o", "margin_ms=30", "--time-limit", "5",
              "--concurrency", "3", "--ttl", "500", "--seed", "2", "--store", str(tmp_path), "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    s = json.loads(r.stdout.strip().splitlines()[-1])
    assert s["run_dir"].split("/")[-2] == "redis-none-expiry"
    ops = [json.loads(line) for line in (Path(s["run_dir"]) / "history.jsonl").read_text().splitlines()]
    valid, left_ms = {}, []
    for o in ops:
        if o["f"] == "acquire" and o["type"] == "ok":
            valid[o["process"]] = o["valid_until_ns"]
        elif o["f"] == "write" and o["type"] == "invoke":
            left_ms.append((valid[o["process"]] - o["time_ns"]) / 1e6)
    assert len(left_ms) >= 3, left_ms
    # the write starts once the hold has slept to validity - margin: at most the margin left
    # (a starved CPU only makes it later, so closer to expiry, never earlier)
    assert all(left <= 30 + 1 for left in left_ms), left_ms
    assert s["valid"] is True, s
