"""What a child process writes is kept, up to a cap: its first bytes and its last ones.

A lock client under test (any program, any language) owns its stderr, and one that writes
in a loop filled a store with 4.2 GB in a 6 s run. Nothing a child controls may grow
without bound: its output goes through a `CappedLog`, which keeps the first HEAD bytes in
the file as they come, the last TAIL bytes in memory, counts what falls between, and on
close appends a line saying how much was dropped, then the tail. The beginning (how it
started) and the end (how it died) are the parts a reader needs.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import deque

HEAD = 1 << 20  # bytes kept from the start of a child's output
TAIL = 256 << 10  # bytes kept from its end


class CappedLog:
    """A byte sink over `path` (opened for append) that keeps at most head + tail bytes of
    what is written to it, plus one line on what was dropped. Thread-safe; never raises on
    write (a full disk must not stop a run: what cannot be written is counted as dropped)."""

    def __init__(self, path: str, *, head: int = HEAD, tail: int = TAIL):
        self.path = path
        self.head_left = head
        self.tail_max = tail
        self.tail: deque[bytes] = deque()
        self.tail_len = 0
        self.dropped = 0
        self.lock = threading.Lock()
        self.fd: int | None = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)

    def write(self, data: bytes | str) -> None:
        if isinstance(data, str):
            data = data.encode(errors="replace")
        with self.lock:
            if self.fd is None:
                return
            if self.head_left > 0:
                first, data = data[:self.head_left], data[self.head_left:]
                self.head_left -= len(first)
                try:
                    os.write(self.fd, first)
                except OSError:
                    self.dropped += len(first)
            if data:
                self.tail.append(data)
                self.tail_len += len(data)
                while self.tail_len - len(self.tail[0]) >= self.tail_max:  # whole chunks beyond the tail
                    old = self.tail.popleft()
                    self.tail_len -= len(old)
                    self.dropped += len(old)

    def flush(self) -> None:
        pass  # every write goes straight to the file or to the tail

    def close(self) -> None:
        """Write the note on what was dropped and the kept tail; later writes are ignored."""
        with self.lock:
            if self.fd is None:
                return
            tail = b"".join(self.tail)
            extra = max(0, len(tail) - self.tail_max)
            tail, dropped = tail[extra:], self.dropped + extra
            try:
                if dropped:
                    os.write(self.fd, f"\n[chaoslock: {dropped:,} bytes of this output were dropped here; the first "
                                      f"{HEAD >> 10} KiB and the last {self.tail_max >> 10} KiB are kept]\n".encode())
                if tail:
                    os.write(self.fd, tail)
            except OSError:
                pass
            os.close(self.fd)
            self.fd = None


def cap_file(path: str | os.PathLike, *, head: int = HEAD, tail: int = TAIL) -> int:
    """Cut a finished log that a child wrote directly (a server's) to its first `head` and
    last `tail` bytes, with the same note in between; return the bytes dropped (0: it was
    within the cap, or it cannot be read). Replaced atomically, never written through a link."""
    import tempfile

    try:
        size = os.lstat(path).st_size
        if size <= head + tail or os.path.islink(path):
            return 0
        with open(path, "rb") as f:
            first = f.read(head)
            f.seek(size - tail)
            last = f.read(tail)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), prefix=".capped-")
        with os.fdopen(fd, "wb") as out:
            out.write(first)
            out.write(f"\n[chaoslock: {size - head - tail:,} bytes of this log were dropped here; the first "
                      f"{head >> 10} KiB and the last {tail >> 10} KiB are kept]\n".encode())
            out.write(last)
        os.replace(tmp, path)
    except OSError:
        return 0
    return size - head - tail


def copy_capped(src: str | os.PathLike, dst: str | os.PathLike, *, head: int = HEAD, tail: int = TAIL) -> bool:
    """Copy a log that something else wrote (a container's, through a bind mount) to `dst`,
    its first `head` and last `tail` bytes with the note between. The source is opened
    without following a link and must be a regular file: a container that swapped its log
    for a link to /etc/shadow gets nothing copied. Returns whether it copied."""
    import stat

    try:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        out = CappedLog(str(dst), head=head, tail=tail)
        while chunk := os.read(fd, 1 << 20):
            out.write(chunk)
        out.close()
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def pump(fd: int, sink: CappedLog, *, name: str = "output") -> threading.Thread:
    """A daemon thread that copies pipe `fd` into `sink` until EOF, then closes both. The
    child never blocks on a full pipe: everything is read, only the kept part is stored."""

    def run() -> None:
        try:
            while True:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                sink.write(chunk)
        finally:
            try:
                os.close(fd)
            except OSError:
                pass
            sink.close()

    t = threading.Thread(target=run, name=f"capped-{name}", daemon=True)
    t.start()
    return t


class CappedHandler(logging.StreamHandler):
    """A logging handler writing to a CappedLog over `path`; closing it stores the tail."""

    def __init__(self, path: str):
        super().__init__(CappedLog(path))

    def close(self) -> None:
        super().close()
        self.stream.close()
