"""`chaos check` of a stored run reads only the history and the facts the run recorded (issue
26): it imports no client library and no cluster, nemesis or workloads module.

Each check runs in a fresh interpreter with a meta-path finder in front of every other one
that refuses (ImportError) the client libraries and our plug-in families and notes each
attempt; afterwards the child reports the attempts and which of those modules are loaded.
That is the honest equivalent of a venv without the libraries (a venv made with
--system-site-packages still has them): an import that would need them fails here as there.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.paths import ROOT

GOLDEN = ROOT / "tests" / "golden" / "causes"
REFUSED = ("redis", "kazoo", "pyetcd", "etcd3", "grpc", "pottery", "redis_lock", "valkey",
           "workloads", "nemesis", "harness.cluster", "harness.commands.cluster_cli", "harness.commands.client_check",
           "harness.engine.runner", "harness.engine.worker", "harness.commands.reproduce")

CHILD = r"""
import json, sys
REFUSED = tuple(json.loads(sys.argv[1]))
tried = []

def refused(name):
    return any(name == r or name.startswith(r + ".") for r in REFUSED)

class Refuse:
    def find_spec(self, name, path=None, target=None):
        if refused(name):
            tried.append(name)
            raise ImportError(f"refused by the test: {name}")
        return None

sys.meta_path.insert(0, Refuse())
from harness.commands.cli import cli
code = None
try:
    code = cli.main(sys.argv[2:], prog_name="chaos", standalone_mode=False)
except SystemExit as e:
    code = e.code
print("\n@@" + json.dumps({"tried": tried, "loaded": sorted(m for m in sys.modules if refused(m)), "code": code}))
"""


def run_check(*args: str) -> tuple[str, dict]:
    p = subprocess.run([sys.executable, "-c", CHILD, json.dumps(REFUSED), "check", *args], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    out, _, tail = p.stdout.rpartition("\n@@")
    assert tail, f"the check did not finish: {p.stdout}\n{p.stderr}"
    return out, json.loads(tail)


def run_dir(tmp_path: Path, case: str, spec: dict | None) -> Path:
    d = tmp_path / case
    d.mkdir()
    shutil.copy(GOLDEN / f"{case}.jsonl", d / "history.jsonl")
    if spec is not None:
        (d / "spec.json").write_text(json.dumps(spec))
    return d


FACTS = {"kind": "zookeeper", "servers": 3, "clock_expiry": False, "persists": True, "session_timeout_ms": 3000.0,
         "faults": [{"f": "partition", "heal": "heal", "targets": "everyone",
                     "explains": ["early-partition", "in-flight-release"]}]}


@pytest.mark.parametrize("spec", [
    {"backend": "zookeeper", "concurrency": 3, "facts": FACTS},  # a run that recorded its facts
    {"backend": "zookeeper", "concurrency": 3},  # an older run: the facts are derived from the spec
], ids=["recorded-facts", "derived-facts"])
def test_checking_a_run_dir_loads_no_client_cluster_or_nemesis_code(tmp_path, spec):
    d = run_dir(tmp_path, "early-partition", spec)
    out, seen = run_check(str(d), "--json")
    assert seen["tried"] == [] and seen["loaded"] == [], seen
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["valid"] is False and seen["code"] == 1
    assert summary["violations_by_cause"] == {"early-partition": 1}


def test_checking_a_history_file_loads_none_either(tmp_path):
    d = run_dir(tmp_path, "overran-paused", None)
    out, seen = run_check(str(d / "history.jsonl"))
    assert seen["tried"] == [] and seen["loaded"] == [], seen
    assert "overran" in out and seen["code"] == 1


def test_the_refusal_is_real(tmp_path):
    """The finder does refuse: a command that needs a nemesis fails in the child."""
    p = subprocess.run([sys.executable, "-c", CHILD.replace("from harness.commands.cli import cli", "import nemesis.base"),
                        json.dumps(REFUSED)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "refused by the test: nemesis" in p.stderr
