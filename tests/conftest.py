"""Shared fixtures. Integration tests must leave nothing behind: no server process of a
run they started, no state dir, no namespace; this is checked after each of them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


# Everything this test session starts (directly or through `chaos` subprocesses) carries
# this owner, so the leftover check never mistakes someone else's cluster for ours.
OWNER = f"pytest-{os.getpid()}"
os.environ["CHAOSLOCK_OWNER"] = OWNER


def _run_ids() -> set[str]:
    import json

    from harness.cluster.local import state_root
    from harness.cluster.reaper import processes

    ids = set(processes(owner=OWNER).values())
    if state_root().exists():
        for d in state_root().iterdir():
            try:
                if json.loads((d / "state.json").read_text()).get("owner") == OWNER:
                    ids.add(d.name)
            except (OSError, ValueError):
                pass
    return ids


@pytest.fixture(autouse=True)
def no_leftovers(request):
    """After an integration test: every run it started is gone (processes, dirs, netns)."""
    if request.node.get_closest_marker("integration") is None:
        yield
        return
    before = _run_ids()
    yield
    new = _run_ids() - before
    if new:
        from harness.cluster.reaper import kill_run

        for rid in new:
            kill_run(rid)
        pytest.fail(f"test left run(s) behind: {sorted(new)} (cleaned up now)")
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    leaked = [line.split()[0] for line in ns.splitlines() if any(f"cl-{rid}-" in line for rid in new)]
    assert not leaked, f"namespaces left behind: {leaked}"


def chaos(*args: str, timeout: float = 300, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run the real CLI in a subprocess, as a user would."""
    env = dict(os.environ)
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd or ROOT, env=env)


def need_root_netns() -> str | None:
    try:
        from harness.cluster.netns import netns_available
    except ImportError:
        return "harness.cluster.netns is missing"
    return netns_available()


__all__ = ["chaos", "need_root_netns", "ROOT"]
