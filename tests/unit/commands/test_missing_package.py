"""A Python package chaoslock needs that is not installed is one sentence naming it and
`make install`, exit 254, no crash file; a module of our own that cannot be imported is a bug
and still a crash report."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.conftest import ROOT


def chaos_without(module: str, tmp_path) -> subprocess.CompletedProcess:
    code = textwrap.dedent(f"""
        import sys
        sys.modules[{module!r}] = None  # as if not installed: importing it raises ModuleNotFoundError
        from harness.commands.cli import main
        main(["list"])
    """)
    # `chaos list` imports every backend, so every driver's library
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp_path)})


def test_a_missing_package_names_itself_and_make_install(tmp_path):
    r = chaos_without("redis", tmp_path)
    assert r.returncode == 254, r.stderr
    assert r.stderr.strip().splitlines() == [
        "chaos: the Python package 'redis' is not installed; run `make install` (it installs what chaoslock needs)"]
    assert not list(tmp_path.glob("chaos-crash-*"))


def test_a_missing_module_of_our_own_is_a_crash_report(tmp_path):
    r = chaos_without("workloads.redlock", tmp_path)
    assert r.returncode == 255, r.stderr
    assert "crashed with ModuleNotFoundError" in r.stderr and list(tmp_path.glob("chaos-crash-*"))
