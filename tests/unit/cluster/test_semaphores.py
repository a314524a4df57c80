"""The POSIX semaphores of a run's Workers (/dev/shm/sem.mp-*): recorded when made, unlinked by
`chaos cluster down` when a SIGKILL of the whole group left them (harness/cluster/reaper.py)."""

import os
import signal
import subprocess
import sys
from pathlib import Path

from harness.cluster.reaper import unlink_semaphores
from tests.conftest import ROOT

# What a run does (harness/engine/pool.py Workers), then waits to be killed with its group
MAKER = """
import multiprocessing as mp, sys, time
from pathlib import Path
from harness.engine.pool import _start_resource_tracker, record_semaphores
ctx = mp.get_context("forkserver")
_start_resource_tracker()
made = (ctx.Queue(), ctx.Event(), ctx.Event())
record_semaphores(Path(sys.argv[1]), *made)
print("ready", flush=True)
time.sleep(60)
"""


def _file(name: str) -> Path:
    return Path(f"/dev/shm/sem.{name[1:]}")


def test_a_run_killed_with_its_resource_tracker_leaves_13_semaphores_and_down_unlinks_each(tmp_path):
    p = subprocess.Popen([sys.executable, "-c", MAKER, str(tmp_path)], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                         start_new_session=True)
    assert p.stdout.readline().strip() == "ready"
    os.killpg(p.pid, signal.SIGKILL)  # the tracker with it, as a CI runner's kill of the group does
    p.wait()
    names = (tmp_path / "semaphores").read_text().split()
    assert len(names) == 13 and all(_file(n).exists() for n in names), names
    assert sorted(unlink_semaphores(tmp_path)) == sorted(names)
    assert not [n for n in names if _file(n).exists()]
    assert unlink_semaphores(tmp_path) == []  # gone already: nothing to say


def test_the_record_is_data_only_multiprocessings_names_are_touched(tmp_path):
    import multiprocessing as mp

    lock = mp.get_context("forkserver").Lock()  # a live semaphore whose name the record spells wrong
    name = lock._semlock.name
    (tmp_path / "semaphores").write_text(f"/../{name[1:]}\n/mp-../../x\n{name}x\n/etc/passwd\n\xff\n")
    assert unlink_semaphores(tmp_path) == []
    assert _file(name).exists()
    (tmp_path / "semaphores").write_bytes(b"\xff\xfe")
    assert unlink_semaphores(tmp_path) == []
    assert unlink_semaphores(tmp_path / "missing") == []
