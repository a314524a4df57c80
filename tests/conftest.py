"""Shared fixtures. Integration tests must leave nothing behind: no server process of a
run they started, no state dir, no namespace; this is checked after each of them."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import pytest

# The tests of Ctrl-C send SIGINT to the chaos commands they start. A suite launched in the
# background (`make test &`, nohup, a CI runner without a terminal) may inherit SIGINT ignored,
# which exec keeps, so those commands would never see the press (and `deferred()` rightly keeps
# an ignored SIGINT ignored). Python's own handler here makes every child start with the default.
signal.signal(signal.SIGINT, signal.default_int_handler)

ROOT = Path(__file__).resolve().parent.parent


# Everything this test session starts (directly or through `chaos` subprocesses) carries
# this owner, so the leftover check never mistakes someone else's cluster for ours.
OWNER = f"pytest-{os.getpid()}"
os.environ["CHAOSLOCK_OWNER"] = OWNER


def pytest_collection_modifyitems(config, items):
    """`campaign` tests (too long for the suite's 20 minutes) run only when asked for with
    `-m campaign` (the nightly workflow does); otherwise they show as skipped."""
    if "campaign" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="a campaign test: the nightly workflow runs it (pytest -m campaign)")
    for item in items:
        if item.get_closest_marker("campaign") is not None:
            item.add_marker(skip)


def _run_ids() -> set[str]:
    import json

    from harness.cluster.provider import state_root
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
    from harness.cluster.containment import leftover_runs

    before, cgroups_before = _run_ids(), leftover_runs()
    yield
    new = _run_ids() - before
    left_cgroups = leftover_runs() - cgroups_before
    if left_cgroups and not new:
        from harness.cluster.reaper import kill_run

        for rid in left_cgroups:
            kill_run(rid)
        pytest.fail(f"test left the cgroup(s) of run(s) {sorted(left_cgroups)} behind (cleaned up now)")
    if new:
        from harness.cluster.reaper import kill_run

        for rid in new:
            kill_run(rid)
        pytest.fail(f"test left run(s) behind: {sorted(new)} (cleaned up now)")
    assert not _fork_servers(), "a run's fork server outlived it (harness.engine.pool._stop_forkserver)"
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    leaked = [line.split()[0] for line in ns.splitlines() if any(f"cl-{rid}-" in line for rid in new)]
    assert not leaked, f"namespaces left behind: {leaked}"


def _fork_servers() -> list[int]:
    """Fork servers a finished test may not leave: this process's own (a run stops its own
    when it ends), and any carrying this session's owner (a `chaos` subprocess's, which
    must die with it, also when it was SIGKILLed: harness/engine/forkserver_guard.py)."""
    found = []
    mark = f"CHAOSLOCK_OWNER={OWNER}".encode()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if b"forkserver" not in (d / "cmdline").read_bytes():
                    continue
                if int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == os.getpid() \
                        or mark in (d / "environ").read_bytes().split(b"\0"):
                    found.append(int(d.name))
            except (OSError, ValueError, IndexError):
                pass
    return found


def chaos(*args: str, timeout: float = 300, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run the real CLI in a subprocess, as a user would."""
    env = dict(os.environ)
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd or ROOT, env=env)


def eventually(fn: Callable[[], Any], timeout: float = 20.0, step: float = 0.1, *,
               until: Callable[[Any], bool] | None = bool) -> Any:
    """Poll for a state instead of sleeping and assuming it: call fn every `step` seconds
    until it returns a value `until` accepts (by default a truthy one; None accepts any
    value, for an action that must just stop raising), and return that value. At the
    deadline, re-raise fn's last exception, or fail naming fn and its last result."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = fn()
            if until is None or until(value):
                return value
            err = None
        except Exception as e:  # noqa: BLE001 - retried, re-raised at the deadline
            err = e
        if time.monotonic() > deadline:
            if err is not None:
                raise err
            raise AssertionError(f"{getattr(fn, '__qualname__', fn)} did not reach the state within "
                                 f"{timeout:g} s; last result {value!r}")
        time.sleep(step)


def installed(ok: bool, what: str) -> None:
    """A tool `make install` installs and this test needs: when it is missing the test fails,
    naming it, instead of skipping (a suite that skips it passes green without testing it).
    Skip only what this machine cannot have (root, namespaces, a kernel feature)."""
    if not ok:
        pytest.fail(f"{what} is missing, but `make install` installs it (scripts/install.sh): run make install",
                    pytrace=False)


def need_root_netns() -> str | None:
    """Why namespaces cannot be used here (not root, no `ip`), or None when they can."""
    from harness.cluster.netns import netns_available

    return netns_available()


__all__ = ["chaos", "eventually", "installed", "need_root_netns", "ROOT"]


@pytest.fixture(scope="module")
def busy_port():
    """A loopback port held open (listening) for the module's tests: a port in use."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    yield s.getsockname()[1]
    s.close()
