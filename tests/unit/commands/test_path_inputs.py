"""Every path a command takes from outside, times every way a path can be bad, through the
real CLI: exit 254 with one sentence naming the path (and its flag) and what is wrong; never
a traceback, a crash (255) or a hang, nothing started, nothing left behind
(harness/core/pathcheck.py).

The kinds, and what can be refused to root (the suite runs as root):
  long-name    one name of 300 bytes (ENAMETOOLONG)     long-path  over 4096 bytes in all
  name-not-utf8  a name in Latin-1: usable, but it would go into UTF-8 JSON and reports
  fifo         a named pipe (an open for reading would block until a writer comes)
  device       a null device made here with mknod (never a real /dev file: today's code
               replaced /dev/null with a regular file when given `matrix --junit /dev/null`)
  under-file   a path through a regular file (ENOTDIR: root cannot read that either)
  wrong-type   a file where a directory is needed, a directory where a file is
  unreadable   mode 000, and unwritable (0555, 0444) where it is written: root reads and
               writes those anyway (CAP_DAC_OVERRIDE), so these run the CLI with
               CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH dropped (setpriv), as any other user
  read-only    a read-only bind mount, in a mount namespace of the command's own (unshare)
  immutable    chattr +i: EPERM even for root; the attribute is cleared in teardown
  not-utf8     a text file (hosts, expectations, rows, matrix.csv) that is not UTF-8

Rows that could start something run with server binaries out of reach (PATH holds only
Python, CHAOSLOCK_VALKEY_SERVER points nowhere), so a missing check fails on the wrong
sentence, never by starting a cluster.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.bad_inputs import GOOD
from tests.conftest import ROOT

TIMEOUT_S = 30  # a hang detector: each refusal takes well under a second
TRIPWIRE = "/nonexistent/chaoslock-tripwire/valkey-server"
NO_DAC = [shutil.which("setpriv") or "setpriv", "--inh-caps=-dac_override,-dac_read_search",
          "--bounding-set=-dac_override,-dac_read_search", "--"]
READ_ONLY = [shutil.which("unshare") or "unshare", "--mount", "--propagation", "private", "--", shutil.which("sh") or "sh",
             "-c", f'{shutil.which("mount") or "mount"} --bind -o ro "$0" "$0" && exec "$@"']
IS_ROOT = os.geteuid() == 0

RUN = ("--time-limit", "1", "--concurrency", "1", "--backend", "redis")
SSH = ("run", "--cluster", "ssh", *RUN, "--store", "{store}")
HOST = "chaoslock-path-test.invalid"  # never resolves: a row that gets past its check cannot log in anywhere
MATRIX = ("matrix", "--backends", "redis", "--nemeses", "none", "--fencing", "off", "--seeds", "1",
          "--time-limit", "1", "--concurrency", "1")

READ = ["long-name", "long-path", "name-not-utf8", "fifo", "device", "under-file", "wrong-type", "unreadable"]
WRITE = ["long-name", "long-path", "name-not-utf8", "fifo", "device", "under-file", "wrong-type", "unwritable",
         "read-only", "immutable"]
KINDS = {
    "dir-read": READ,
    "dir-write": READ + ["unwritable", "read-only", "immutable", "immutable-inside"],
    "dir-create": WRITE + ["immutable-below"],
    "file-write": WRITE,
    "file-read": READ,
    "text": READ + ["not-utf8"],
    "either": [k for k in READ if k != "wrong-type"],
}
# what stderr must say, per kind (any one of the words); click.Path's own "is not readable" counts
WORDS = {"long-name": ("too long",), "long-path": ("too long",), "fifo": ("named pipe",), "device": ("device",),
         "under-file": ("not a directory",), "unreadable": ("permission denied", "is not readable"),
         "unwritable": ("permission denied",), "read-only": ("read-only file system",), "immutable": ("immutable",),
         "immutable-inside": ("immutable",), "immutable-below": ("immutable",), "not-utf8": ("UTF-8",),
         "name-not-utf8": ("not UTF-8",)}


@dataclass(frozen=True, slots=True, kw_only=True)
class Opt:
    id: str
    argv: tuple[str, ...]  # {p} the bad path; {store}, {run}, {mdir}, {port} as below
    role: str
    flag: str = ""
    inside: str = ""  # dir-write: the file in the dir the command replaces
    extra: tuple[str, ...] = ()  # kinds beyond the role's


OPTS = [
    Opt(id="check", argv=("check", "{p}"), role="either"),
    Opt(id="report", argv=("report", "{p}"), role="dir-write", inside="results.json"),
    Opt(id="shrink", argv=("shrink", "{p}"), role="dir-write", inside="shrink.json"),
    Opt(id="run-replay", argv=("run", "--replay", "{p}"), role="dir-read", flag="--replay"),
    Opt(id="serve-store", argv=("serve", "--store", "{p}", "--port", "{port}"), role="dir-read", flag="--store"),
    Opt(id="matrix-recheck", argv=(*MATRIX, "--store", "{store}", "--recheck", "{p}"), role="dir-read",
        flag="--recheck", extra=("not-utf8",)),
    Opt(id="run-store", argv=("run", *RUN, "--store", "{p}"), role="dir-create", flag="--store"),
    Opt(id="shrink-store", argv=("shrink", "{run}", "--store", "{p}"), role="dir-create", flag="--store"),
    Opt(id="matrix-store", argv=(*MATRIX, "--recheck", "{mdir}", "--store", "{p}"), role="dir-create", flag="--store"),
    Opt(id="reproduce-store", argv=("reproduce", "gc-pause", "--time-limit", "5", "--store", "{p}"), role="dir-create",
        flag="--store"),
    Opt(id="compare-store", argv=("compare", "--quick", "--store", "{p}"), role="dir-create", flag="--store"),
    Opt(id="explore-store", argv=("explore", "-b", "redis", "--store", "{p}"), role="dir-create", flag="--store"),
    Opt(id="run-junit", argv=("run", *RUN, "--store", "{store}", "--junit", "{p}"), role="file-write", flag="--junit"),
    Opt(id="matrix-junit", argv=(*MATRIX, "--store", "{store}", "--recheck", "{mdir}", "--junit", "{p}"),
        role="file-write", flag="--junit"),
    Opt(id="matrix-expectations", argv=(*MATRIX, "--store", "{store}", "--recheck", "{mdir}", "--expectations", "{p}"),
        role="text", flag="--expectations"),
    Opt(id="reproduce-summarize", argv=("reproduce", "--summarize", "{p}"), role="either", flag="--summarize",
        extra=("not-utf8",)),
    Opt(id="run-hosts", argv=(*SSH, "--hosts", "@{p}"), role="text", flag="--hosts"),
    Opt(id="run-ssh-key", argv=(*SSH, "--hosts", HOST, "--ssh-key", "{p}"), role="file-read", flag="--ssh-key"),
    Opt(id="run-ssh-known-hosts", argv=(*SSH, "--hosts", HOST, "--ssh-known-hosts", "{p}"), role="file-read",
        flag="--ssh-known-hosts"),
]
CASES = [(o, k) for o in OPTS for k in KINDS[o.role] + list(o.extra)]


# ---------------------------------------------------------------- building the bad path

RUN_FILES = {"history.jsonl": GOOD}
TEXT = {"text": "h1\n", "either": '{"scenario": "x"}\n', "file-read": "key\n", "file-write": "<x/>\n"}


def fill(d: Path, opt: Opt) -> Path:
    """A directory such as the option reads: a run dir (its history), or an empty one."""
    d.mkdir(parents=True)
    if opt.role in ("dir-write", "either") or opt.id == "run-replay":
        for name, text in RUN_FILES.items():
            (d / name).write_text(text)
    return d


def bad_path(opt: Opt, kind: str, tmp: Path, frozen: list[Path]) -> tuple[str, list[str]]:
    """(the bad path, the argv prefix the command runs under)."""
    dirish = opt.role.startswith("dir") or opt.role == "either"
    if kind == "long-name":
        return str(tmp / ("a" * 300)), []
    if kind == "long-path":
        return str(tmp.joinpath(*["b" * 200] * 21)), []
    if kind == "fifo":
        os.mkfifo(tmp / "fifo")
        return str(tmp / "fifo"), []
    if kind == "device":
        if not IS_ROOT:
            pytest.skip("mknod needs root")
        os.mknod(tmp / "null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        return str(tmp / "null"), []
    if kind == "name-not-utf8":  # there and usable, but its name cannot go into UTF-8 JSON or HTML
        p = Path(os.fsdecode(os.fsencode(tmp) + b"/r\xe9"))
        if opt.role.startswith("dir") and opt.role != "dir-create":
            fill(p, opt)
        elif opt.role != "dir-create":
            p.write_text(TEXT.get(opt.role, "x\n"))
        return str(p), []
    if kind == "under-file":
        return str(tmp / "file" / "x"), []
    if kind == "wrong-type":
        return str(tmp / ("file" if dirish else "dir")), []
    if kind in ("unreadable", "unwritable"):
        p = fill(tmp / "locked", opt) if dirish else tmp / "locked.txt"
        if not dirish:
            p.write_text(TEXT.get(opt.role, "x\n"))
        p.chmod(0o000 if kind == "unreadable" else 0o555 if dirish else 0o444)
        return str(p), NO_DAC if IS_ROOT else []
    if kind == "read-only":
        if not IS_ROOT:
            pytest.skip("a bind mount needs root")
        ro = fill(tmp / "ro", opt)
        p = ro if opt.role == "dir-write" else ro / "sub" if opt.role == "dir-create" else ro / "out.xml"
        return str(p), [*READ_ONLY, str(ro)]
    if kind.startswith("immutable"):
        if not IS_ROOT:
            pytest.skip("chattr +i needs root")
        if opt.role == "file-write":
            p = target = tmp / "frozen.xml"
            p.write_text("<x/>\n")
        else:
            p = target = fill(tmp / "frozen", opt)
            if kind == "immutable-inside":
                target = p / opt.inside
                target.write_text("{}\n")
            elif kind == "immutable-below":
                p = p / "sub"
        chattr(target, "+i")
        frozen.append(target)
        return str(p), []
    if kind == "not-utf8":
        if opt.role == "dir-read":  # a matrix dir whose matrix.csv is not UTF-8
            d = fill(tmp / "mbad", opt)
            (d / "matrix.csv").write_bytes(b"backend,nemesis,fencing,seed,valid\nr\xe9dis,none,false,1,true\n")
            return str(d), []
        (tmp / "latin1.txt").write_bytes(b"# h\xf4tes\nh1\n")
        return str(tmp / "latin1.txt"), []
    raise AssertionError(kind)


def chattr(p: Path, flag: str) -> None:
    r = subprocess.run(["chattr", flag, str(p)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"chattr {flag} does not work here: {r.stderr.strip()}")


@pytest.fixture
def frozen():
    """Paths made immutable by the test: made mutable again whatever happens."""
    paths: list[Path] = []
    yield paths
    for p in paths:
        subprocess.run(["chattr", "-i", str(p)], capture_output=True)


def tree(d: Path) -> dict[str, tuple[int, int]]:
    """What the scratch dir holds: a directory's own mtime moves when a check makes and
    removes a probe file in it, so only files are compared by size and mtime."""
    out = {}
    for p in sorted(d.rglob("*")):
        st = p.lstat()
        out[str(p.relative_to(d))] = (0, 0) if stat.S_ISDIR(st.st_mode) else (st.st_size, st.st_mtime_ns)
    return out


# ---------------------------------------------------------------- the table

@pytest.mark.parametrize("opt, kind", CASES, ids=[f"{o.id}-{k}" for o, k in CASES])
def test_a_bad_path_is_one_sentence(opt: Opt, kind: str, tmp_path: Path, frozen, busy_port):
    tmp = tmp_path / "t"
    tmp.mkdir()
    (tmp / "store").mkdir()
    (tmp / "mdir").mkdir()
    (tmp / "dir").mkdir()
    (tmp / "file").write_text("a regular file\n")
    fill(tmp / "run", Opt(id="run", argv=(), role="dir-write"))
    p, prefix = bad_path(opt, kind, tmp, frozen)
    if prefix and not os.path.isabs(prefix[0]):
        pytest.skip(f"{prefix[0]} is not installed")
    subs = {"{p}": p, "{store}": str(tmp / "store"), "{run}": str(tmp / "run"), "{mdir}": str(tmp / "mdir"),
            "{port}": str(busy_port)}
    argv = []
    for a in opt.argv:
        for k, v in subs.items():
            a = a.replace(k, v)
        argv.append(a)
    env = {**os.environ, "PATH": os.path.dirname(sys.executable), "CHAOSLOCK_VALKEY_SERVER": TRIPWIRE,
           "TMPDIR": str(tmp_path)}
    before = tree(tmp)
    try:
        r = subprocess.run([*prefix, sys.executable, "-m", "harness", *argv], capture_output=True, text=True,
                           timeout=TIMEOUT_S, cwd=ROOT, env=env)
    except subprocess.TimeoutExpired:
        pytest.fail(f"chaos {' '.join(argv)[:300]} did not finish in {TIMEOUT_S} s (a blocking open?)")
    err = r.stderr.strip()
    shown = ("@" if opt.id == "run-hosts" else "") + p[:60]
    problems = []
    if r.returncode != 254:
        problems.append(f"exit {r.returncode}, not 254")
    if len(err.splitlines()) != 1 or "Traceback" in err:
        problems.append(f"{len(err.splitlines())} lines on stderr, not one sentence")
    inner = opt.role == "dir-read" and kind == "not-utf8"  # names the file in the dir, not the flag
    for words in ((opt.flag if not inner else "",), (shown,), WORDS.get(kind, ("is",))):
        if not any(w in err for w in words):
            problems.append(f"stderr does not say {' or '.join(map(repr, words))}")
    if tree(tmp) != before:
        problems.append("the scratch dir changed")
    assert not problems, f"{opt.id} x {kind}: " + "; ".join(problems) + f"\nstderr: {err[:600]}"


# ---------------------------------------------------------------- the checks themselves

def test_the_limits_of_a_name_and_a_path(tmp_path):
    from harness.core.pathcheck import PATH_MAX, ROOM, too_long

    assert too_long(tmp_path / ("a" * 255)) is None
    assert "256 bytes" in too_long(tmp_path / ("a" * 256))
    assert "\u00e9" * 127 and too_long(tmp_path / ("\u00e9" * 128)) and too_long(tmp_path / ("\u00e9" * 127)) is None
    deep = "/" + "/".join(["c" * 200] * ((PATH_MAX - 300) // 201))
    assert too_long(deep) is None and "as an absolute path" in too_long(deep, ROOM + 300)


def test_a_store_that_is_made_is_removed_again_and_a_fifo_is_never_opened(tmp_path):
    from harness.core.errors import BadArgument
    from harness.core.pathcheck import DIR, FILE, check_path

    check_path(tmp_path / "new" / "store", flag="--store", want=DIR, write=True, create=True)
    assert list(tmp_path.iterdir()) == []
    os.mkfifo(tmp_path / "fifo")
    for want, write in ((FILE, False), (FILE, True), (DIR, False)):  # would block for ever if opened
        with pytest.raises(BadArgument, match="named pipe"):
            check_path(tmp_path / "fifo", want=want, write=write)
    (tmp_path / "j.xml").write_text("x")
    check_path(tmp_path / "j.xml", want=FILE, write=True)
    assert (tmp_path / "j.xml").read_text() == "x" and sorted(os.listdir(tmp_path)) == ["fifo", "j.xml"]


def test_a_missing_file_to_write_needs_its_directory(tmp_path):
    from harness.core.errors import BadArgument
    from harness.core.pathcheck import FILE, check_path

    with pytest.raises(BadArgument, match=r"--junit .*nope/j.xml cannot be made: its directory .*nope does not exist"):
        check_path(tmp_path / "nope" / "j.xml", flag="--junit", want=FILE, write=True)
    check_path(tmp_path / "known_hosts", want=FILE, missing_ok=True)  # ssh creates it
    with pytest.raises(BadArgument, match="does not exist"):
        check_path(tmp_path / "key", want=FILE)


@pytest.mark.parametrize("run_dir, words", [("a" * 300, "too long"), (5, "is not named"), ("fifo", "named pipe")])
def test_a_stored_row_whose_run_dir_is_a_bad_path_is_one_sentence(tmp_path, run_dir, words):
    """`reproduce --summarize ROWS --recheck` follows the run dirs a rows.jsonl names: paths
    from a file, checked like a flag's (today: ENAMETOOLONG and a number crash with 255)."""
    import json

    os.mkfifo(tmp_path / "fifo")
    row = {"scenario": "gc-pause", "variant": "nofence", "seed": 1, "expected": "unsafe", "matched": True,
           "run_dir": str(tmp_path / run_dir) if isinstance(run_dir, str) else run_dir}
    (tmp_path / "rows.jsonl").write_text(json.dumps(row) + "\n")
    r = subprocess.run([sys.executable, "-m", "harness", "reproduce", "--summarize", str(tmp_path / "rows.jsonl"),
                        "--recheck"], capture_output=True, text=True, timeout=TIMEOUT_S, cwd=ROOT)
    err = r.stderr.strip()
    assert r.returncode == 254 and len(err.splitlines()) == 1 and words in err and "gc-pause/nofence seed 1" in err, err


@pytest.mark.parametrize("how", ["run", "client-check"])
@pytest.mark.parametrize("program, words", [
    ("'unclosed", "not a command line"), ("./no-such-client", "does not exist"), ("a" * 300, "is not on PATH"),
    ("{tmp}/" + "a" * 300, "too long"), ("{tmp}/plain", "not executable"), ("{tmp}", "is a directory"),
    ("{tmp}/fifo", "named pipe"), ("no-such-program-xyz", "is not on PATH"),
])
def test_a_client_program_that_cannot_run_is_refused_before_any_server(tmp_path, how, program, words):
    """`chaos run --client CMD` and `chaos client-check CMD` start CMD's first word after the
    servers are up: a program that is not there or cannot run is one sentence before that
    (today: the servers' start-up, here the tripwire's 'etcd not found on PATH')."""
    (tmp_path / "plain").write_text("#!/bin/sh\n")
    os.mkfifo(tmp_path / "fifo")
    cmd = program.replace("{tmp}", str(tmp_path)) + " --flag"
    argv = (["run", "--client", cmd, "--servers", "etcd:3", "--time-limit", "1", "--store", str(tmp_path / "store")]
            if how == "run" else ["client-check", cmd, "--servers", "etcd:3"])
    env = {**os.environ, "PATH": os.path.dirname(sys.executable), "CHAOSLOCK_VALKEY_SERVER": TRIPWIRE}
    r = subprocess.run([sys.executable, "-m", "harness", *argv], capture_output=True, text=True, timeout=TIMEOUT_S,
                       cwd=ROOT, env=env)
    err = r.stderr.strip()
    assert r.returncode == 254 and len(err.splitlines()) == 1 and words in err, err
    assert not (tmp_path / "store").exists()
