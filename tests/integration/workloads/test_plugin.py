"""A user's own lock client, in its own package, runs through the entry point group."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.paths import TESTS

pytestmark = pytest.mark.integration
PLUGIN = TESTS / "plugin_demo"


def chaos_with_plugin(*args):
    env = dict(os.environ, PYTHONPATH=f"{PLUGIN}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=120)


def test_plugin_backend_is_listed_and_runs(tmp_path):
    assert "demo-lock" in chaos_with_plugin("list").stdout
    r = chaos_with_plugin("run", "--backend", "demo-lock", "--time-limit", "6", "--concurrency", "3",
                          "--store", str(tmp_path), "--json", "--seed", "1")
    assert r.returncode == 0, r.stderr[-2000:]
    s = json.loads(r.stdout.strip().splitlines()[-1])
    assert s["backend"] == "demo-lock" and s["valid"] is True and s["acquires_ok"] >= 3
    tokens = [json.loads(line).get("token") for line in open(Path(s["run_dir"]) / "history.jsonl")
              if '"f":"acquire"' in line and '"type":"ok"' in line]
    assert tokens and all(t is not None for t in tokens)


def test_unknown_plugin_name_lists_the_plugin_among_choices():
    r = chaos_with_plugin("run", "--backend", "demo-lok")
    assert r.returncode == 254 and "demo-lock" in r.stderr
