"""Paths from the command line, checked before anything starts: one sentence, exit 254.

A path the user gives (`--store`, a run dir, `--junit`, `--expectations`, `--hosts @FILE`,
...) can be wrong in ways that pathlib turns into tracebacks, hangs or damage: a name the
kernel refuses (ENAMETOOLONG: one name over 255 bytes, or over 4095 in all), a directory
that cannot be read or written (permissions, a read-only mount, `chattr +i`), a FIFO (an
open for reading blocks until a writer comes), a device (an atomic write would replace
/dev/null), a file where a directory is needed or the reverse, a name that is not UTF-8
(it ends up in spec.json, results.json and the reports, which are UTF-8). `check_path` finds each with
stat and non-blocking opens, never a blocking open and never a byte written into an
existing file, and raises a BadArgument naming the flag, the path and the fix. `read_text`
reads a small text file (hosts, expectations, rows) the same way and refuses bytes that are
not UTF-8.

What cannot be refused to root: a mode-000 file or directory, which root reads and writes
anyway (CAP_DAC_OVERRIDE). For root only a read-only mount, an immutable or append-only
attribute, or a path that cannot exist (through a file, too long) stops a read or a write;
permission checks bite for everyone else, and for root without CAP_DAC_OVERRIDE.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path
from typing import NoReturn

from harness.core.errors import BadArgument

NAME_MAX = 255  # bytes in one name (ext4, xfs, tmpfs, btrfs)
PATH_MAX = 4096  # bytes in a path given to the kernel, with its NUL
ROOM = 256  # bytes a command appends below a directory it is given (names, temp files)

DIR, FILE, EITHER = "directory", "file", "file or directory"

_HINTS = {(DIR, False): "give a directory you can read", (DIR, True): "give a directory you can write to",
          (FILE, False): "give a file you can read", (FILE, True): "give a file name in a directory you can write to",
          (EITHER, False): "give a file or directory you can read"}

_WHY = {errno.EACCES: "permission denied",
        errno.EPERM: "operation not permitted: immutable or append-only? lsattr -d shows it, chattr -i clears it",
        errno.EROFS: "a read-only file system", errno.ELOOP: "a loop of symbolic links",
        errno.ENOSPC: "no space left on the device", errno.EDQUOT: "over the disk quota"}


def show(path: str | os.PathLike) -> str:
    """`path` as a message names it: whole, or its start and end when it is very long."""
    s = os.fsdecode(path)
    return s if len(s) <= 160 else f"{s[:100]}...{s[-40:]} ({len(os.fsencode(s))} bytes)"


def _label(flag: str | None, path: str | os.PathLike) -> str:
    """How a message names the path: as typed, after its flag ("--store DIR", "--hosts @FILE")."""
    if not flag:
        return show(path)
    return f"{flag}{show(path)}" if flag.endswith("@") else f"{flag} {show(path)}"


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISREG, "a file"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
                       (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a file"


def _why(e: OSError) -> str:
    return _WHY.get(e.errno, e.strerror or str(e))


def too_long(path: str | os.PathLike, room: int = 0) -> str | None:
    """Why the kernel would refuse `path` as too long (with `room` bytes appended below
    it), or None."""
    raw = os.fsencode(path)
    longest = max(raw.split(b"/"), key=len)
    if len(longest) > NAME_MAX:
        return (f"is too long: the name {show(os.fsdecode(longest[:40]))}... in it is {len(longest)} bytes, "
                f"and a name may have at most {NAME_MAX}")
    full = len(os.fsencode(os.path.abspath(os.fsdecode(path))))
    if full + room >= PATH_MAX:
        room_said = f" with the {room} bytes chaoslock may add below it" if room else ""
        return f"is too long: {full} bytes as an absolute path{room_said}, and a path may have at most {PATH_MAX - 1}"
    return None


def _unreachable(path: str | os.PathLike, e: OSError) -> str:
    """Why stat(path) failed, for a path that may exist: which part is in the way."""
    if e.errno == errno.ENOTDIR:
        for q in reversed(Path(os.path.abspath(os.fsdecode(path))).parents):
            try:
                mode = os.stat(q).st_mode
            except OSError:
                break
            if not stat.S_ISDIR(mode):
                return f"leads through {show(q)}, which is {_kind(mode)}, not a directory"
        return "leads through something that is not a directory"
    if e.errno == errno.EACCES:
        return "cannot be reached (permission denied on a directory on the way)"
    return f"cannot be reached ({_why(e)})"


def _probe_dir(d: str | os.PathLike) -> None:
    """Create and remove a file in `d` (OSError if that cannot be done): what a run does."""
    with tempfile.TemporaryFile(dir=d):
        pass


def check_path(path: str | os.PathLike, *, flag: str | None = None, want: str = FILE, write: bool = False,
               create: bool = False, missing_ok: bool = False, replaces: tuple[str, ...] = (),
               hint: str | None = None) -> Path:
    """`path` as a Path if it is what a command needs, else a BadArgument of one sentence:
    "{flag} {path} {what is wrong}; {what to do}".

    want: DIR, FILE or EITHER (a FIFO, device or socket is never either). write: the command
    writes there (a directory: files are created in it, probed by creating and removing one;
    a file: it is replaced atomically, so its directory must take a new file, and an existing
    one must open for writing, which an immutable or append-only one does not). create: a
    missing directory is fine (made and removed again by the probe; the command makes it).
    missing_ok: a missing file is fine if its directory exists (a write always allows that).
    replaces: names of files in a DIR that the command replaces (each, if there, must open
    for writing). hint: what to do, for the problems whose fix is choosing another path.
    Nothing is read, nothing existing is changed, nothing blocks."""
    label = _label(flag, path)
    hint = hint or _HINTS.get((want, write), _HINTS[(want, False)])

    def no(problem: str, fix: str | None = None) -> NoReturn:
        raise BadArgument(f"{label} {problem}; {fix or hint}")

    if not os.fsdecode(path):
        no("is empty", f"give a {want}")
    try:
        os.fsdecode(path).encode("utf-8")
    except UnicodeEncodeError:  # bytes the filesystem took but that are not UTF-8 (surrogateescape)
        no("has a name that is not UTF-8", "rename it: chaoslock writes the paths it is given into UTF-8 JSON and reports")
    if why := too_long(path, ROOM if want == DIR or write else 0):
        no(why, "give a shorter path")
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as e:
        no(_unreachable(path, e))
    if st is None:
        _missing(path, want, write, create, missing_ok, no)
        return Path(path)
    mode = st.st_mode
    if want == DIR and not stat.S_ISDIR(mode):
        no(f"is {_kind(mode)}, not a directory")
    if want == FILE and not stat.S_ISREG(mode):
        no("is a directory, not a file" if stat.S_ISDIR(mode) else f"is {_kind(mode)}, not a regular file")
    if want == EITHER and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        no(f"is {_kind(mode)}, not a regular file or a directory")
    is_dir = stat.S_ISDIR(mode)
    try:
        if is_dir:
            os.close(os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))
            os.stat(os.path.join(path, "."))  # search permission: the files in it can be reached
        else:
            os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY))
    except OSError as e:
        no(f"cannot be read ({_why(e)})")
    if not write:
        return Path(path)
    try:
        if is_dir:
            _probe_dir(path)
        else:
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY))
            _probe_dir(os.path.dirname(os.path.abspath(path)))
    except OSError as e:
        no(f"cannot be written ({_why(e)})")
    for name in replaces if is_dir else ():
        q = os.path.join(path, name)
        try:
            if stat.S_ISREG(os.lstat(q).st_mode):
                os.close(os.open(q, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY | os.O_NOFOLLOW))
        except FileNotFoundError:
            pass
        except OSError as e:
            no(f"holds {name}, which cannot be replaced ({_why(e)})")
    return Path(path)


def _missing(path, want: str, write: bool, create: bool, missing_ok: bool, no) -> None:
    """A path that does not exist: refused, or (create, write, missing_ok) its nearest
    existing directory checked the way the command will use it."""
    if want == DIR and create:
        p = Path(path)
        made = []
        try:
            for q in (p, *p.parents):
                if os.path.lexists(q):
                    break
                made.append(q)
            p.mkdir(parents=True)
            _probe_dir(p)
        except OSError as e:
            no(f"cannot be created ({_why(e)})" if e.errno != errno.ENOTDIR else _unreachable(path, e))
        finally:
            for q in made:
                try:
                    q.rmdir()
                except OSError:
                    pass
        return
    if want == DIR or not (write or missing_ok):
        no("does not exist")
    parent = os.path.dirname(os.path.abspath(path))
    try:
        st = os.stat(parent)
    except OSError:
        no(f"cannot be made: its directory {show(parent)} does not exist", "create it or give another path")
    if not stat.S_ISDIR(st.st_mode):
        no(f"cannot be made: {show(parent)} is {_kind(st.st_mode)}, not a directory")
    try:
        if write:
            _probe_dir(parent)
        else:
            os.stat(os.path.join(parent, "."))
    except OSError as e:
        no(f"cannot be made in {show(parent)} ({_why(e)})")


def check_program(command: str, flag: str) -> None:
    """The program a client command line starts (its first word, as subprocess will run
    it): a name found on PATH, or a path to an executable regular file; else one sentence.
    Checked before any server starts, so a typo does not cost a cluster's start-up."""
    import shlex
    import shutil

    try:
        argv = shlex.split(command)
    except ValueError as e:  # "No closing quotation"
        raise BadArgument(f"{flag} {command!r} is not a command line ({e}); quote it as a shell would") from None
    if not argv:
        raise BadArgument(f"{flag} needs a command: the program and its arguments")
    prog = argv[0]
    if "/" not in prog:
        if shutil.which(prog) is None:
            raise BadArgument(f"{flag}: the program {prog!r} is not on PATH; give its path (./{prog}) or install it")
        return
    check_path(prog, flag=f"{flag}: the program", want=FILE, hint="give the path of the client program")
    if not os.access(prog, os.X_OK, effective_ids=os.access in os.supports_effective_ids):
        raise BadArgument(f"{flag}: the program {show(prog)} is not executable; chmod +x it, or give the one that is")


def read_text(path: str | os.PathLike, *, flag: str | None = None, hint: str | None = None,
              what: str = "text") -> str:
    """The UTF-8 text of the regular file `path` (check_path's checks first), or one
    sentence naming it: not there, not a file, not readable, not UTF-8 (with its line)."""
    from harness.core.safefile import read_inside

    p = check_path(path, flag=flag, want=FILE, hint=hint)
    label = _label(flag, path)
    try:
        raw = read_inside(None, p)
    except OSError as e:
        raise BadArgument(f"{label} cannot be read ({_why(e)}); {hint or _HINTS[(FILE, False)]}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise BadArgument(f"{label} is not UTF-8 (line {line}, byte 0x{raw[e.start]:02x}); {what} must be UTF-8: "
                          f"save it as UTF-8") from None
