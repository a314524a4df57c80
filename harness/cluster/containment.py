"""Every process a run starts, kept where the kernel can find all of it: a cgroup per run.

A process can leave its process group (setsid), ignore SIGTERM, drop its environment and
outlive its parent. It cannot leave its cgroup, and every child it forks is born in it. So a
run puts its servers and its client workers (and through them every external client and
whatever those fork) into `chaoslock-<run id>/servers` and `.../clients`, and its teardown,
or `chaos cluster down <id>` after a SIGKILLed run, kills whatever is still in there.

Mechanisms, the first that works on this host (CHAOSLOCK_CGROUP=cgroup2|freezer|pids|none
picks one, for tests and for hosts where the first misbehaves):
  cgroup2  a cgroup v2 hierarchy (/sys/fs/cgroup on a v2-only host, /sys/fs/cgroup/unified
           on a hybrid one): `cgroup.kill` kills every member at once, forks in flight too
  freezer  cgroup v1 freezer: freeze the group, SIGKILL every member, thaw
  pids     cgroup v1 pids: SIGKILL the members until none is left
  none     no cgroup can be made (not root, no cgroupfs): process groups and CHAOSLOCK_RUN in
           the environment only, as before; a process that escapes both is not found
Only directories named chaoslock-<run id> that this module made are ever touched.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.core.contracts.cluster import RUN_ID, check_run_id

MECHANISMS = ("cgroup2", "freezer", "pids")
PARTS = ("servers", "clients")
ENV = "CHAOSLOCK_CGROUP"  # choose a mechanism (or none)
PROCS_ENV = "CHAOSLOCK_CGROUP_PROCS"  # the fork server joins the cgroup.procs named here
PREFIX = "chaoslock-"


def _mounts() -> dict[str, Path]:
    """mechanism -> the mount point of its hierarchy, for those mounted here."""
    found: dict[str, Path] = {}
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        parts = line.split()
        if len(parts) < 4:
            continue
        where, fstype, opts = Path(parts[1]), parts[2], parts[3].split(",")
        if fstype == "cgroup2":
            found.setdefault("cgroup2", where)
        elif fstype == "cgroup":
            for m in ("freezer", "pids"):
                if m in opts:
                    found.setdefault(m, where)
    return found


def _write(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _members(d: Path) -> list[int]:
    """The pids in cgroup dir `d` and in its parts."""
    if not d.is_dir():
        return []
    pids: list[int] = []
    for procs in [d / "cgroup.procs"] + [p / "cgroup.procs" for p in d.iterdir() if p.is_dir()]:
        try:
            pids += [int(x) for x in procs.read_text().split()]
        except (OSError, ValueError):
            pass
    return pids


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()[:120]
    except OSError:
        return "?"


@dataclass
class RunCgroup:
    """One run's cgroup in one hierarchy (`dir` is None for mechanism "none")."""

    run_id: str
    mechanism: str
    dir: Path | None = None
    _made: list[Path] = field(default_factory=list)

    @classmethod
    def create(cls, run_id: str) -> RunCgroup:
        """Make the run's cgroup with the first mechanism that really contains a process here
        (proved by starting one in it); mechanism "none" when no cgroup can be made."""
        check_run_id(run_id)
        wanted = os.environ.get(ENV, "auto").strip().lower()
        order = MECHANISMS if wanted in ("", "auto") else ((wanted,) if wanted in MECHANISMS else ())
        mounts = _mounts()
        for mech in order:
            if mech not in mounts:
                continue
            cg = cls(run_id=run_id, mechanism=mech, dir=mounts[mech] / f"{PREFIX}{run_id}")
            if cg._make():
                return cg
        return cls(run_id=run_id, mechanism="none")

    def _make(self) -> bool:
        try:
            self.dir.mkdir()
            self._made.append(self.dir)
            for part in PARTS:
                (self.dir / part).mkdir()
                self._made.append(self.dir / part)
            return self._proves()
        except OSError:
            self.remove()
            return False

    def _proves(self) -> bool:
        """Start `true` in the servers part and see it there: mkdir can work where joining
        does not (a delegated v2 subtree, a read-only cgroup.procs)."""
        import subprocess

        from harness.core.interrupts import deferred

        with deferred():  # a press in the at-fork hooks a preexec_fn runs would be lost; a probe must not outlive it
            try:
                p = subprocess.Popen(["sleep", "5"], preexec_fn=self.preexec("servers"),
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            except (OSError, subprocess.SubprocessError):
                self.remove()
                return False
            ok = p.pid in _members(self.dir)
            p.kill()
            p.wait()
        if not ok:
            self.remove()
        return ok

    # -- joining -------------------------------------------------------------------------------
    def procs(self, part: str) -> str | None:
        """The cgroup.procs file of a part, or None without a cgroup."""
        return None if self.dir is None else str(self.dir / part / "cgroup.procs")

    def preexec(self, part: str):
        """A Popen preexec_fn that puts the child into `part` before it execs (so nothing it
        starts is ever outside); a no-op without a cgroup."""
        procs = self.procs(part)

        def join() -> None:
            if procs is not None:
                fd = os.open(procs, os.O_WRONLY)
                os.write(fd, str(os.getpid()).encode())
                os.close(fd)
        return join

    @staticmethod
    def join_file(procs: str) -> bool:
        """Put the calling process into the cgroup whose cgroup.procs is `procs`."""
        try:
            _write(Path(procs), str(os.getpid()))
            return True
        except OSError:
            return False

    def describe(self) -> str:
        if self.dir is None:
            return "none (no writable cgroup here: process groups and CHAOSLOCK_RUN only)"
        return f"{self.mechanism} ({self.dir})"

    # -- ending --------------------------------------------------------------------------------
    def kill(self, part: str | None = None, timeout: float = 5.0) -> list[str]:
        """SIGKILL every process still in the run's cgroup (or one part of it) and wait until
        it is empty; return "pid (command)" of each one that was there."""
        if self.dir is None or not self.dir.is_dir():
            return []
        d = self.dir / part if part else self.dir
        seen = {pid: _cmdline(pid) for pid in _members(d)}
        if not seen:
            return []
        deadline = time.monotonic() + timeout
        while True:
            self._kill_once(d)
            left = _members(d)
            for pid in left:
                seen.setdefault(pid, _cmdline(pid))
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        return [f"{pid} ({cmd})" for pid, cmd in seen.items()]

    def _kill_once(self, d: Path) -> None:
        if self.mechanism == "cgroup2" and (d / "cgroup.kill").exists():
            try:
                _write(d / "cgroup.kill", "1")
                return
            except OSError:
                pass
        frozen = False
        if self.mechanism == "freezer":  # a frozen group cannot fork while it is being killed
            try:
                _write(d / "freezer.state", "FROZEN")
                frozen = True
            except OSError:
                pass
        for pid in _members(d):
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if frozen:
            try:
                _write(d / "freezer.state", "THAWED")  # killed processes die once thawed
            except OSError:
                pass

    def remove(self) -> list[str]:
        """Kill what is left, then remove the directories this object made (children first)."""
        killed = self.kill()
        for d in reversed(self._made):
            _rmdir(d)
        self._made.clear()
        return killed


def _rmdir(d: Path) -> None:
    for _ in range(50):  # a killed process leaves its cgroup a moment after it dies
        try:
            d.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.02)


def existing(run_id: str) -> list[RunCgroup]:
    """The cgroups a run left, in every hierarchy (for `chaos cluster down`)."""
    check_run_id(run_id)
    out = []
    for mech, where in _mounts().items():
        d = where / f"{PREFIX}{run_id}"
        if d.is_dir() and not d.is_symlink():
            cg = RunCgroup(run_id=run_id, mechanism=mech, dir=d)
            cg._made = [d] + [d / p for p in PARTS if (d / p).is_dir()]
            out.append(cg)
    return out


def leftover_runs() -> set[str]:
    """Run ids that still have a chaoslock cgroup somewhere."""
    ids = set()
    for where in set(_mounts().values()):
        try:
            names = [p.name for p in where.iterdir()]
        except OSError:
            continue
        ids |= {n[len(PREFIX):] for n in names if n.startswith(PREFIX) and RUN_ID.fullmatch(n[len(PREFIX):])}
    return ids


def join_from_env() -> None:
    """Join the cgroup named in PROCS_ENV, if any (the fork server, first thing)."""
    procs = os.environ.get(PROCS_ENV)
    if procs:
        RunCgroup.join_file(procs)
