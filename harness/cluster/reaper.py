"""Find and remove what runs left behind: `chaos cluster status/down [--all]`.

Every process a run starts is in the run's cgroup (harness/cluster/containment.py), which
nothing inside can leave; every server process and client worker also has
CHAOSLOCK_RUN=<run id> in its environment, so it can be found from /proc even where no
cgroup could be made, or when the run that started it was SIGKILLed and its state file is gone; every container and network of the compose provider carries the run id in
its `chaoslock.run` label. Namespaces, the bridge and iptables rules carry the run id in their names
(see netns.cleanup_all); state dirs live under local.state_root().
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import time
from pathlib import Path

from harness.core import plugins
from harness.cluster import containment
from harness.core.contracts.cluster import RUN_ID, check_run_id
from harness.cluster.provider import RUN_ENV, state_root
from harness.cluster.local import remove_faketime_files


TITLE_MARK = b"chaos-run="


def processes(run_id: str | None = None, owner: str | None = None) -> dict[int, str]:
    """pid -> run id of every live process carrying CHAOSLOCK_RUN (optionally one run's, or
    only those started under CHAOSLOCK_OWNER=owner, which the test suite sets)."""
    found: dict[int, str] = {}
    me = os.getpid()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == me:
            continue
        try:
            env = (d / "environ").read_bytes().split(b"\0")
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        vals = dict(item.split(b"=", 1) for item in env if b"=" in item)
        rid = vals.get(RUN_ENV.encode(), b"").decode(errors="replace")
        if not rid and TITLE_MARK in cmd:  # a server that rewrote its environ (valkey)
            rid = cmd.split(TITLE_MARK, 1)[1][:6].decode(errors="replace")
            if b"chaos-owner=" in cmd:
                vals[b"CHAOSLOCK_OWNER"] = cmd.split(b"chaos-owner=", 1)[1].split()[0]
        if not RUN_ID.fullmatch(rid) or (run_id is not None and rid != run_id):
            continue
        if owner is not None and vals.get(b"CHAOSLOCK_OWNER", b"").decode() != owner:
            continue
        found[int(d.name)] = rid
    return found


def runs() -> list[dict]:
    """State of every cluster whose state dir still exists, with liveness of each node."""
    out = []
    root = state_root()
    if not root.exists():
        return out
    live = processes()
    for d in sorted(root.iterdir()):
        if not _ours(d):
            continue
        try:
            state = json.loads((d / "state.json").read_text())
        except (OSError, ValueError):
            state = {}
        if not isinstance(state, dict):
            state = {}
        state = {"nodes": [], "pids": {}, **state, "run_id": d.name}
        state["alive"] = {name: pid in live for name, pid in state.get("pids", {}).items()}
        out.append(state)
    return out


def _ours(d: Path) -> bool:
    """A state dir this harness made: named by a run id, a real dir, holding its state.json
    (LocalCluster.up writes that first). Anything else under the root is left alone."""
    return RUN_ID.fullmatch(d.name) is not None and d.is_dir() and not d.is_symlink() \
        and (d / "state.json").is_file()


def kill_run(run_id: str, timeout: float = 5.0) -> list[str]:
    """Stop every process of one run (SIGCONT, SIGTERM, then SIGKILL); remove its state dir.

    `run_id` must be a run id (check_run_id): it reaches a recursive delete, so `..` or a
    path must never get this far. Only processes carrying the run id and a state dir that
    this harness wrote are touched."""
    check_run_id(run_id)
    done: list[str] = []
    pids = processes(run_id)
    for pid in list(pids):
        for sig in (signal.SIGCONT, signal.SIGTERM):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
            except PermissionError:  # another user's run: not ours to stop
                pids.pop(pid, None)
                done.append(f"skipped process {pid} (run {run_id}): it belongs to another user")
                break
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.1)
    for pid in pids:
        if _alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        done.append(f"process {pid} (run {run_id})")
        done += [f"libfaketime file {f}" for f in remove_faketime_files(pid)]
    for cg in containment.existing(run_id):  # whatever escaped the process scan (setsid, a cleared environment)
        done += [f"process {p} (run {run_id}, left in its cgroup)" for p in cg.remove()]
        done.append(f"cgroup {cg.dir}")
    state = _state(run_id)
    # What only its provider can find (an ssh run's hosts, a compose run's containers); a run
    # whose state is gone is offered to every provider (compose asks its engine by label).
    recorded = (state or {}).get("provider", "local")
    for name in plugins.provider_names() if state is None else [recorded if recorded in plugins.PROVIDERS else "local"]:
        done += plugins.provider(name).remove_run(run_id, state)
    if os.geteuid() == 0:  # only root makes namespaces, bridges and rules
        from harness.cluster import netns

        done += netns.cleanup_run(run_id)
    d = state_root() / run_id
    if _ours(d):
        done += [f"semaphore /dev/shm/sem.{n[1:]}" for n in unlink_semaphores(d / "mp")]
        shutil.rmtree(d, ignore_errors=True)
        done.append(f"state dir {d}")
    return done


SEMAPHORE_NAME = re.compile(r"/mp-[A-Za-z0-9_]{1,64}")  # multiprocessing's names, nothing else


def unlink_semaphores(mp_dir: Path) -> list[str]:
    """Unlink the POSIX semaphores a run's Workers recorded making (harness/engine/pool.py
    record_semaphores) that are still there: a run SIGKILLed with its resource tracker leaves
    them. The record is data: only names of multiprocessing's own form are touched."""
    from _multiprocessing import sem_unlink

    try:
        names = (mp_dir / "semaphores").read_text().split()
    except (OSError, UnicodeDecodeError):
        return []
    gone = []
    for name in names:
        if not SEMAPHORE_NAME.fullmatch(name):
            continue
        try:
            sem_unlink(name)
        except OSError:  # unlinked already (its maker exited cleanly), or never ours to remove
            continue
        gone.append(name)
    return gone


def proc_state(pid: int) -> str | None:
    """The kernel's one-letter state of a process (R, S, T, Z...), None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]  # the name in (...) may hold spaces
    except (OSError, IndexError):
        return None


def _alive(pid: int) -> bool:
    return proc_state(pid) not in (None, "Z")


def _state(run_id: str) -> dict | None:
    """A run's state.json, None when it has none (or an unreadable one)."""
    try:
        state = json.loads((state_root() / run_id / "state.json").read_text())
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


def _owner_pid(run_id: str) -> int | None:
    return (_state(run_id) or {}).get("owner_pid")


def down_all() -> list[str]:
    """Remove every leftover of every run: processes, namespaces, bridges, rules, dirs."""
    done: list[str] = []
    ids = set(processes().values()) | containment.leftover_runs()
    root = state_root()
    if root.exists():
        ids |= {d.name for d in root.iterdir() if _ours(d)}
    for name in plugins.provider_names():  # e.g. containers of a run whose state dir is gone
        ids |= plugins.provider(name).leftover_runs()
    for rid in sorted(ids):
        owner = _owner_pid(rid)
        if owner is not None and owner != os.getpid() and _alive(owner):
            done.append(f"skipped run {rid}: its chaos process {owner} is still running (stop that, "
                        f"or `chaos cluster down {rid}` to remove it anyway)")
            continue
        done += kill_run(rid)
    if os.geteuid() == 0:
        from harness.cluster import netns

        done += netns.cleanup_all()
    if root.exists() and not any(root.iterdir()):
        root.rmdir()
    return done


KEPT = "kept"  # marker file in a state dir: `chaos cluster up` left this cluster running on purpose


def reap_dead() -> list[str]:
    """Remove the runs whose chaos process died without tearing down (SIGKILL, a crash of
    the machine's OOM killer): state dirs of this user whose owner is gone, unless
    `chaos cluster up` kept the cluster on purpose. Returns the run ids removed. Runs
    still owned by a live process, and anything without a state dir, are left alone
    (`chaos cluster down --all` is for those)."""
    root = state_root()
    if not root.is_dir():
        return []
    gone = []
    for d in sorted(root.iterdir()):
        if not _ours(d) or (d / KEPT).exists():
            continue
        owner = _owner_pid(d.name)
        if owner is None or owner == os.getpid() or _alive(owner):
            continue
        kill_run(d.name)
        gone.append(d.name)
    if gone:
        try:
            root.rmdir()
        except OSError:
            pass
    return gone

