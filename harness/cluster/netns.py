"""Network namespaces: one per host, one bridge per run, partitions as iptables DROP rules.

A run `a1b2c3` gets a bridge `clba1b2c3` in the root namespace holding `.1` of a /24 taken
from 198.18.0.0/15, and each host a namespace `cl-a1b2c3-<name>` whose `eth0` is the peer of
a veth `clva1b2c3<n>` enslaved to that bridge. Hosts reach each other over the bridge; the
root namespace (the harness, and workers that do not `enter_netns`) reaches every host
through the bridge address. Nothing is routed out of the subnet: the root namespace does
not forward (ip_forward stays as it is, 0 here) and no NAT is set up.

A partition is a set of DROP rules inside the namespaces (INPUT from and OUTPUT to each
hated peer), every one tagged `-m comment --comment chaoslock-<run_id>`, so heal and
cleanup remove exactly those and never anyone else's rules.

While a Network is up, its process holds an flock on /run/lock/chaoslock-<run_id>.lock.
The kernel drops it when the process dies, however it dies, which is how `cleanup_all`
tells a SIGKILLed run's leftovers from a live run it must not touch.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import ipaddress
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import IO, Iterable, Mapping

from harness.core.contracts.cluster import RUN_ID, check_run_id
from harness.core.errors import BadArgument, ChaosError, ClusterError, NemesisError
from harness.core.interrupts import deferred, quiet_group, shielded

NS_PREFIX = "cl-"
BRIDGE_PREFIX = "clb"
_VETH_PREFIX = "clv"
_POOL = ipaddress.ip_network("198.18.0.0/15")  # RFC 2544 benchmarking range; never leave it
# The compose provider's network (harness/cluster/compose_file.py NET) is never picked here:
# Docker could not create it over a bridge of ours. Nor the swarm lab's (scripts/swarm/swarm.sh).
RESERVED = (ipaddress.ip_network("198.19.250.0/24"), ipaddress.ip_network("198.19.249.0/24"))
_POOL_SUBNETS = [n for n in _POOL.subnets(new_prefix=24) if n not in RESERVED]
_LOCK_DIR = "/run/lock"
_NETNS_DIR = "/run/netns"
_CLONE_NEWNET = 0x40000000
_DOWN_WAIT_S = 3.0
# Run id of a chaoslock object, from its name or its iptables comment.
_TAGGED = re.compile(r'--comment "?chaoslock')
_OWNER = re.compile(r'^(?:cl-|cl[bv])([0-9a-f]{6})|--comment "?chaoslock-([0-9a-f]{6})')


def _run(argv: list[str], *, input: str | None = None, check: bool = True,
         error: type[ChaosError] = ClusterError) -> subprocess.CompletedProcess:
    """Run a command quietly; on failure raise `error` quoting its stderr."""
    proc = subprocess.run(argv, input=input, capture_output=True, text=True, **quiet_group())
    if check and proc.returncode != 0:
        raise error(f"`{' '.join(argv)}` failed: {proc.stderr.strip() or proc.returncode}")
    return proc


def _links() -> list[str]:
    return [l["ifname"] for l in json.loads(_run(["ip", "-j", "link", "show"]).stdout or "[]")]


def _namespaces() -> list[str]:
    # `ip netns list` prints "name (id: N)"; the name is the first word.
    return [l.split()[0] for l in _run(["ip", "netns", "list"]).stdout.splitlines() if l.strip()]


def _owner(text: str) -> str | None:
    m = _OWNER.search(text)
    return (m.group(1) or m.group(2)) if m else None


def _used_networks() -> list[ipaddress.IPv4Network]:
    """Every IPv4 network the root namespace has an address or a unicast route in."""
    used = []
    for ifc in json.loads(_run(["ip", "-j", "-4", "addr", "show"]).stdout or "[]"):
        for a in ifc.get("addr_info", []):
            used.append(ipaddress.ip_interface(f"{a['local']}/{a['prefixlen']}").network)
    for r in json.loads(_run(["ip", "-j", "-4", "route", "show", "table", "all"]).stdout or "[]"):
        if r.get("dst", "default") != "default" and r.get("type", "unicast") == "unicast":
            used.append(ipaddress.ip_network(r["dst"], strict=False))
    return used


def _pick_subnet(run_id: str) -> ipaddress.IPv4Network:
    """A /24 of the pool that overlaps nothing in the root namespace, starting at a run-id hash."""
    used = _used_networks()
    start = int(run_id, 16) % len(_POOL_SUBNETS)
    for i in range(len(_POOL_SUBNETS)):
        cand = _POOL_SUBNETS[(start + i) % len(_POOL_SUBNETS)]
        if not any(cand.overlaps(u) for u in used):
            return cand
    raise ClusterError("every /24 of 198.18.0.0/15 is in use; run `chaos cluster down --all` "
                       "to remove leftover chaoslock bridges")


def _forward_accepts() -> bool:
    return "-P FORWARD ACCEPT" in _run(["iptables", "-w", "-S", "FORWARD"]).stdout.splitlines()


def _root_rules(keep) -> list[tuple[str, str]]:
    """(table, "-A ..." line) of each root-namespace rule with a chaoslock comment keep() wants."""
    found, table = [], "filter"
    for line in _run(["iptables-save"]).stdout.splitlines():
        if line.startswith("*"):
            table = line[1:].strip()
        elif line.startswith("-A ") and _TAGGED.search(line) and keep(_owner(line)):
            found.append((table, line))
    return found


def _delete_root_rules(keep) -> list[str]:
    res = None
    for _ in range(3):
        rules = _root_rules(keep)
        if not rules:
            return []
        by_table: dict[str, list[str]] = {}
        for table, line in rules:
            by_table.setdefault(table, []).append("-D" + line[2:])
        script = "".join(f"*{t}\n" + "\n".join(ls) + "\nCOMMIT\n" for t, ls in by_table.items())
        # One transaction: it fails whole if someone removed one of these rules between
        # our save and restore, so look again instead of raising.
        res = _run(["iptables-restore", "-w", "--noflush"], input=script, check=False)
        if res.returncode == 0:
            return [f"deleted iptables rule ({t}): {line}" for t, line in rules]
    raise ClusterError(f"could not delete chaoslock iptables rules ({res.stderr.strip()}); "
                       f"remove them by hand with `iptables -D`")


def _remove(keep, *, kill_processes: bool) -> list[str]:
    """Delete chaoslock namespaces, links and root rules whose run id keep() accepts.

    Never raises for something already gone (another cleanup may race us); raises
    ClusterError only if something selected still exists after ~3 s.
    """
    report: list[str] = []
    spaces = [n for n in _namespaces() if n.startswith(NS_PREFIX) and keep(_owner(n))]
    links = [l for l in _links()
             if l.startswith((BRIDGE_PREFIX, _VETH_PREFIX)) and keep(_owner(l))]
    if kill_processes:
        for ns in spaces:
            for pid in _run(["ip", "netns", "pids", ns], check=False).stdout.split():
                if int(pid) == os.getpid():
                    continue
                try:
                    os.kill(int(pid), signal.SIGKILL)
                    report.append(f"killed pid {pid} left in namespace {ns}")
                except ProcessLookupError:
                    pass
    # Namespaces first: the kernel then tears down all their veths in one batch (~50 ms
    # for 12), where deleting veths one by one costs ~17 ms each. A veth whose namespace a
    # process still holds does not go that way, so after a short wait delete what is left.
    # -force: carry on past an item that vanished meanwhile (another cleanup racing us).
    if spaces:
        _run(["ip", "-force", "-batch", "-"], input="".join(f"netns del {n}\n" for n in spaces),
             check=False)
    veths = {l for l in links if l.startswith(_VETH_PREFIX)}
    deadline = time.monotonic() + 0.5
    while veths and veths & set(_links()) and time.monotonic() < deadline:
        time.sleep(0.02)
    rest = sorted(veths & set(_links())) + [l for l in links if l not in veths]
    if rest:
        _run(["ip", "-force", "-batch", "-"], input="".join(f"link del {l}\n" for l in rest),
             check=False)
    report += [f"deleted {'veth' if l.startswith(_VETH_PREFIX) else 'bridge'} {l}" for l in links]
    report += [f"deleted namespace {n}" for n in spaces]
    report += _delete_root_rules(keep)
    deadline = time.monotonic() + _DOWN_WAIT_S
    while left := sorted((set(links) & set(_links())) | (set(spaces) & set(_namespaces()))):
        if time.monotonic() > deadline:
            raise ClusterError(f"could not remove {', '.join(left)} within {_DOWN_WAIT_S:.0f} s; "
                               f"delete them by hand with `ip link del` / `ip netns del`")
        time.sleep(0.05)
    return report


def _lock_path(run_id: str) -> str:
    return f"{_LOCK_DIR}/chaoslock-{run_id}.lock"


def _run_is_live(run_id: str) -> bool:
    """True while the process that brought the run up holds its lock (see module docstring)."""
    try:
        with open(_lock_path(run_id), "r+") as f:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except FileNotFoundError:
        return False  # never got up, or down() finished
    except BlockingIOError:
        return True
    return False


_available = False  # a probe that succeeded once need not run again in this process


def netns_available() -> str | None:
    """None if namespaces, veths, bridges and iptables all work here; else one sentence why not.

    Probes for real (a throwaway run with one host, about 100 ms, once per process) rather
    than trusting the uid, since a container can be root without CAP_NET_ADMIN.
    """
    global _available
    if _available:
        return None
    if os.geteuid() != 0:
        return "network namespaces need root; run as root or use another cluster provider"
    for tool, pkg in (("ip", "iproute2"), ("iptables", "iptables"),
                      ("iptables-save", "iptables"), ("iptables-restore", "iptables")):
        if shutil.which(tool) is None:
            return f"`{tool}` is missing; install it with `apt-get install -y {pkg}`"
    net = None
    try:
        net = Network(secrets.token_hex(3))
        net.up()
        host = net.add_host("probe")
        _run(net.exec_argv(host.name) + ["iptables", "-w", "-S", "INPUT"])
        _available = True
        return None
    except ChaosError as e:
        return f"cannot set up namespaces, bridges or iptables here ({e}); run as root " \
               f"with CAP_NET_ADMIN and CAP_SYS_ADMIN and install iproute2 and iptables"
    finally:
        with contextlib.suppress(ChaosError):  # the reason above matters more
            if net is not None:
                net.down()


@dataclass(frozen=True, slots=True, kw_only=True)
class Host:
    name: str  # "n1", "store", "c3"
    netns: str  # "cl-a1b2c3-n1"
    addr: str  # "198.18.7.2"


class Network:
    """One run's bridge and hosts. Not thread-safe: drive it from one thread.

    `subnet` is provisional until `up()` returns: up() re-checks it under a machine-wide
    lock and moves to another free /24 if a concurrent run took it meanwhile. `down()` must
    be called (it is idempotent); what a SIGKILLed run leaves is removed by `cleanup_all()`.
    """

    def __init__(self, run_id: str, *, bridge: str | None = None, subnet: str | None = None, first_host: int = 0):
        """A bridge of the run's own, on a free /24 of the pool; or, with `bridge` and `subnet`,
        someone else's bridge (Docker's, for the compose provider), which up() and down()
        leave alone: its hosts' addresses then start after `first_host`."""
        self.run_id = check_run_id(run_id)
        self.comment = f"chaoslock-{run_id}"
        self._own_bridge = bridge is None
        self.bridge = bridge or f"{BRIDGE_PREFIX}{run_id}"
        self._set_subnet(_pick_subnet(run_id) if subnet is None else ipaddress.ip_network(subnet))
        self._hosts: dict[str, Host] = {}
        self._first = self._counter = first_host
        self._lock: IO | None = None  # held while up; see the module docstring
        self._rules: dict[str, frozenset[str]] = {}  # netns -> our "-A ..." lines in it

    def _set_subnet(self, net: ipaddress.IPv4Network) -> None:
        self._net = net
        self.subnet = str(net)
        self.bridge_addr = str(net.network_address + 1)

    def up(self) -> None:
        """Create the bridge with `bridge_addr` and bring it up. Must not be called twice."""
        if self._lock is not None:
            raise ClusterError(f"network {self.run_id} is already up; call down() first")
        if self._own_bridge and self.bridge in _links():
            raise ClusterError(f"bridge {self.bridge} already exists (left by a killed run?); "
                               f"run `chaos cluster down --all`")
        if not self._own_bridge and self.bridge not in _links():
            raise ClusterError(f"bridge {self.bridge} does not exist; bring up what makes it first")
        # deferred: a Ctrl-C between the open that creates the lock file and the assignment that
        # lets down() find it would leave the file behind (seen once in the suite's start-up presses)
        with deferred():
            while True:  # not inherited by spawned workers (Python opens files non-inheritable)
                self._lock = open(_lock_path(self.run_id), "w")
                fcntl.flock(self._lock, fcntl.LOCK_EX)
                # A cleanup_all may have unlinked the file between our open and flock.
                if os.path.exists(self._lock.name) and \
                        os.stat(self._lock.name).st_ino == os.fstat(self._lock.fileno()).st_ino:
                    break
                self._lock.close()
        if self._own_bridge:
            self._make_bridge()
        # br_netfilter sends bridged frames through the root FORWARD chain: a DROP policy
        # there (Docker sets one) would silently cut every host off from every other.
        if not _forward_accepts():
            _run(["iptables", "-w", "-I", "FORWARD", "-s", self.subnet, "-d", self.subnet,
                  "-m", "comment", "--comment", self.comment, "-j", "ACCEPT"])

    def _make_bridge(self) -> None:
        # Two runs starting together must not both pick the same free /24. The lock is on
        # the lock directory itself, which always exists: a lock file would stay behind.
        pick = os.open(_LOCK_DIR, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            fcntl.flock(pick, fcntl.LOCK_EX)
            if any(self._net.overlaps(u) for u in _used_networks()):
                self._set_subnet(_pick_subnet(self.run_id))
            _run(["ip", "-batch", "-"], input=(
                f"link add {self.bridge} type bridge\n"
                f"addr add {self.bridge_addr}/{self._net.prefixlen} dev {self.bridge}\n"
                f"link set {self.bridge} up\n"))
        finally:
            os.close(pick)  # closing drops the flock

    def add_host(self, name: str) -> Host:
        """Create namespace, veth into the bridge, address, lo up, default route via the bridge."""
        if self._lock is None:
            raise ClusterError(f"network {self.run_id} is not up; call up() before add_host()")
        if not re.fullmatch(r"[a-z][a-z0-9]{0,5}", name):
            raise BadArgument(f"host name {name!r} must be 1-6 lowercase letters or digits "
                              f"starting with a letter, like 'n1' or 'store'")
        if name in self._hosts:
            raise BadArgument(f"host {name!r} already exists in network {self.run_id}; "
                              f"pick another name")
        if self._counter + 3 > self._net.num_addresses - 1:
            raise BadArgument(f"network {self.run_id} is full ({self._counter} hosts); "
                              f"use fewer hosts")
        self._counter += 1
        ns = f"{NS_PREFIX}{self.run_id}-{name}"
        veth = f"{_VETH_PREFIX}{self.run_id}{self._counter}"  # <= 12 chars; IFNAMSIZ is 15
        addr = str(self._net.network_address + 1 + self._counter)
        # Two batches (root side, namespace side): an `ip -batch` line cannot switch namespace.
        try:
            _run(["ip", "-batch", "-"], input=(
                f"netns add {ns}\n"
                f"link add {veth} type veth peer name eth0 netns {ns}\n"
                f"link set {veth} master {self.bridge}\n"
                f"link set {veth} up\n"))
            _run(["ip", "-n", ns, "-batch", "-"], input=(
                "link set lo up\n"
                f"addr add {addr}/{self._net.prefixlen} dev eth0\n"
                "link set eth0 up\n"
                f"route add default via {self.bridge_addr}\n"))
        except ClusterError:
            _run(["ip", "-force", "-batch", "-"],
                 input=f"link del {veth}\nnetns del {ns}\n", check=False)
            raise
        self._hosts[name] = Host(name=name, netns=ns, addr=addr)
        return self._hosts[name]

    def attach_host(self, name: str, pid: int, addr: str) -> Host:
        """Name the network namespace process `pid` lives in (a container's) as host `name`
        with address `addr`, so partitions cut it as they cut our own hosts. The namespace
        stays its owner's: down() only removes the name (`ip netns attach`/`del`)."""
        if self._lock is None:
            raise ClusterError(f"network {self.run_id} is not up; call up() before attach_host()")
        ns = f"{NS_PREFIX}{self.run_id}-{name}"
        _run(["ip", "-force", "netns", "del", ns], check=False)
        _run(["ip", "netns", "attach", ns, str(pid)])
        self._hosts[name] = Host(name=name, netns=ns, addr=addr)
        rules = self._rules.get(ns)
        if rules:  # a restarted container has a new namespace: put its side of the cut back
            _run(self._restore_argv(ns), input="*filter\n" + "".join(r + "\n" for r in sorted(rules)) + "COMMIT\n",
                 error=NemesisError)
        return self._hosts[name]

    def host(self, name: str) -> Host:
        if name not in self._hosts:
            raise BadArgument(f"no host {name!r} in network {self.run_id}; "
                              f"choose one of: {', '.join(self._hosts)}")
        return self._hosts[name]

    @property
    def hosts(self) -> list[Host]:
        return list(self._hosts.values())

    def exec_argv(self, name: str) -> list[str]:
        """Prefix that runs a command inside the host's namespace."""
        return ["ip", "netns", "exec", self.host(name).netns]

    def partition(self, grudge: Mapping[str, Iterable[str]]) -> None:
        """Cut each (a, b in grudge[a]) pair both ways, inside a's namespace; replaces the last cut.

        Validates the whole grudge before changing anything (NemesisError naming an unknown
        or self-hating host). Per namespace the change is one iptables-restore transaction
        (old rules out, new in, atomically), run for all namespaces concurrently; namespaces
        whose rules stay the same are not touched. Must not touch rules without our comment.
        """
        want: dict[str, set[str]] = {}
        for a, hated in grudge.items():
            for b in (a, *hated):
                if b not in self._hosts:
                    raise NemesisError(f"grudge names unknown host {b!r}; hosts of network "
                                       f"{self.run_id} are: {', '.join(self._hosts)}")
            for b in hated:
                if b == a:
                    raise NemesisError(f"grudge makes host {a!r} hate itself; "
                                       f"remove {a!r} from its own grudge set")
                addr = self._hosts[b].addr
                want.setdefault(self._hosts[a].netns, set()).update((
                    f"-A INPUT -s {addr}/32 -m comment --comment {self.comment} -j DROP",
                    f"-A OUTPUT -d {addr}/32 -m comment --comment {self.comment} -j DROP"))
        self._apply(want)

    def cut_one_way(self, client: str, servers: Iterable[str], lose: str) -> None:
        """One direction of `client`'s links to `servers`, inside the client's namespace only:
        lose="reply" drops what the servers send it (INPUT); lose="request" answers each TCP
        packet it sends them with a reset (OUTPUT, REJECT --reject-with tcp-reset), so the
        request never leaves and the connection is reset instead of retransmitting later.
        Replaces the last cut (partition's or this); heal() removes it."""
        if lose not in ("request", "reply"):
            raise NemesisError(f"cannot cut the {lose!r} direction; choose request or reply")
        ns = self.host(client).netns
        rules = set()
        for b in servers:
            addr = self.host(b).addr
            if lose == "reply":
                rules.add(f"-A INPUT -s {addr}/32 -m comment --comment {self.comment} -j DROP")
            else:
                rules.add(f"-A OUTPUT -p tcp -d {addr}/32 -m comment --comment {self.comment} "
                          f"-j REJECT --reject-with tcp-reset")
        self._apply({ns: rules})

    def _apply(self, want: Mapping[str, set[str]]) -> None:
        """Make each namespace's rules of ours exactly `want`'s (none where it names none)."""
        jobs = {}
        for ns in set(want) | set(self._rules):
            old, new = self._rules.get(ns, frozenset()), frozenset(want.get(ns, ()))
            if old != new:
                jobs[ns] = ("*filter\n" + "".join("-D" + r[2:] + "\n" for r in sorted(old - new))
                            + "".join(r + "\n" for r in sorted(new - old)) + "COMMIT\n")
        procs = {ns: subprocess.Popen(self._restore_argv(ns), stdin=subprocess.PIPE, text=True,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **quiet_group())
                 for ns in jobs}
        for ns, proc in procs.items():
            proc.communicate(jobs[ns])
        failed = [ns for ns, proc in procs.items() if proc.returncode != 0]
        self._rules = {ns: frozenset(r) for ns, r in want.items()}
        for ns in failed:
            # A rule we meant to delete was gone (someone flushed it), so the transaction
            # was refused whole: purge whatever of ours is there, then add the new set.
            save = _run(["ip", "netns", "exec", ns, "iptables-save", "-t", "filter"],
                        error=NemesisError).stdout
            ours = [l for l in save.splitlines() if l.startswith("-A ") and self.comment in l]
            script = "".join("-D" + l[2:] + "\n" for l in ours) + \
                "".join(r + "\n" for r in sorted(self._rules.get(ns, ())))
            _run(self._restore_argv(ns), input=f"*filter\n{script}COMMIT\n", error=NemesisError)

    @staticmethod
    def _restore_argv(ns: str) -> list[str]:
        return ["ip", "netns", "exec", ns, "iptables-restore", "-w", "--noflush"]

    def heal(self) -> None:
        """Remove exactly the rules partition() added; leave every other rule alone."""
        self.partition({})

    def down(self) -> None:
        """Delete this run's namespaces, veths, bridge and root rules; idempotent.

        Finds them by name and comment, not only from memory, so it also removes what a
        half-finished add_host() left. Never raises for something already gone; raises
        ClusterError only if something is still there after ~3 s. Must not kill processes:
        stopping servers is the provider's job, done before down().
        """
        with shielded("removing the run's namespaces and bridge"):
            self._down()

    def _down(self) -> None:
        _remove(lambda rid: rid == self.run_id, kill_processes=False)
        self._hosts.clear()
        self._rules.clear()
        self._counter = self._first
        if self._lock is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._lock.name)
            self._lock.close()
            self._lock = None


def enter_netns(ns_name: str) -> None:
    """Move the calling thread (the whole process, if it has one thread) into a namespace.

    setns(2) moves only the calling thread; threads it starts afterwards inherit the
    namespace, threads that already exist do not. Call it first thing in a fresh worker
    process, before any socket is opened: a socket keeps the namespace it was made in.
    """
    try:
        fd = os.open(os.path.join(_NETNS_DIR, ns_name), os.O_RDONLY | os.O_CLOEXEC)
    except OSError as e:
        raise ChaosError(f"cannot open network namespace {ns_name!r} ({e.strerror}); "
                         f"check the name with `ip netns list` and that the run is up") from None
    try:
        if ctypes.CDLL(None, use_errno=True).setns(fd, _CLONE_NEWNET) != 0:
            err = os.strerror(ctypes.get_errno())
            raise ChaosError(f"setns into network namespace {ns_name!r} failed ({err}); "
                             f"the process needs CAP_SYS_ADMIN, so run it as root")
    finally:
        os.close(fd)


def cleanup_run(run_id: str) -> list[str]:
    """Remove one run's namespaces, bridge, veths and root rules, live or not; say what went.

    Processes still inside its namespaces are SIGKILLed. For `chaos cluster down <run>`.
    """
    report = _remove(lambda rid: rid == run_id, kill_processes=True)
    if not _run_is_live(run_id):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(_lock_path(run_id))
    return report


def cleanup_all(*, include_live: bool = False) -> list[str]:
    """Remove leftovers of dead runs: namespaces, bridges, veths, root rules; say what went.

    A run whose owning process is alive (it holds its run lock) is skipped and reported,
    unless include_live=True. Processes still inside a removed namespace (orphaned servers)
    are SIGKILLed: they would keep the namespace alive and hold memory. Only objects whose
    name or comment carries a run id are touched: a namespace `cl-foo` or a bridge `clbr0`
    that merely shares a prefix is someone else's.
    """
    found = {_owner(n) for n in _namespaces() if n.startswith(NS_PREFIX)}
    found |= {_owner(l) for l in _links() if l.startswith((BRIDGE_PREFIX, _VETH_PREFIX))}
    found |= {_owner(line) for _, line in _root_rules(lambda rid: True)}
    live = set() if include_live else {r for r in found if r and _run_is_live(r)}
    report = [f"skipped run {r}: its process is still running" for r in sorted(live)]
    report += _remove(lambda rid: rid is not None and rid not in live, kill_processes=True)
    for name in os.listdir(_LOCK_DIR):
        rid = name.removeprefix("chaoslock-").removesuffix(".lock")
        if RUN_ID.fullmatch(rid) and rid not in live and not _run_is_live(rid):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(_LOCK_DIR, name))  # a dead run's lock file
    return report
