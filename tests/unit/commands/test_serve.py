"""`chaos serve` (harness/commands/serve.py) serves only what resolves inside the store, only to a Host
of 127.0.0.1:PORT or localhost:PORT (issue 25). The real command, as a subprocess on a free
port, over a store with links out of it; no lock servers."""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys

import pytest

from results import store
from tests.conftest import ROOT, eventually

SECRET = "SECRET-91c2-outside-the-store"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("serve")
    root, out = tmp / "store", tmp / "outside"
    run = root / "t" / "20260101T000000"
    (run / "nodes").mkdir(parents=True)
    out.mkdir()
    (out / "secret.txt").write_text(SECRET)
    (run / "report.html").write_text("<html>the report</html>")
    (run / "nodes" / "n1.log").symlink_to(out / "secret.txt")
    (run / "nodes" / "n2.log").write_text("n2 ready\n")
    store.write_json(run / "results.json", {"summary": {"valid": "unknown", "interrupted": True}})
    store.link_latest(root, run)
    (root / "rootlink").symlink_to("/")
    (root / "outlink").symlink_to(out / "secret.txt")
    (root / "outdir").symlink_to(out)
    os.mkfifo(root / "fifo")
    port = free_port()
    log = open(tmp / "serve.log", "w")  # a pipe nobody reads would fill and stop the server
    proc = subprocess.Popen([sys.executable, "-m", "harness", "serve", "--store", str(root), "--port", str(port)],
                            cwd=ROOT, stdout=log, stderr=log)
    try:
        eventually(lambda: socket.create_connection(("127.0.0.1", port), timeout=1).close(), until=None)
        yield port, proc
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()


def get(port: int, path: str, host: str | None = None) -> tuple[int, dict, bytes]:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.putrequest("GET", path, skip_host=True)
        c.putheader("Host", f"127.0.0.1:{port}" if host is None else host)
        c.endheaders()
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        c.close()


@pytest.mark.parametrize("path", ["/rootlink/etc/hostname", "/rootlink/etc/passwd", "/outlink", "/outdir/secret.txt",
                                  "/t/20260101T000000/nodes/n1.log", "/fifo", "/rootlink/", "/outdir/"])
def test_nothing_outside_the_store_is_served(served, path):
    port, _ = served
    status, _, body = get(port, path)
    assert status == 404, (path, status, body[:200])
    assert SECRET.encode() not in body and b"root:" not in body and b"Traceback" not in body


@pytest.mark.parametrize("path, want", [("/t/20260101T000000/report.html", b"the report"),
                                        ("/latest/report.html", b"the report"),
                                        ("/latest/nodes/n2.log", b"n2 ready")])
def test_files_inside_the_store_are_served_with_nosniff(served, path, want):
    port, _ = served
    status, headers, body = get(port, path)
    assert status == 200 and want in body
    assert headers["x-content-type-options"] == "nosniff"


@pytest.mark.parametrize("host", ["evil.example", "evil.example:{port}", "127.0.0.1:1", "localhost.evil:{port}", ""])
def test_a_foreign_host_header_is_refused(served, host):
    port, _ = served
    status, headers, body = get(port, "/latest/report.html", host=host.format(port=port))
    assert status in (400, 403) and b"the report" not in body
    assert get(port, "/latest/report.html", host=f"localhost:{port}")[0] == 200


def test_the_index_is_current_and_marks_interrupted_runs(served):
    port, _ = served
    status, headers, body = get(port, "/")
    assert status == 200 and "text/html" in headers["content-type"]
    assert "UNKNOWN · INTERRUPTED" in body.decode() and "t/20260101T000000/report.html" in body.decode()
