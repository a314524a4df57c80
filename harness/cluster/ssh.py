"""The ssh provider: the servers on the user's own hosts, driven from this machine over ssh.

Jepsen's model: one control node (here) and the hosts it reaches with the OpenSSH client,
one master connection per host (ControlMaster, reused by every command). Nothing here
assumes the hosts share this machine's files or processes; every command goes through
ssh, to ssh_helper.py, which the run ships to each host and runs there as root (sudo -n
when the user is not root):

  install    what a host lacks, from its own package manager (Debian: etcd-server,
             zookeeper, libfaketime, iptables); the valkey binary is copied over when the
             host has no valkey-server or redis-server. Packages stay installed.
  servers    started by the helper in sessions of their own, with CHAOSLOCK_RUN=<run id>
             in their environment, under BASE/<host>/<run id>/ on the host (data, configs, logs);
             their logs are copied into the run dir at the end.
  partition  iptables DROP rules in the run's own chain (chaoslock-<run id>) on each
             host, by address: a cut needs one lock server per host. Read back by
             connecting from the host (`reaches`).
  pause/kill SIGSTOP/SIGCONT/SIGKILL of the server's process group, by pid, over ssh.
  clock      libfaketime's timestamp file on the host (valkey), or the vDSO patch of
             timewarp.py, shipped beside the helper and run on the host (etcd, ZooKeeper).
  clients    on this machine, each a separate process the pause nemesis can stop; they
             reach the servers at the hosts' addresses.

`down` (also after Ctrl-C) and `chaos cluster down --all` (after a SIGKILL, from the run's
state.json) run the helper's `down` on every host: it stops only processes carrying the
run id, deletes only the run's chain and the two rules that jump to it, and removes only
BASE/<host>/<run id>.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from harness.core.contracts.cluster import ClientPlace, ClockInLog, Node, ServerKind, ShipsBinary, check_run_id
from harness.cluster.provider import FAKETIME_LIB, RUN_ENV, Group, ServerCluster
from harness.core.errors import BadArgument, ClusterError, MissingDependency
from harness.core.interrupts import quiet_group, shielded

HELPER = Path(__file__).with_name("ssh_helper.py")
TIMEWARP = Path(__file__).with_name("timewarp.py")
BASE = "/dev/shm/chaoslock-ssh"  # the helper's BASE on a host with /dev/shm (every Linux host)
PORT_STEP = 100  # a second server on one host listens 100 ports up
PEER_PORT, ELECTION_PORT = 2380, 3888
SSH_TIMEOUT_S = 30.0
SSH_ENV = "CHAOSLOCK_SSH"  # marks this machine's ssh clients and masters of a run
HOST = re.compile(r"(?:(?P<user>[a-z_][a-z0-9_.-]{0,31})@)?(?P<addr>[A-Za-z0-9.-]{1,253}|\[[0-9a-fA-F:]+\])(?::(?P<port>\d{1,5}))?")


@dataclass(frozen=True, slots=True, kw_only=True)
class Host:
    """One host as the user named it, and how to log in there."""

    name: str  # h1, h2, ... in the order given
    address: str
    user: str = "root"
    port: int = 22
    key: str | None = None
    known_hosts: str | None = None  # a known_hosts file of the user's choosing (default: ssh's own)

    @property
    def login(self) -> str:
        return f"{self.user}@{self.address}"

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__slots__}


def parse_hosts(ssh: Mapping[str, Any]) -> list[Host]:
    """The hosts of spec.ssh ({"hosts": [...], "user", "port", "key", "known_hosts"}), each
    `[user@]address[:port]`; a BadArgument naming the first bad one."""
    given = list(ssh.get("hosts") or [])
    if not given:
        raise BadArgument("--cluster ssh needs --hosts h1,h2,... (or --hosts @FILE, one host per line)")
    user, key = ssh.get("user") or "root", ssh.get("key")
    port = 22 if ssh.get("port") is None else ssh.get("port")
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise BadArgument(f"--ssh-port must be a port number (1-65535), not {port!r}")
    if key is not None and not os.path.isfile(key):
        raise BadArgument(f"--ssh-key {key} is not a file; give the private key ssh should use")
    known = ssh.get("known_hosts")
    hosts = []
    for i, h in enumerate(given, 1):
        m = HOST.fullmatch(str(h).strip())
        if m is None or (m.group("port") and not 1 <= int(m.group("port")) <= 65535):
            raise BadArgument(f"host {h!r} is not [user@]address[:port]")
        hosts.append(Host(name=f"h{i}", address=m.group("addr").strip("[]"), user=m.group("user") or user,
                          port=int(m.group("port") or port), key=key, known_hosts=known))
    dup = {h.address for h in hosts if sum(x.address == h.address for x in hosts) > 1}
    if dup:
        raise BadArgument(f"host {sorted(dup)[0]} is named twice; name each host once")
    return hosts


def read_hosts_file(path: str) -> list[str]:
    """`--hosts @FILE`: one host per line; blank lines and # comments are skipped. A file
    that cannot be read (harness/core/pathcheck.py) or is not UTF-8 is one sentence."""
    from harness.core.pathcheck import read_text

    lines = read_text(path, flag="--hosts @", hint="give a file of hosts, one per line",
                      what="a hosts file").splitlines()
    return [line.split("#", 1)[0].strip() for line in lines if line.split("#", 1)[0].strip()]


class Ssh:
    """Commands on one host through one reused master connection."""

    def __init__(self, host: Host, control_dir: Path | None, run_id: str):
        self.host = host
        self.control_dir = control_dir
        # ssh and its master connection carry the run id (not as CHAOSLOCK_RUN, which the
        # helper's `down` stops: on a host that is also this machine it would stop its own
        # ssh), so `chaos cluster down` finds a master that a SIGKILLed run left
        env = {k: v for k, v in os.environ.items() if k != RUN_ENV}
        self.env = {**env, SSH_ENV: run_id}

    def argv(self) -> list[str]:
        h = self.host
        opts = ["-o", "BatchMode=yes", "-o", "ConnectTimeout=5", "-o", "ServerAliveInterval=5",
                "-o", "StrictHostKeyChecking=accept-new", "-o", "LogLevel=ERROR", "-p", str(h.port)]
        if self.control_dir is None:  # one-off connections (the checks before a run has a state dir)
            opts += ["-o", "ControlMaster=no", "-o", "ControlPath=none"]
        else:
            opts += ["-o", "ControlMaster=auto", "-o", f"ControlPath={self.control_dir}/%C", "-o", "ControlPersist=30"]
        if h.key:
            opts += ["-i", h.key, "-o", "IdentitiesOnly=yes"]
        if h.known_hosts:
            opts += ["-o", f"UserKnownHostsFile={h.known_hosts}"]
        return ["ssh", *opts, h.login]

    def run(self, argv: Sequence[str], *, sudo: bool = True, input: bytes | None = None,
            timeout: float = SSH_TIMEOUT_S) -> subprocess.CompletedProcess:
        """argv on the host (quoted for its shell), as root; the CompletedProcess (bytes)."""
        remote = list(argv)
        if sudo and self.host.user != "root":
            remote = ["sudo", "-n", "--", *remote]
        try:
            return subprocess.run([*self.argv(), "--", shlex.join(remote)], input=input, capture_output=True,
                                  timeout=timeout, env=self.env, **quiet_group())
        except FileNotFoundError:
            raise MissingDependency("the OpenSSH client (ssh) is not installed; run `make install` "
                                    "(apt package openssh-client)") from None
        except subprocess.TimeoutExpired:
            raise ClusterError(f"host {self.host.address}: `{shlex.join(remote)[:80]}` did not finish within "
                               f"{timeout:.0f} s") from None

    def remote_dir(self, run_id: str) -> str:
        """The run's directory on this host (the helper's DIR)."""
        return f"{BASE}/{self.host.name}/{run_id}"

    def helper(self, run_id: str, *args: Any, input: bytes | None = None, timeout: float = SSH_TIMEOUT_S) -> Any:
        """One helper command; its JSON answer, or a ClusterError with its sentence."""
        r = self.run(["python3", f"{self.remote_dir(run_id)}/ssh_helper.py", f"{run_id}/{self.host.name}", *map(str, args)],
                     input=input, timeout=timeout)
        if r.returncode != 0:
            err = r.stderr.decode(errors="replace").strip().splitlines()
            raise ClusterError(f"host {self.host.address}: {args[0]} failed: {(err or [f'exit {r.returncode}'])[-1][:300]}")
        return json.loads(r.stdout or b"null")

    def batch(self, run_id: str, commands: Sequence[Sequence[Any]], timeout: float = SSH_TIMEOUT_S) -> list:
        """Several helper commands in one round trip (a put's data as bytes, last); their answers."""
        import base64

        items = [[str(a) if not isinstance(a, bytes) else {"b64": base64.b64encode(a).decode()} for a in c]
                 for c in commands]
        return self.helper(run_id, "batch", input=json.dumps(items).encode(), timeout=timeout)

    def close(self) -> None:
        """End the master connection (ssh -O exit); quiet if there is none."""
        if self.control_dir is None:
            return
        try:
            subprocess.run([*self.argv()[:-1], "-O", "exit", self.host.login], capture_output=True, timeout=10,
                           env=self.env, **quiet_group())
        except (OSError, subprocess.TimeoutExpired):
            pass


def check_host(ssh: Ssh) -> str | None:
    """None when the host can be driven; else one sentence naming it and what to fix. One
    round trip: ssh's own exit 255 is the connection or the key; the script's 10 is sudo,
    11 Python."""
    h = ssh.host
    sudo = "" if h.user == "root" else "sudo -n true 2>&1 || exit 10; "
    r = ssh.run(["sh", "-c", sudo + "python3 -c 'import sys; assert sys.version_info >= (3, 8)' || exit 11"],
                sudo=False, timeout=20)
    if r.returncode == 255:
        err = r.stderr.decode(errors="replace").strip()
        if "Permission denied" in err or "publickey" in err:
            return (f"host {h.address} refuses the key for {h.user} ({err.splitlines()[-1][:160]}); add the public key "
                    f"to ~{h.user}/.ssh/authorized_keys there, or pass the right one with --ssh-key")
        if "Host key verification failed" in err or "REMOTE HOST IDENTIFICATION HAS CHANGED" in err:
            return (f"host {h.address} presents a host key that differs from the one in known_hosts; check the host, "
                    f"then remove its old line (ssh-keygen -R {h.address})")
        return (f"host {h.address} cannot be reached on port {h.port} ({(err.splitlines() or ['no answer'])[-1][:160]}); "
                f"check the address, that sshd runs there, and the network between")
    if r.returncode == 10:
        return (f"host {h.address}: {h.user} cannot run commands as root without a password (sudo -n true said: "
                f"{r.stdout.decode(errors='replace').strip()[:120] or 'no'}); log in as root or give {h.user} "
                f"passwordless sudo there")
    if r.returncode == 11:
        return f"host {h.address} has no Python 3.8 or newer (the helper needs it); install python3 there"
    if r.returncode != 0:
        return f"host {h.address}: a shell command over ssh exited {r.returncode}; check the login shell of {h.user} there"
    return None


# What a host needs besides its servers: (a check, run by sh, that succeeds when present;
# Debian packages). Each server kind names its own (ServerKind.host_check and .debs).
NEEDS = {
    "faketime": (f"test -f {FAKETIME_LIB}", ("libfaketime",)),
    "iptables": ("command -v iptables", ("iptables",)),
}


def needs_of(kinds: Iterable[ServerKind], *, faked: bool) -> dict[str, tuple[str, tuple[str, ...]]]:
    """What a host running `kinds` needs, by name: (sh check, Debian packages)."""
    out = {k.name: (k.host_check, tuple(k.debs)) for k in sorted(kinds, key=lambda k: k.name) if k.host_check}
    out["iptables"] = NEEDS["iptables"]
    if faked:
        out["faketime"] = NEEDS["faketime"]
    return out


def install(ssh: Ssh, debs: Iterable[str]) -> list[str]:
    """Install the Debian packages `debs` on the host; the packages installed."""
    missing: list[str] = []
    for p in debs:
        if p not in missing:
            missing.append(p)
    if not missing:
        return []
    if ssh.run(["sh", "-c", "command -v apt-get"]).returncode != 0:
        raise MissingDependency(f"host {ssh.host.address} lacks {', '.join(missing)} and has no apt-get to install them; "
                                f"install them there (they are Debian's package names)")
    script = ("apt-get -o DPkg::Lock::Timeout=600 update -qq && DEBIAN_FRONTEND=noninteractive apt-get -o "
              f"DPkg::Lock::Timeout=600 install -y -q --no-install-recommends {shlex.join(missing)}")
    r = ssh.run(["sh", "-c", script], timeout=900)
    if r.returncode != 0:
        raise MissingDependency(f"host {ssh.host.address}: apt-get install {' '.join(missing)} failed: "
                                f"{r.stderr.decode(errors='replace').strip()[-200:]}")
    return missing


def survey(ssh: Ssh, run_id: str, needs: Mapping[str, tuple[str, Sequence[str]]], shipped: Sequence[ShipsBinary],
           *, faked: bool) -> tuple[list[str], dict[str, str]]:
    """In one round trip: make the run's directory, write the helper into it, and say which
    of `needs` the host lacks and, for each kind that `shipped` names, the path of the host's
    own binary (ShipsBinary.host_binary), by kind name, when it has one."""
    checks = "".join(f"({check}) >/dev/null 2>&1 || echo lacks {w}; " for w, (check, _) in needs.items())
    finds = "".join(f"echo binary {k.name} $({k.host_binary(faked)}); " for k in shipped)
    d = ssh.remote_dir(run_id)
    script = f"mkdir -p -m 700 {d} && cat > {d}/ssh_helper.py || exit 3; {checks}{finds}"
    r = ssh.run(["sh", "-c", script], input=HELPER.read_bytes())
    if r.returncode != 0:
        raise ClusterError(f"host {ssh.host.address}: cannot write {d}: "
                           f"{r.stderr.decode(errors='replace').strip()[:200]}")
    lines = r.stdout.decode(errors="replace").splitlines()
    lacking = [line.split()[1] for line in lines if line.startswith("lacks ")]
    found = {line.split()[1]: line.split(maxsplit=2)[2] for line in lines
             if line.startswith("binary ") and len(line.split()) > 2}
    return lacking, found


def timewarp_source() -> bytes:
    """timewarp.py as a host runs it: without chaoslock's package around it."""
    text = TIMEWARP.read_text()
    shim = "class NemesisError(Exception):\n    pass\n"
    return text.replace("from harness.core.errors import NemesisError\n", shim, 1).encode()


def on_each(fn: Callable[[Host], Any], hosts: Sequence[Host], *, quiet: bool = False) -> list[Any]:
    """fn on every host at once (each is a round trip or more); the first error is raised
    once all have finished, unless quiet (teardown: every host gets its try)."""
    from concurrent.futures import ThreadPoolExecutor

    if not hosts:
        return []
    with ThreadPoolExecutor(max_workers=min(16, len(hosts))) as pool:
        futures = [pool.submit(fn, h) for h in hosts]
    errors = [f.exception() for f in futures if f.exception() is not None]
    if errors and not quiet:
        raise errors[0]
    return [f.result() for f in futures if f.exception() is None]


LOG_KEEP = 4 << 20  # bytes of each server log copied back from its host


class SshCluster(ServerCluster):
    """Cluster, ProcessControl, ClockControl and NetworkControl on remote hosts. The lock
    servers go one per host, in order (more servers than hosts share them, 100 ports up);
    the store goes on the first host."""

    NOT_READY = "{names} did not become ready within {timeout:.0f}s on the hosts; see the server logs in {logs}"

    def __init__(self, run_id: str, groups: Sequence[Group], hosts: Sequence[Host], *, clients: int,
                 log_dir: str | os.PathLike | None = None, ready_timeout: float = 60.0):
        super().__init__(run_id, groups, clients=clients, log_dir=log_dir, ready_timeout=ready_timeout)
        self.fallback_reason: str | None = None
        self.hosts = list(hosts)
        self.client_netns = [None]  # the clients run here, in this machine's own network
        self.n_clients = 1
        self._ssh = {h.name: Ssh(h, self.dir / "ssh", run_id) for h in self.hosts}
        self._where: dict[str, Host] = {}
        self._pids: dict[str, int] = {}
        self._touched: list[Host] = []  # hosts the helper reached (down() cleans these)
        self._binaries: dict[tuple[str, str], str] = {}  # (host, kind) -> the binary found or shipped there
        self._alive_checked: dict[str, float] = {}
        lock = [n for g in self.groups if g.role == "lock" for n in g.names]
        slots: dict[str, int] = {}
        for g in self.groups:
            for i, name in enumerate(g.names, 1):
                host = self.hosts[lock.index(name) % len(self.hosts)] if g.role == "lock" else self.hosts[0]
                slot = slots.get(host.name, 0)
                slots[host.name] = slot + 1
                here = f"{BASE}/{host.name}/{run_id}/{name}"  # valkey's title names the run by this parent
                self._where[name], self._kinds[name] = host, g.kind
                self._nodes[name] = Node(name=name, kind=g.kind.name, role=g.role, host=host.address,
                                         port=g.kind.default_port + PORT_STEP * slot,
                                         peer_port=PEER_PORT + PORT_STEP * slot, election_port=ELECTION_PORT + PORT_STEP * slot,
                                         data_dir=here, log_path=str(self.log_dir / f"{name}.log"),
                                         clock_file=f"{here}.faketime" if g.fake_clock else None, ordinal=i)
        self._shared = sorted({h.address for n, h in self._where.items() if self._nodes[n].role == "lock"
                               and sum(self._where[m] == h and self._nodes[m].role == "lock" for m in self._where) > 1})

    # -- Cluster ----------------------------------------------------------------------------
    def client(self, index: int) -> ClientPlace:
        return ClientPlace(netns=None, nodes=tuple(self.lock_nodes()))

    def up(self) -> None:
        """Install what the hosts lack, ship the helper, start the servers and wait until each
        group serves (preflight has checked every host can be driven). On failure, clean up and raise."""
        try:
            self._touched = list(self.hosts)  # in the first state.json: a run killed from here on is cleaned everywhere
            self._make_state_dir()
            (self.dir / "ssh").mkdir(mode=0o700)
            on_each(self._prepare_host, self.hosts)
            on_each(self._start_host, self.hosts)
            self._write_state()
            self._wait_ready()
        except BaseException:
            self.down()
            raise

    def _prepare_host(self, h: Host) -> None:
        ssh = self._ssh[h.name]
        mine = [n for n, where in self._where.items() if where == h]
        kinds = list({self._kinds[n].name: self._kinds[n] for n in mine}.values())
        faked = any(self._nodes[n].clock_file for n in mine)
        needs = needs_of(kinds, faked=faked)
        shipped = [k for k in kinds if isinstance(k, ShipsBinary)]
        lacking, found = survey(ssh, self.run_id, needs, shipped, faked=faked)
        install(ssh, [p for w in lacking for p in needs[w][1]])
        puts = [("put", "timewarp.py", "644", timewarp_source())]
        for k in shipped:
            if k.name not in found:  # the host has none: ours, copied over
                puts.append(("put", f"bin/{k.binary}", "755", Path(k.local_binary()).read_bytes()))
                found[k.name] = f"{ssh.remote_dir(self.run_id)}/bin/{k.binary}"
            self._binaries[(h.name, k.name)] = found[k.name]
        ssh.batch(self.run_id, puts, timeout=300)

    def _start_host(self, h: Host) -> None:
        """Write each of the host's nodes' files and start them, in one round trip."""
        mine = [self._nodes[n] for n, where in self._where.items() if where == h]
        commands: list[tuple] = []
        for node in mine:
            commands += self._node_files(node, [p for p in self.nodes if p.kind == node.kind and p.role == node.role])
            commands.append(self._start_command(node))
        answers = self._ssh[h.name].batch(self.run_id, commands)
        starts = iter(a for c, a in zip(commands, answers) if c[0] == "start")
        for node in mine:
            self._pids[node.name] = int(next(starts))
            self._alive_checked[node.name] = time.monotonic()  # a server that answers soon is never asked

    def _node_files(self, node: Node, peers: Sequence[Node]) -> list[tuple]:
        """Helper commands for the node's data dir, configs and clock file on its host."""
        rel = node.name
        out: list[tuple] = [("mkdir", rel)]  # 0700, whatever the kind's data_dir_mode
        out += [("put", f"{rel}/{name}", "644", text.encode())
                for name, text in self._kinds[node.name].config_files(node, peers).items()]
        if node.clock_file:
            out.append(("put", f"{rel}.faketime", "644", f"{self._clock_offsets.get(node.name, 0.0):+.3f}\n".encode()))
        return out

    def _start_command(self, node: Node) -> tuple:
        host, kind = self._where[node.name], self._kinds[node.name]
        binary = self._binaries.get((host.name, kind.name), kind.binary)  # its own PATH's, or one we found or shipped
        argv = kind.argv(node, [n for n in self.nodes if n.kind == node.kind], binary=binary)
        env = dict(kind.env(node))
        if node.clock_file:
            env.update(LD_PRELOAD=FAKETIME_LIB, FAKETIME_TIMESTAMP_FILE=node.clock_file, FAKETIME_NO_CACHE="1")
        return ("start", node.name, node.name, json.dumps(env), json.dumps(argv))

    def _check_alive(self, node: Node) -> None:
        """Fail fast on a server that died while starting; asked at most every 2 s (a round trip
        to the host each time), not on every poll of the readiness loop."""
        now = time.monotonic()
        if now - self._alive_checked.get(node.name, 0.0) < 2.0:
            return
        self._alive_checked[node.name] = now
        pid = self._pids.get(node.name)
        if pid and not self._ssh[self._where[node.name].name].helper(self.run_id, "alive", pid):
            raise ClusterError(f"{node.name} ({node.kind}) on {node.host} exited during start; its log ends: "
                               f"{self.log_tail(node.name)[-300:].strip()}")

    def log_tail(self, name: str, n: int = 2000) -> str:
        ssh = self._ssh[self._where[name].name]
        try:
            size = int(ssh.helper(self.run_id, "size", f"{name}.log"))
            return ssh.helper(self.run_id, "read", f"{name}.log", max(0, size - n))
        except (ClusterError, ValueError):
            return ""

    def down(self) -> None:
        """Copy the server logs here, then remove everything the run made on every host it
        reached, and the local state dir. Idempotent, never raises; Ctrl-C cannot cut it short."""
        with shielded("stopping the servers on the hosts"):
            self._down()

    def _down(self) -> None:
        if self._touched:
            self.log_dir.mkdir(parents=True, exist_ok=True)
        on_each(self._down_host, self._touched, quiet=True)
        self._touched = []
        for ssh in self._ssh.values():
            ssh.close()
        self._remove_state_dir()

    def _down_host(self, h: Host) -> None:
        """Copy the host's server logs here, then the helper's `down` there."""
        ssh = self._ssh[h.name]
        names = [n for n, where in self._where.items() if where == h]
        try:  # the last LOG_KEEP bytes of each: a host's log is the host's to fill, our store is not
            sizes = ssh.batch(self.run_id, [("size", f"{n}.log") for n in names], timeout=60)
            reads = [("read", f"{n}.log", max(0, int(size) - LOG_KEEP)) for n, size in zip(names, sizes)]
            for name, size, text in zip(names, sizes, ssh.batch(self.run_id, reads, timeout=60)):
                note = f"[chaoslock: the first {int(size) - LOG_KEEP:,} bytes of this log were left on {h.name}]\n"
                (self.log_dir / f"{name}.log").write_text((note if int(size) > LOG_KEEP else "") + text)
        except (ClusterError, OSError, ValueError, TypeError):
            pass
        try:
            ssh.helper(self.run_id, "down", timeout=60)
        except (ClusterError, MissingDependency):
            pass

    # -- ProcessControl ---------------------------------------------------------------------
    def _helper_for(self, name: str, *args: Any, input: bytes | None = None) -> Any:
        return self._ssh[self._where[self.node(name).name].name].helper(self.run_id, *args, input=input)

    def pids(self, name: str) -> list[int]:
        pid = self._pids.get(self.node(name).name)
        return [pid] if pid else []

    def pause(self, name: str) -> None:
        self._helper_for(name, "signal", self._pids[name], "SIGSTOP")

    def resume(self, name: str) -> None:
        self._helper_for(name, "signal", self._pids[name], "SIGCONT")

    def kill(self, name: str) -> None:
        pid = self._pids.pop(self.node(name).name, None)
        if pid:
            self._helper_for(name, "signal", pid, "SIGKILL")

    def restart(self, name: str, *, wipe: bool = False) -> None:
        node = self.node(name)
        if self._pids.get(name):
            self.kill(name)
        commands = [("wipe", name)] if wipe else []
        commands += self._node_files(node, [n for n in self.nodes if n.kind == node.kind and n.role == node.role])
        commands.append(self._start_command(node))
        answers = self._ssh[self._where[name].name].batch(self.run_id, commands)
        self._pids[name] = int(answers[-1])
        self._alive_checked[name] = time.monotonic()
        self._wait_restarted(node)
        if self._clock_offsets.get(name) and not node.clock_file:
            self.set_clock(name, self._clock_offsets[name])  # the vDSO patch died with the process

    # -- ClockControl -----------------------------------------------------------------------
    def _timewarps(self, node: Node) -> bool:
        """Whether the vDSO patch moves the node's clock (on a host: its timewarp.py decides)."""
        return "timewarp" in self._kinds[node.name].clock_methods

    def movable_clocks(self) -> list[str]:
        return [n.name for n in self.nodes if n.clock_file or self._timewarps(n)]

    def set_clock(self, name: str, offset_s: float, rate: float = 1.0) -> None:
        node = self.node(name)
        self._clock_offsets[node.name] = offset_s
        if node.clock_file:
            self._helper_for(name, "put", f"{node.name}.faketime", "644", input=f"{offset_s:+.3f}\n".encode())
        elif self._timewarps(node):
            self._helper_for(name, "clock", self._pids[node.name], offset_s)
        else:
            raise BadArgument(f"{name} ({node.kind}) runs without libfaketime, so its clock cannot be moved")

    def set_clocks(self, offsets: Mapping[str, float]) -> None:
        """Several clocks at once: every host's in parallel, each host's in one round trip."""
        by_host: dict[str, list[tuple]] = {}
        for name, off in offsets.items():
            node = self.node(name)
            self._clock_offsets[node.name] = off
            if node.clock_file:
                command: tuple = ("put", f"{node.name}.faketime", "644", f"{off:+.3f}\n".encode())
            elif self._timewarps(node):
                command = ("clock", self._pids[node.name], off)
            else:
                raise BadArgument(f"{name} ({node.kind}) runs without libfaketime, so its clock cannot be moved")
            by_host.setdefault(self._where[node.name].name, []).append(command)
        on_each(lambda h: self._ssh[h.name].batch(self.run_id, by_host[h.name]),
                [h for h in self.hosts if h.name in by_host])

    def read_clock_offset(self, name: str) -> float:
        node = self.node(name)
        kind = self._kinds[node.name]
        if not isinstance(kind, ClockInLog):
            return super().read_clock_offset(name)
        ssh = self._ssh[self._where[node.name].name]  # the server's log is on its host
        log = f"{node.name}.log"
        before = time.time()
        server = kind.read_clock_from(node, lambda: int(ssh.helper(self.run_id, "size", log)),
                                      lambda offset: ssh.helper(self.run_id, "read", log, offset))
        return server - (before + time.time()) / 2

    # -- NetworkControl ---------------------------------------------------------------------
    def partition(self, grudge: Mapping[str, Iterable[str]]) -> None:
        """Cut each pair both ways, by address, on the hosts; replaces the previous cut."""
        clients = sorted(a for a in grudge if a not in self._nodes)
        if clients:
            raise BadArgument(f"the ssh provider runs the clients on this machine, so {clients[0]} cannot be cut alone; "
                              f"partition the servers (nemesis partition) instead")
        if self._shared:
            raise BadArgument(f"host {self._shared[0]} runs more than one lock server, and a cut by address would cut them "
                              f"together; give --hosts one host per lock server")
        cut: dict[str, set[str]] = {h.name: set() for h in self.hosts}
        for a, hated in grudge.items():
            for b in hated:
                if b in self._nodes and a != b:
                    cut[self._where[a].name].add(self._nodes[b].host)
                    cut[self._where[b].name].add(self._nodes[a].host)
        on_each(lambda h: self._ssh[h.name].helper(self.run_id, "cut", ",".join(sorted(cut[h.name]))), self.hosts)

    def heal(self) -> None:
        on_each(lambda h: self._ssh[h.name].helper(self.run_id, "heal"), self.hosts)

    def reaches(self, src: str, dst: str) -> bool:
        target = self.node(dst)
        if src not in self._nodes:  # a client: this machine
            import socket

            try:
                socket.create_connection((target.host, target.port), timeout=0.3).close()
                return True
            except OSError:
                return False
        return bool(self._helper_for(src, "probe", target.host, target.port))

    # -- state for `chaos cluster status/down` ----------------------------------------------
    def _write_state(self) -> None:
        state = {"run_id": self.run_id, "provider": "ssh", "created": time.time(), "dir": str(self.dir),
                 "owner": os.environ.get("CHAOSLOCK_OWNER"), "owner_pid": os.getpid(),
                 "nodes": [n.to_dict() for n in self.nodes], "pids": dict(self._pids),
                 "hosts": [h.to_dict() for h in self.hosts], "touched": [h.name for h in self._touched]}
        (self.dir / "state.json").write_text(json.dumps(state, indent=1))


def remove_run(run_id: str, state: Mapping[str, Any] | None) -> list[str]:
    """`chaos cluster down` of an ssh run: the helper's `down` on every host its state names
    (the helper it shipped is still there, unless the host was cleaned already). Without a
    state (not an ssh run, or its state dir is gone) there is no host to ask."""
    check_run_id(run_id)
    if state is None or state.get("provider") != "ssh":
        return []
    done = []
    control = Path(state.get("dir") or ".") / "ssh"
    for d in state.get("hosts") or []:
        try:
            h = Host(**{k: d.get(k) for k in Host.__slots__ if k in d})
        except TypeError:
            continue
        ssh = Ssh(h, control if control.is_dir() else Path("/tmp"), run_id)
        try:
            r = ssh.run(["sh", "-c", f"test -f {ssh.remote_dir(run_id)}/ssh_helper.py"], timeout=20)
            if r.returncode == 0:
                done += [f"{what} on {h.address}" for what in ssh.helper(run_id, "down", timeout=60)]
        except (ClusterError, MissingDependency) as e:
            done.append(f"could not reach {h.address} to clean run {run_id} ({e}); run `chaos cluster down --all` again "
                        f"once it answers")
        ssh.close()
    return done + [f"ssh process {pid} (run {run_id})" for pid in stop_ssh_processes(run_id)]


def stop_ssh_processes(run_id: str) -> list[int]:
    """SIGTERM this machine's ssh clients and masters of a run (marked with SSH_ENV)."""
    import signal

    mark = f"{SSH_ENV}={run_id}".encode()
    gone = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open(f"/proc/{d}/environ", "rb") as f:
                if mark not in f.read().split(b"\0"):
                    continue
            os.kill(int(d), signal.SIGTERM)
            gone.append(int(d))
        except (OSError, ProcessLookupError):
            pass
    return gone


def make_cluster(spec: Any, run_id: str, log_dir: Path, groups: Sequence[Group]) -> SshCluster:
    return SshCluster(run_id, groups, parse_hosts(spec.ssh), clients=spec.concurrency, log_dir=log_dir)


def leftover_runs() -> set[str]:
    return set()  # an ssh run is found by its state dir on this machine, which the reaper lists


def preflight(spec: Any, kind: str) -> None:
    """What an ssh run needs here, checked before its run dir exists (the hosts themselves
    are checked by `up`, before anything starts on any of them)."""
    if spec.netns is False or spec.base_port is not None:
        raise BadArgument("--no-netns and --base-port are local-provider settings; the ssh provider runs each server "
                          "on its host at that host's address")
    if "partition-client" in spec.nemesis:
        raise BadArgument("partition-client cuts one client from the servers, but the ssh provider runs the clients "
                          "on this machine; use partition (between the servers)")
    hosts = parse_hosts(spec.ssh)
    if shutil.which("ssh") is None:
        raise MissingDependency("the OpenSSH client (ssh) is not installed; run `make install` (apt package openssh-client)")
    check_hosts(hosts)


def check_hosts(hosts: Sequence[Host]) -> None:
    """Every host answers, takes the key, runs commands as root and has Python 3; else a
    MissingDependency with the first host's sentence (nothing has been started anywhere)."""
    problems = [p for p in on_each(lambda h: check_host(Ssh(h, None, "000000")), hosts) if p]
    if problems:
        raise MissingDependency(problems[0] + (f" (and {len(problems) - 1} more host(s) with a problem)"
                                               if len(problems) > 1 else ""))
