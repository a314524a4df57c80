"""timewarp against real processes: a C program reading clock_gettime, and a real etcd member.

Each test starts its own process and kills it in a finally; the patch lives only in that
process's memory, so nothing is left on the host.
"""

from __future__ import annotations

import base64
import email.utils
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from harness.cluster import timewarp
from tests.conftest import installed

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def need_timewarp():
    reason = timewarp.supported()
    if reason:
        pytest.skip(reason)


CLOCK_PROGRAM = r"""
#include <stdio.h>
#include <time.h>
#include <sys/time.h>
#include <unistd.h>
int main(void) {
    for (;;) {
        struct timespec r, m; struct timeval tv;
        clock_gettime(CLOCK_REALTIME, &r);
        clock_gettime(CLOCK_MONOTONIC, &m);
        gettimeofday(&tv, 0);
        printf("%ld.%09ld %ld.%09ld %ld.%06ld %ld\n", (long)r.tv_sec, r.tv_nsec,
               (long)m.tv_sec, m.tv_nsec, (long)tv.tv_sec, (long)tv.tv_usec, (long)time(0));
        fflush(stdout);
        usleep(100000);
    }
}
"""


class Clocks:
    """The C program's latest line, against the host clocks read at the same moment."""

    def __init__(self, tmp_path: Path):
        installed(shutil.which("gcc") is not None, "gcc (the machine's base image has it)")
        src, exe = tmp_path / "clk.c", tmp_path / "clk"
        src.write_text(CLOCK_PROGRAM)
        subprocess.run(["gcc", "-O2", "-o", str(exe), str(src)], check=True)
        self.proc = subprocess.Popen([str(exe)], stdout=subprocess.PIPE, text=True, bufsize=1)
        self.pid = self.proc.pid
        self.read()

    def read(self) -> dict[str, float]:
        """Skew of each clock after the next line that starts after this call."""
        start = time.time()
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise AssertionError("clock program died")
            real, mono, tod, secs = (float(x) for x in line.split())
            now, now_mono = time.time(), time.monotonic()
            if now - start > 0.25:  # a line written after we asked, not a buffered one
                return {"real": real - now, "mono": mono - now_mono, "tod": tod - now,
                        "time": secs - now}

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def clocks(tmp_path):
    c = Clocks(tmp_path)
    try:
        yield c
    finally:
        c.close()


def test_stub_bytes_match_their_source(tmp_path):
    installed(shutil.which("as") is not None and shutil.which("objcopy") is not None, "binutils (as, objcopy; with gcc)")
    (tmp_path / "s.s").write_text(timewarp._STUB_ASM)
    subprocess.run(["as", "--64", "-o", str(tmp_path / "s.o"), str(tmp_path / "s.s")], check=True)
    subprocess.run(["objcopy", "-O", "binary", "-j", ".text", str(tmp_path / "s.o"),
                    str(tmp_path / "s.bin")], check=True)
    code = (tmp_path / "s.bin").read_bytes()[timewarp._CODE_AT:]
    assert code == timewarp._STUB_CODE


def test_c_program_realtime_jumps_and_returns(clocks):
    assert timewarp.get_offset(clocks.pid) is None
    assert abs(clocks.read()["real"]) < 0.5

    timewarp.set_offset(clocks.pid, 3600)
    assert timewarp.get_offset(clocks.pid) == 3600.0
    skew = clocks.read()
    for name in ("real", "tod", "time"):
        assert abs(skew[name] - 3600) < 1.5, (name, skew)
    assert abs(skew["mono"]) < 0.5, "monotonic must stay true unless asked"

    timewarp.set_offset(clocks.pid, 0)
    assert timewarp.get_offset(clocks.pid) == 0.0
    skew = clocks.read()
    for name in ("real", "tod", "time"):
        assert abs(skew[name]) < 1.5, (name, skew)


def test_c_program_monotonic_on_request(clocks):
    timewarp.set_offset(clocks.pid, -12.25, monotonic=True)
    skew = clocks.read()
    assert abs(skew["real"] + 12.25) < 0.5 and abs(skew["mono"] + 12.25) < 0.5, skew
    timewarp.set_offset(clocks.pid, 5)  # monotonic off again
    skew = clocks.read()
    assert abs(skew["real"] - 5) < 0.5 and abs(skew["mono"]) < 0.5, skew


def test_c_program_repeated_updates(clocks):
    for i in range(10):
        offset = (i + 1) * 100.5 * (1 if i % 2 == 0 else -1)
        timewarp.set_offset(clocks.pid, offset)
        assert timewarp.get_offset(clocks.pid) == offset
        assert abs(clocks.read()["real"] - offset) < 0.5, (i, offset)
    timewarp.set_offset(clocks.pid, 0)
    assert abs(clocks.read()["real"]) < 0.5


def test_unknown_pid_is_a_clear_error():
    from harness.core.errors import NemesisError

    proc = subprocess.Popen(["true"])
    proc.wait()
    with pytest.raises(NemesisError, match=f"process {proc.pid}"):
        timewarp.set_offset(proc.pid, 10)
    assert timewarp.get_offset(proc.pid) is None


# --- a real etcd member -----------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Etcd:
    def __init__(self, tmp_path: Path):
        binary = shutil.which("etcd")
        installed(binary is not None, "etcd (apt package etcd-server)")
        client, peer = free_port(), free_port()
        self.url = f"http://127.0.0.1:{client}"
        peer_url = f"http://127.0.0.1:{peer}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("ETCD_")}
        self.log = open(tmp_path / "etcd.log", "w")
        self.proc = subprocess.Popen(
            [binary, "--name", "t", "--data-dir", str(tmp_path / "data"),
             "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
             "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
             "--initial-cluster", f"t={peer_url}"],
            env=env, stdout=self.log, stderr=subprocess.STDOUT)
        self.pid = self.proc.pid
        deadline = time.monotonic() + 20
        while True:
            try:
                self.put("boot", "1")
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"etcd did not start; see {tmp_path / 'etcd.log'}")
                time.sleep(0.2)

    def skew(self) -> float:
        """etcd's wall clock minus ours, from the Date header (1 s resolution)."""
        before = time.time()
        with urllib.request.urlopen(self.url + "/version", timeout=5) as r:
            date = email.utils.parsedate_to_datetime(r.headers["Date"]).timestamp()
        return date - before

    def _post(self, path: str, body: dict) -> dict:
        req = urllib.request.Request(self.url + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=5) as r:
            return json.loads(r.read())

    def put(self, key: str, value: str) -> None:
        self._post("/v3/kv/put", {"key": b64(key), "value": b64(value)})

    def get(self, key: str) -> str | None:
        kvs = self._post("/v3/kv/range", {"key": b64(key)}).get("kvs", [])
        return base64.b64decode(kvs[0]["value"]).decode() if kvs else None

    def serves_for(self, seconds: float, tag: str) -> int:
        n, deadline = 0, time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.put(f"k-{tag}", str(n))
            assert self.get(f"k-{tag}") == str(n)
            n += 1
            time.sleep(0.05)
        assert self.proc.poll() is None
        return n

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self.log.close()


def b64(s: str) -> str:
    return base64.b64encode(s.encode()).decode()


@pytest.fixture
def etcd(tmp_path):
    e = Etcd(tmp_path)
    try:
        yield e
    finally:
        e.close()


def test_etcd_date_jumps_two_hours_and_keeps_serving(etcd):
    assert abs(etcd.skew()) < 2.5
    timewarp.set_offset(etcd.pid, 7200)
    assert abs(etcd.skew() - 7200) < 2.5
    assert etcd.serves_for(5, "ahead") > 10
    assert abs(etcd.skew() - 7200) < 2.5

    timewarp.set_offset(etcd.pid, 0)
    assert abs(etcd.skew()) < 2.5
    assert etcd.serves_for(5, "back") > 10


def test_etcd_repeated_jumps(etcd):
    for i in range(10):
        offset = 600.0 * (i + 1) * (1 if i % 2 == 0 else -1)
        timewarp.set_offset(etcd.pid, offset)
        assert timewarp.get_offset(etcd.pid) == offset
        assert abs(etcd.skew() - offset) < 2.5, (i, offset)
        etcd.put("rep", str(i))
        assert etcd.get("rep") == str(i)
    timewarp.set_offset(etcd.pid, 0)
    assert abs(etcd.skew()) < 2.5
    assert etcd.serves_for(1, "end") > 2
