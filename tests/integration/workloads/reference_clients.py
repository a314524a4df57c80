"""How the reference-client tests (test_client_go.py, test_client_java.py) drive a client of
clients/ by hand: one process spoken to over the client protocol, so that one acquire can wait
while the test acts, and what a client says of its options when the harness starts it."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time
from typing import Callable

from tests.conftest import eventually
from harness.core.options import resolve
from workloads.external import LOG_ENV, ExternalClient


def said_at_start(tmp_path, monkeypatch, command: str, servers: str, option: str,
                  words: Callable[[str], str], **options) -> list[str]:
    """What the client says on stderr of `option` when the harness starts it with these -o
    options, resolved as `chaos run` resolves them (no servers: its init only parses them);
    `words` takes the part of such a line that says it."""
    monkeypatch.setenv(LOG_ENV, str(tmp_path / "worker.log"))
    typed, _ = resolve(ExternalClient, [], {"command": command, "servers": servers, **options})
    c = ExternalClient(typed)
    try:
        c.open([])
    finally:
        c.close()
    stderr = tmp_path / "worker.log.client-stderr"  # written by a thread: wait for the line
    return eventually(lambda: [words(line) for line in stderr.read_text().splitlines() if option in line], timeout=5)


class Child:
    """One client process driven by hand. Its launcher execs the client, so SIGSTOP to its
    pid stops the client (as pause-waiter does); `init` is the reply to its init."""

    def __init__(self, argv: list[str], servers: list[dict], init_timeout: float = 10.0, **options):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.id = 0
        self.buf = b""
        self.init = self.call({"op": "init", "servers": servers, "options": options}, timeout=init_timeout)
        assert self.init["type"] == "ok", self.init

    def send(self, req):
        self.id += 1
        self.p.stdin.write((json.dumps({"id": self.id, **req}) + "\n").encode())
        self.p.stdin.flush()

    def reply(self, timeout=10.0):
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            assert select.select([self.p.stdout], [], [], max(0.0, deadline - time.monotonic()))[0], "no reply"
            chunk = self.p.stdout.read1(65536)
            assert chunk, "the client exited"
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        rep = json.loads(line)
        assert rep["id"] == self.id, rep
        return rep

    def call(self, req, timeout=10.0):
        self.send(req)
        return self.reply(timeout)

    def close(self):
        if self.p.poll() is None:
            os.kill(self.p.pid, signal.SIGCONT)  # a stopped client cannot die of SIGKILL until continued
            self.p.kill()
        self.p.wait(5)
