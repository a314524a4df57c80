"""Remote hosts for the ssh provider's tests: network namespaces of this machine, each
running an sshd of the test's own on its namespace address (198.18.0.0/15), reached
with a key made for the test. The provider sees only ssh: an address, a port, a key.

Names start with `sshlab-` (namespaces), `slab` (bridge, veths), so the harness's own
reaper (`cl-` names) never mistakes them for a run's, and the lab removes exactly what
it made.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

SSHD = "/usr/sbin/sshd"


def sh(*argv: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), input=input, capture_output=True, text=True, check=check)


@dataclass
class LabHost:
    name: str
    netns: str
    address: str
    sshd: subprocess.Popen | None = None


class SshLab:
    """`n` hosts; `up()` makes them, `down()` removes them (and everything else it made)."""

    def __init__(self, n: int, tmp: Path):
        from harness.cluster.netns import _pick_subnet

        self.tag = f"{os.getpid() % 65536:04x}"
        self.tmp = tmp
        self.net = _pick_subnet(self.tag + "00")
        self.bridge = f"slab{self.tag}"
        self.gateway = str(self.net.network_address + 1)
        self.hosts = [LabHost(name=f"h{i}", netns=f"sshlab-{self.tag}-h{i}", address=str(self.net.network_address + 10 + i))
                      for i in range(1, n + 1)]
        self.key = tmp / "id_ed25519"
        self.wrong_key = tmp / "wrong_ed25519"
        self.known_hosts = tmp / "known_hosts"
        self.unreachable = str(self.net.network_address + 200)  # an address of the lab's net with no host
        self._rule: list[str] | None = None
        self._made_run_sshd = False
        self.keys_dir: Path | None = None

    def up(self) -> "SshLab":
        try:
            self._up()
        except BaseException:
            self.down()
            raise
        return self

    def _up(self) -> None:
        for k in (self.key, self.wrong_key):
            sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "chaoslock-test", "-f", str(k))
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.tmp / "host_ed25519"))
        # sshd reads a user's keys as that user: a dir of its own that every user can read
        self.keys_dir = Path(tempfile.mkdtemp(prefix="chaoslock-sshlab-keys-"))
        self.keys_dir.chmod(0o755)
        shutil.copy(f"{self.key}.pub", self.keys_dir / "authorized_keys")
        (self.keys_dir / "authorized_keys").chmod(0o644)
        if not os.path.isdir("/run/sshd"):  # sshd's privilege separation dir
            os.makedirs("/run/sshd", mode=0o755)
            self._made_run_sshd = True
        sh("ip", "link", "add", self.bridge, "type", "bridge")
        sh("ip", "addr", "add", f"{self.gateway}/{self.net.prefixlen}", "dev", self.bridge)
        sh("ip", "link", "set", self.bridge, "up")
        if "-P FORWARD ACCEPT" not in sh("iptables", "-w", "-S", "FORWARD").stdout.splitlines():
            self._rule = ["FORWARD", "-s", str(self.net), "-d", str(self.net), "-m", "comment", "--comment",
                          f"sshlab-{self.tag}", "-j", "ACCEPT"]
            sh("iptables", "-w", "-I", *self._rule)
        for i, h in enumerate(self.hosts, 1):
            veth = f"slab{self.tag}v{i}"
            sh("ip", "netns", "add", h.netns)
            sh("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", h.netns)
            sh("ip", "link", "set", veth, "master", self.bridge, "up")
            for cmd in (["addr", "add", f"{h.address}/{self.net.prefixlen}", "dev", "eth0"], ["link", "set", "eth0", "up"],
                        ["link", "set", "lo", "up"], ["route", "add", "default", "via", self.gateway]):
                sh("ip", "-n", h.netns, *cmd)
            cfg = self.tmp / f"sshd_{h.name}.conf"
            cfg.write_text("\n".join([
                f"ListenAddress {h.address}", "Port 22", f"HostKey {self.tmp / 'host_ed25519'}",
                f"AuthorizedKeysFile {self.keys_dir / 'authorized_keys'}", "StrictModes no", "UsePAM no",
                "PermitRootLogin prohibit-password", "PasswordAuthentication no", "KbdInteractiveAuthentication no",
                "PidFile none", "MaxSessions 64", "MaxStartups 64:30:128", "LogLevel ERROR", ""]))
            h.sshd = subprocess.Popen(["ip", "netns", "exec", h.netns, SSHD, "-D", "-e", "-f", str(cfg)],
                                      stdout=subprocess.DEVNULL, stderr=open(self.tmp / f"sshd_{h.name}.log", "ab"),
                                      start_new_session=True)
        deadline = time.monotonic() + 20
        for h in self.hosts:
            while sh("ip", "netns", "exec", h.netns, "bash", "-c", f"exec 3<>/dev/tcp/{h.address}/22", check=False).returncode:
                if h.sshd.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"sshd on {h.address} did not start: {(self.tmp / f'sshd_{h.name}.log').read_text()}")
                time.sleep(0.1)

    def flags(self, n: int | None = None, *, key: Path | None = None, user: str | None = None) -> list[str]:
        """`chaos run` flags for the first n hosts."""
        hosts = ",".join(h.address for h in self.hosts[:n])
        out = ["--cluster", "ssh", "--hosts", hosts, "--ssh-key", str(key or self.key),
               "--ssh-known-hosts", str(self.known_hosts)]
        return out + (["--ssh-user", user] if user else [])

    def settings(self, n: int | None = None) -> dict:
        """spec.ssh for the first n hosts."""
        return {"hosts": [h.address for h in self.hosts[:n]], "key": str(self.key), "known_hosts": str(self.known_hosts)}

    def on(self, host: LabHost, command: str) -> subprocess.CompletedProcess:
        """A shell command inside one host's namespace (the tests' own look, never the provider's)."""
        return sh("ip", "netns", "exec", host.netns, "sh", "-c", command, check=False)

    def down(self) -> None:
        for h in self.hosts:
            if h.sshd is not None and h.sshd.poll() is None:
                os.killpg(h.sshd.pid, signal.SIGTERM)
                try:
                    h.sshd.wait(5)
                except subprocess.TimeoutExpired:
                    os.killpg(h.sshd.pid, signal.SIGKILL)
                    h.sshd.wait(5)
            sh("ip", "netns", "delete", h.netns, check=False)
        for i in range(1, len(self.hosts) + 1):
            sh("ip", "link", "delete", f"slab{self.tag}v{i}", check=False)
        sh("ip", "link", "delete", self.bridge, check=False)
        if self._rule:
            sh("iptables", "-w", "-D", *self._rule, check=False)
            self._rule = None
        if self._made_run_sshd:
            shutil.rmtree("/run/sshd", ignore_errors=True)
            self._made_run_sshd = False
        if self.keys_dir is not None:
            shutil.rmtree(self.keys_dir, ignore_errors=True)
            self.keys_dir = None


def lab_leftovers(lab: SshLab) -> list[str]:
    """What a run may have left on the lab's hosts: its processes, chains, files."""
    out = []
    for h in lab.hosts:
        r = lab.on(h, "iptables -w -S | grep -i chaoslock; ls /dev/shm/chaoslock-ssh 2>/dev/null")
        out += [f"{h.name}: {line}" for line in r.stdout.splitlines() if line.strip()]
    for d in os.listdir("/proc"):  # processes of a run: its id in their environment or title
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            env = Path(f"/proc/{d}/environ").read_bytes()
            cmd = Path(f"/proc/{d}/cmdline").read_bytes()
        except OSError:
            continue
        if b"CHAOSLOCK_RUN=" in env or b"chaos-run=" in cmd:
            shown = cmd.replace(bytes(1), b" ").decode(errors="replace")[:120]
            out.append(f"process {d}: {shown}")
    return out


def main(argv: list[str]) -> int:
    """python -m tests.integration.sshlab N CMD...: N lab hosts up, CMD run with the lab's
    --cluster ssh flags appended, the lab down; CMD's exit status (the nightly workflow's
    ssh job, and a by-hand try of the provider)."""
    import sys
    import tempfile

    if len(argv) < 2 or not argv[0].isdigit():
        print("usage: python -m tests.integration.sshlab N CMD [ARGS...]", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="chaoslock-sshlab-") as tmp:
        lab = SshLab(int(argv[0]), Path(tmp)).up()
        try:
            return subprocess.run([*argv[1:], *lab.flags()]).returncode
        finally:
            lab.down()


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
