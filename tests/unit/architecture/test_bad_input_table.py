"""Every bad input in tests/bad_inputs.py, through the real CLI: exit 254 with one sentence
(or the row's documented verdict), no traceback, and nothing left behind.

"Nothing left behind" is checked per row, before against after: no new state dirs under
/dev/shm/chaoslock*, no libfaketime shm files, no `cl-` namespaces, no /run/lock files, no
live process carrying this session's CHAOSLOCK_OWNER, the row's scratch dir (store, runs,
TMPDIR for crash files) exactly as it was. Another session's runs may come and go meanwhile
(integration tests run alongside): what carries another owner's run id is not ours, and
libfaketime's files, which carry only a pid, are only counted while no other run is live.

Rows run with server binaries out of reach (a PATH without java, etcd, valkey or docker, and
CHAOSLOCK_VALKEY_SERVER pointing nowhere): a row whose validation is missing then fails on
"the missing binary" instead of starting a cluster.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.bad_inputs import DIR, FIFO, FIXTURES, ROWS, Row
from tests.conftest import OWNER, chaos

TIMEOUT_S = 60  # a hang detector: bad input is refused in about a second, but not on a starved machine
TRIPWIRE = "/nonexistent/chaoslock-tripwire/valkey-server"
BLOCKED = {"java", "etcd", "etcdctl", "valkey-server", "redis-server", "docker", "podman", "zkServer.sh", "faketime"}
# What a run says when it got as far as looking for its servers: validation came too late.
STARTED = ("chaoslock-tripwire", "not found on PATH", "docker CLI is not installed", "not found; run `make install`")


@pytest.fixture(scope="module")
def tripwire_path(tmp_path_factory) -> str:
    """A PATH with every program of ours except the servers'."""
    bin_dir = tmp_path_factory.mktemp("tripwire-bin")
    for d in os.environ.get("PATH", "").split(os.pathsep):
        try:
            entries = list(Path(d).iterdir())
        except OSError:
            continue
        for e in entries:
            target = bin_dir / e.name
            if e.name in BLOCKED or target.exists() or target.is_symlink():
                continue
            if e.is_file() and os.access(e, os.X_OK):
                target.symlink_to(e.resolve())
    return str(bin_dir)


# ---------------------------------------------------------------- building a row's files

def build_run(d: Path, files: dict) -> Path:
    d.mkdir(parents=True)
    for name, content in files.items():
        p = d / name
        if content is FIFO:
            os.mkfifo(p)
        elif content is DIR:
            p.mkdir()
        else:
            p.write_bytes(content if isinstance(content, bytes) else content.encode())
    return d


def expand(r: Row, tmp: Path, port: int) -> list[str]:
    runs = tmp / "runs"

    def one(m: re.Match) -> str:
        kind, name = m.group(1), m.group(2)
        d = runs / name
        if not d.exists():
            build_run(d, FIXTURES[name])
        return str(d if kind == "run" else d / "history.jsonl")

    out = []
    for a in r.argv:
        a = re.sub(r"\{(run|hist):([^}]+)\}", one, a)
        out.append(a.format(store=tmp / "store", tmp=tmp, file=tmp / "file", busy_port=port))
    return out


# ---------------------------------------------------------------- what the system holds

def _owner_of(state_dir: Path) -> str | None:
    try:
        return json.loads((state_dir / "state.json").read_text()).get("owner")
    except (OSError, ValueError, AttributeError):
        return None


def system_state() -> dict:
    """Everything a chaoslock command could leave outside the row's scratch dir."""
    from harness.cluster.reaper import processes

    shm = Path("/dev/shm")
    # one listing: a state root that another test's command makes between two listings would
    # otherwise show up in the second as a new top-level entry
    listed = list(shm.glob("chaoslock*"))
    roots = [p for p in listed if p.is_dir() and not p.is_symlink()]
    state_dirs = {str(d): _owner_of(d) for root in roots for d in _listdir(root)}
    procs = processes()
    owners = {}
    for pid, rid in procs.items():
        owners.setdefault(rid, _proc_owner(pid))
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split("\n")
    return {
        "shm_top": {p.name for p in listed if p not in roots},
        "state_dirs": state_dirs,
        "faketime": {p.name for p in shm.iterdir() if "faketime" in p.name},
        "netns": {line.split()[0] for line in ns if line.startswith("cl-")},
        "locks": {p.name for p in Path("/run/lock").glob("chaoslock-*")},
        "run_owners": owners,  # run id -> owner of its live processes
        "mine": sorted(processes(owner=OWNER)),
        "others": other_sessions(),
    }


def _ancestors() -> set[int]:
    out, pid = set(), os.getpid()
    while pid > 1:
        out.add(pid)
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            break
    return out


def other_sessions() -> list[int]:
    """Pids of chaos commands and test sessions that are not this one (or its ancestors):
    while one lives, a namespace, lock file or libfaketime file we cannot attribute may be its."""
    mine, found = _ancestors(), []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) in mine:
            continue
        try:
            argv = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        names = [os.path.basename(a) for a in argv]
        if b"chaos" in names or any(b"pytest" in a for a in argv) or b"harness" in argv[1:3]:
            found.append(int(d.name))
    return found


def _listdir(p: Path) -> list[Path]:
    try:
        return list(p.iterdir())
    except OSError:
        return []


def _proc_owner(pid: int) -> str | None:
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    for item in env:
        if item.startswith(b"CHAOSLOCK_OWNER="):
            return item.split(b"=", 1)[1].decode(errors="replace")
    return None


def foreign_runs(*states: dict) -> set[str]:
    """Run ids another session owns (by live process or state dir), seen in any state."""
    out = set()
    for s in states:
        out |= {rid for rid, owner in s["run_owners"].items() if owner != OWNER}
        out |= {Path(d).name for d, owner in s["state_dirs"].items() if owner != OWNER}
    return out


def leftovers(before: dict, after: dict) -> list[str]:
    found = []
    foreign = foreign_runs(before, after)
    mine = {Path(d).name for d, owner in after["state_dirs"].items() if owner == OWNER} | \
        {rid for rid, owner in after["run_owners"].items() if owner == OWNER}
    # A run id nobody claims (a netns probe's, or a run that just ended) is ours only while no
    # other session lives; libfaketime's files carry only a pid, so they follow the same rule.
    alone = not foreign and not before["others"] and not after["others"]

    def ours(rid: str) -> bool:
        return rid in mine or (alone and rid not in foreign)

    found += [f"/dev/shm/{n}" for n in sorted(after["shm_top"] - before["shm_top"])]
    found += [f"state dir {d}" for d, owner in after["state_dirs"].items()
              if d not in before["state_dirs"] and owner == OWNER]
    found += [f"namespace {n}" for n in sorted(after["netns"] - before["netns"]) if ours(n.split("-")[1])]
    found += [f"/run/lock/{n}" for n in sorted(after["locks"] - before["locks"])
              if ours(n.removeprefix("chaoslock-").split(".")[0])]
    if alone:
        found += [f"/dev/shm/{n}" for n in sorted(after["faketime"] - before["faketime"])]
    found += [f"live process {pid} of this session" for pid in after["mine"]]
    return found


def tree(d: Path) -> dict[str, tuple]:
    out = {}
    for p in sorted(d.rglob("*")):
        st = p.lstat()  # a dir's own mtime moves when a check makes and removes a probe file in it
        out[str(p.relative_to(d))] = (0, 0) if p.is_dir() and not p.is_symlink() else \
            (os.readlink(p), st.st_mtime_ns) if p.is_symlink() else (st.st_size, st.st_mtime_ns)
    return out


# ---------------------------------------------------------------- the guard of hostile ids

class Trap(Exception):
    pass


def hostile_id_guard(argv: list[str], monkeypatch) -> str | None:
    """None if the CLI refuses this id before touching anything; else why the row is not run.

    The row is first tried in-process with every reaper step that finds or removes
    something (processes, state dirs, namespaces, the one-running-cluster default of
    `down` without an id) replaced by a trap."""
    from harness.commands import cli
    from harness.cluster import netns, reaper
    from harness.core.errors import BadArgument

    def trap(*a, **k):
        raise Trap

    with monkeypatch.context() as m:
        for name in ("processes", "state_root", "down_all", "remove_faketime_files"):
            if hasattr(reaper, name):
                m.setattr(reaper, name, trap)
        m.setattr(reaper, "runs", lambda: [{"run_id": "abcdef", "nodes": [], "pids": {}, "alive": {}}])
        for name in ("cleanup_run", "cleanup_all"):
            if hasattr(netns, name):
                m.setattr(netns, name, trap)
        m.setattr(reaper.shutil, "rmtree", trap)
        try:
            cli.cli.main(args=argv, prog_name="chaos", standalone_mode=False)
        except BadArgument:
            return None
        except Trap:
            return "it would go on to find and remove things"
        except Exception as e:  # click's own refusal counts as refused
            import click

            if isinstance(e, click.UsageError):
                return None
            return f"it raised {type(e).__name__}: {e}"
    return "it was accepted"


# ---------------------------------------------------------------- the table

@pytest.mark.parametrize("r", ROWS, ids=[r.id for r in ROWS])
def test_bad_input(r: Row, tmp_path, busy_port, tripwire_path, monkeypatch):
    (tmp_path / "store").mkdir()
    if r.earlier:  # an earlier run of the same test, which store/latest names: a refusal must not move it
        (tmp_path / "store" / r.earlier / "20200101T000000").mkdir(parents=True)
        (tmp_path / "store" / "latest").symlink_to(f"{r.earlier}/20200101T000000")
    (tmp_path / "file").write_text("not a directory\n")
    (tmp_path / "tmpdir").mkdir()
    argv = expand(r, tmp_path, busy_port)
    if r.guard == "hostile-id":
        why = hostile_id_guard(argv, monkeypatch)
        if why is not None:
            pytest.fail(f"not run: `chaos {' '.join(map(repr, argv))}` is not refused up front ({why}); "
                        f"running it could remove what is not ours")
    monkeypatch.setenv("PATH", tripwire_path)
    monkeypatch.setenv("CHAOSLOCK_VALKEY_SERVER", TRIPWIRE)
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmpdir"))
    files_before, before = tree(tmp_path), system_state()
    try:
        p = chaos(*argv, timeout=TIMEOUT_S)
        code, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        code, out, err = None, _text(e.stdout), _text(e.stderr)
    after = system_state()
    problems = []
    if code is None:
        problems.append(f"did not finish in {TIMEOUT_S} s")
    elif code != r.code:
        problems.append(f"exit {code}, not {r.code}")
    lines = err.strip().splitlines()
    if r.code == 254 and len(lines) != 1:
        problems.append(f"{len(lines)} lines on stderr, not one")
    if r.code != 254 and lines:
        problems.append(f"stderr is not empty ({lines[0][:100]!r})")
    if "Traceback" in out + err:
        problems.append("a traceback")
    if r.words and r.code == 254 and r.words not in err:
        problems.append(f"stderr does not name {r.words!r}")
    if any(s in err for s in STARTED):
        problems.append("the run got as far as looking for its server binaries (validation missing)")
    problems += leftovers(before, after)
    files_after = tree(tmp_path)
    changed = sorted(k for k in files_after.keys() | files_before.keys() if files_after.get(k) != files_before.get(k))
    if changed:
        problems.append(f"left or changed in the scratch dir: {', '.join(changed[:5])}")
    assert not problems, f"chaos {' '.join(argv)}: " + "; ".join(problems) + f"\nstderr: {err.strip()[:500]}"


def _text(b) -> str:
    return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")


def test_every_row_of_the_table_runs(request):
    """One test_bad_input per row of tests/bad_inputs.py in this session, none dropped or
    deselected (a row never skips: a hostile id it cannot prove refused is a failure). Run
    this test with the table, not alone."""
    here = [i for i in request.session.items if i.module is request.module and i.originalname == "test_bad_input"]
    assert [i.callspec.params["r"].id for i in here] == [r.id for r in ROWS], (
        f"{len(here)} of the table's {len(ROWS)} rows are in this session (deselected, or this test was run alone)")
