"""Files inside a directory, and only there: how chaoslock reads and writes a run dir.

A run dir (and the store around it) is data from outside: servers write logs into it, runs
are copied in from CI, a store may be shared. Whoever can write there can plant a symlink,
and chaoslock often runs as root: tailing `RUN/nodes/n1.log -> /etc/shadow` into
report.html, or writing ops.csv through `RUN/ops.csv -> /etc/passwd`, would hand them any
file on the machine. Hence two rules:

- a file read from a run dir (or served from the store) must resolve inside it and be a
  regular file (a FIFO would block the reader): `inside`, `open_inside`, `read_inside`.
  The path is checked, then the opened descriptor, so a link swapped in between is caught.
- a file written into one replaces its name: a temp file created exclusively (O_EXCL) in
  the same directory, then os.replace, which replaces a link instead of writing through it
  and leaves readers the old file or the new one, never half: `atomic_open`, `write_atomic`.

Links that resolve inside are fine: store/latest is one.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path
from typing import IO, Iterator

from harness.core.errors import BadArgument

def _within(root_real: str, real: str) -> bool:
    return real == root_real or real.startswith(root_real.rstrip(os.sep) + os.sep)


def is_inside(root: str | os.PathLike, path: str | os.PathLike) -> bool:
    """Whether realpath(path) is realpath(root) or lies under it (path need not exist)."""
    return _within(os.path.realpath(root), os.path.realpath(path))


def inside(root: str | os.PathLike, path: str | os.PathLike, real: str | None = None) -> Path:
    """realpath(path) (or `real`, what it was found to be), if it is realpath(root) or lies
    under it; otherwise a BadArgument naming `path`, where it leads and the fix. `path`
    need not exist."""
    real = real or os.path.realpath(path)
    if not _within(os.path.realpath(root), real):
        raise BadArgument(f"{path} resolves to {real}, outside {root}; chaoslock reads and writes only files "
                          f"inside it: replace the link with the file itself, or remove it")
    return Path(real)


def _check_fd(root: str | os.PathLike | None, fd: int, path: str | os.PathLike) -> None:
    """Repeat the check on what was really opened (Linux names it in /proc/self/fd)."""
    try:
        real = os.readlink(f"/proc/self/fd/{fd}").removesuffix(" (deleted)")
    except OSError:  # no /proc: the check on the path stands alone
        return
    if root is not None and real.startswith(os.sep):
        inside(root, path, real)


def open_inside(root: str | os.PathLike | None, path: str | os.PathLike) -> IO[bytes]:
    """`path` opened for binary reading, if it resolves inside `root` (None: a file the user
    named directly, any place) and is a regular file; otherwise a BadArgument naming it and
    the fix (a FIFO or device is never read, so it cannot block). OSError as open() raises
    it (missing, no permission)."""
    if root is not None:
        inside(root, path)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    try:
        _check_fd(root, fd, path)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise BadArgument(f"{path} is not a regular file; replace it with the file chaoslock wrote, or remove it")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_inside(root: str | os.PathLike | None, path: str | os.PathLike) -> bytes:
    """The bytes of `path`, under open_inside's checks (the same errors)."""
    with open_inside(root, path) as f:
        return f.read()


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", *, root: str | os.PathLike | None = None,
                encoding: str = "utf-8", newline: str | None = None) -> Iterator[IO]:
    """A file to write `path`'s new content into ("w" text, "wb" bytes); a clean exit
    replaces `path` (a link there is replaced, its target untouched), an exception leaves
    `path` as it was and removes the temp file. The temp file is created with O_EXCL in
    `path`'s directory, reached through that directory's descriptor, so no link, planted
    before or during the write, is written through; it gets open()'s permissions (0666 less
    the umask), not mkstemp's 0600. `root`: `path`'s parent must resolve inside it (else a
    BadArgument). No fsync: a crash may lose the new content, never leave half of it."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open writes a whole file: mode 'w' or 'wb', not {mode!r}")
    path = Path(path)
    if root is not None:
        inside(root, path.parent)
    dfd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        _check_fd(root, dfd, path.parent)
        tmp = f".{path.name[:200]}.{secrets.token_hex(8)}.tmp"  # 64 random bits: nobody plants it first
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666, dir_fd=dfd)
        try:
            text = {} if "b" in mode else {"encoding": encoding, "newline": newline}
            with os.fdopen(fd, mode, **text) as f:
                yield f
            try:
                os.replace(tmp, path.name, src_dir_fd=dfd, dst_dir_fd=dfd)
            except IsADirectoryError:
                raise BadArgument(f"{path} is a directory; remove it so chaoslock can write the file") from None
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
            raise
    finally:
        os.close(dfd)


def write_atomic(path: str | os.PathLike, data: str | bytes, *, root: str | os.PathLike | None = None) -> Path:
    """Replace `path` with `data` (str is written as UTF-8), as atomic_open does; return `path`."""
    with atomic_open(path, "wb" if isinstance(data, bytes) else "w", root=root) as f:
        f.write(data)
    return Path(path)
