"""ZooKeeper 3.8 (Debian's zookeeper on Java 17) as a ServerKind: a static quorum, probed by 4lw.

Each node runs QuorumPeerMain directly with its own zoo.cfg and myid (Debian's zkServer.sh
hard-codes /etc and /var dirs). Probes use the four-letter words over the client port,
which every server answers locally, without a quorum:
  * node_ready: `srvr` reports a Mode, i.e. the server is serving as part of a quorum
    (a server without one answers "not currently serving requests"; `ruok` would say
    "imok" even then, which is why it is not used).
  * cluster_ready / leader() / mode(): the "Mode:" line of `srvr`.
  * read_clock: the server's own log stamp of a `ruok` we send (see ZooKeeperKind.read_clock).

Both clock methods reach the JVM: the vDSO patch moves its wall clock (the default), and
libfaketime (zk_clock=faketime) its wall and monotonic clocks. Session expiry uses
System.nanoTime, which libfaketime fakes too unless told not to; ENVIRONMENT.md records what that does to an ensemble (a zombie leader on a backwards
jump), so leader() prefers the leader of the newest epoch.

Never mutates the ensemble. No process handling (the provider owns it).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import time
from datetime import datetime
from typing import Any, Callable, Mapping, Sequence

from harness.core.contracts.cluster import Node
from harness.core.errors import MissingDependency
from harness.core.options import cluster_option

JAR = "/usr/share/java/zookeeper.jar"
# zookeeper.jar's manifest Class-Path names its runtime deps (jute, netty, jetty, metrics,
# slf4j-api, ...), so only a logging binding must be added: without one slf4j logs nothing.
CLASSPATH = (JAR, "/usr/share/java/slf4j-simple.jar")
MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"

# tickTime is the unit of every ZooKeeper timeout. 500 ms makes the allowed session
# timeouts 1..30 s (min/max below) and lets a follower that misses syncLimit ticks (2 s)
# drop out, so faults show within seconds rather than the default tens of seconds.
TICK_MS = 500
INIT_LIMIT = 20  # ticks a follower may take to connect and sync: 10 s covers JVM warm-up
SYNC_LIMIT = 4  # ticks a follower may lag before the leader drops it: 2 s

JVM_FLAGS = (
    "-Xms32m", "-Xmx128m", "-XX:+UseSerialGC",
    # C1 only: three servers serve after ~2 s instead of ~3.2 s on this 2-core host and
    # use ~5 MB less each; peak throughput, the price, is irrelevant here.
    "-XX:TieredStopAtLevel=1",
    # No /tmp/hsperfdata_<user>/<pid> file, which a SIGKILLed JVM would leave behind.
    "-XX:-UsePerfData",
    "-Djava.net.preferIPv4Stack=true",
    # Leader election backs its notification timeout off up to 60 s when peers are silent
    # (e.g. not started yet, or partitioned away); cap it so a healed peer is seen within 1 s.
    "-Dzookeeper.fastleader.maxNotificationInterval=1000",
    # Connecting to an election peer that drops packets blocks its sender for 5 s by default.
    "-Dzookeeper.cnxTimeout=1000",
    # Wall-clock stamps in ms with the zone: ZooKeeperKind.read_clock parses exactly this.
    "-Dorg.slf4j.simpleLogger.showDateTime=true",
    "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd'T'HH:mm:ss.SSSZ",
)

_MODE = re.compile(r"^Mode:\s*(\S+)", re.M)
_ZXID = re.compile(r"^Zxid:\s*0x([0-9a-fA-F]+)", re.M)


def java_binary() -> str:
    path = shutil.which("java")
    if path is None:
        raise MissingDependency("java not found on PATH; run `make install` (apt package default-jre-headless)")
    return path


def four_letter(node: Node, cmd: str, timeout: float = 1.0) -> str:
    """Send a four-letter word to the node's client port and return the whole answer.

    Raises OSError when the node does not answer (down, paused, partitioned from us).
    """
    with socket.create_connection((node.host, node.port), timeout=timeout) as s:
        s.settimeout(timeout)
        s.sendall(cmd.encode())
        chunks = []
        while True:
            b = s.recv(65536)
            if not b:
                return b"".join(chunks).decode(errors="replace")
            chunks.append(b)


def srvr(node: Node, timeout: float = 1.0) -> str | None:
    try:
        return four_letter(node, "srvr", timeout)
    except OSError:
        return None


def mode(node: Node, timeout: float = 1.0) -> str:
    """"leader", "follower", "observer" or "standalone" while serving; "looking" when the
    server answers but serves no requests (no quorum: electing, or cut off); "down" when it
    does not answer at all (dead, SIGSTOPped, or unreachable from the harness)."""
    out = srvr(node, timeout)
    if out is None:
        return "down"
    m = _MODE.search(out)
    return m.group(1) if m else "looking"


def leader(nodes: Sequence[Node], timeout: float = 1.0) -> str | None:
    """Name of the node that says it leads, or None when none does.

    If several say so (an isolated or clock-jumped old leader that has not stepped down
    yet), the one with the newest epoch wins: a newer leader always has a higher epoch.
    """
    best: tuple[int, str] | None = None
    for n in nodes:
        out = srvr(n, timeout)
        m = _MODE.search(out or "")
        if m and m.group(1) == "leader":
            z = _ZXID.search(out)
            ep = int(z.group(1), 16) >> 32 if z else -1
            if best is None or ep > best[0]:
                best = (ep, n.name)
    return best[1] if best else None


def zoo_cfg(node: Node, peers: Sequence[Node]) -> str:
    lines = [
        f"tickTime={TICK_MS}",
        f"initLimit={INIT_LIMIT}",
        f"syncLimit={SYNC_LIMIT}",
        f"dataDir={node.data_dir}",
        f"clientPort={node.port}",
        f"clientPortAddress={node.host}",
        f"minSessionTimeout={2 * TICK_MS}",
        f"maxSessionTimeout={60 * TICK_MS}",
        # Three Jetty AdminServers would all want :8080; we need none (the log gives the clock).
        "admin.enableServer=false",
        "4lw.commands.whitelist=*",
        # Bind quorum and election ports to the node's own address only, so in netns mode a
        # partition of that address is a partition of the server.
        "quorumListenOnAllIPs=false",
        # In loopback mode every client and probe comes from 127.0.0.1; the default limit of
        # 60 connections per address would refuse workers.
        "maxClientCnxns=0",
        # The txn log is preallocated in 64 MB steps by default, which on tmpfs is 64 MB of
        # RAM per server; 4 MB (in KB) is plenty for a test.
        "preAllocSize=4096",
        "reconfigEnabled=false",
    ]
    lines += [f"server.{p.ordinal}={p.host}:{p.peer_port}:{p.election_port}" for p in peers]
    return "\n".join(lines) + "\n"


class ZooKeeperKind:
    """A ZooKeeper ensemble, one QuorumPeerMain JVM per node, myid = node.ordinal."""

    name = "zookeeper"
    prefix = "z"
    default_port = 2181
    peer_ports = (2888, 3888)
    binary = "java"
    image = "chaoslock-zookeeper:3.8.0"
    compose_hosts = range(21, 24)
    health = ("bash", "-c", ("exec 3<>/dev/tcp/{host}/{port} && printf 'srvr' >&3 && "  # ZooKeeper then closes
               "timeout 2 head -c 4096 <&3 | grep -q 'Mode:'"))
    debs = ("zookeeper", "libslf4j-java", "default-jre-headless")
    host_check = f"command -v java && test -f {JAR} && test -f {CLASSPATH[1]}"
    strip_env = ()
    data_dir_mode = None
    clock_methods = ("timewarp", "faketime")  # the first unless zk_clock=faketime
    clock_read_error_s = 0.0
    persists = True
    sessions = True
    stops_together = True

    def __init__(self, clock_method: str = "timewarp"):
        self.clock_method = clock_method
        # Under libfaketime the JVM's monotonic clock moves too, and with it session expiry.
        self.clock_expiry = clock_method == "faketime"

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> ZooKeeperKind:
        return cls(clock_method=cluster_option(options, "zk_clock"))

    def leader(self, nodes: Sequence[Node]) -> str | None:
        return leader(nodes)

    def check_installed(self) -> None:
        java_binary()
        for jar in CLASSPATH:
            if not os.path.exists(jar):
                raise MissingDependency(f"{jar} not found; run `make install` (apt packages zookeeper, libslf4j-java)")

    @staticmethod
    def cfg_path(node: Node) -> str:
        # Inside the data dir, so the run's state dir holds everything; a restart with
        # wipe=True removes it and the provider writes it again.
        return os.path.join(node.data_dir, "zoo.cfg")

    def config_files(self, node: Node, peers: Sequence[Node]) -> dict[str, str]:
        """zoo.cfg and myid; snapshots and logs beside them are kept across a restart."""
        return {"zoo.cfg": zoo_cfg(node, peers), "myid": f"{node.ordinal}\n"}

    def argv(self, node: Node, peers: Sequence[Node], binary: str | None = None) -> list[str]:
        return [binary or java_binary(), *JVM_FLAGS, "-cp", ":".join(CLASSPATH), MAIN, self.cfg_path(node)]

    def env(self, node: Node) -> dict[str, str]:
        # Nothing to add. (Blanking JAVA_TOOL_OPTIONS and friends is not possible from here, and
        # setting them empty makes the launcher print a NOTE into every log.)
        return {}

    def node_ready(self, node: Node) -> bool:
        return mode(node, 1.0) in ("leader", "follower", "observer", "standalone")

    def cluster_ready(self, nodes: Sequence[Node]) -> bool:
        """Exactly one leader and every other node a follower (or observer); a single server
        serves in standalone mode (ZooKeeper's default for an ensemble of one), with no leader."""
        modes = [mode(n, 1.0) for n in nodes]
        if len(nodes) == 1 and modes[0] == "standalone":
            return True
        return modes.count("leader") == 1 and all(m in ("leader", "follower", "observer") for m in modes)

    def requests_served(self, node: Node) -> int:
        """Packets this server has received from clients (`mntr` zk_packets_received)."""
        m = re.search(r"^zk_packets_received\s+(\d+)", four_letter(node, "mntr", 1.0), re.M)
        if m is None:
            raise OSError(f"{node.name}: mntr gave no zk_packets_received")
        return int(m.group(1))

    def read_clock(self, node: Node) -> float:
        """This server's own wall clock (the JVM's System.currentTimeMillis), ms resolution.

        ZooKeeper has no time command. Every four-letter word is logged by the server that
        receives it ("Processing ruok command from /addr:port") with a timestamp we configure
        (slf4j-simple, ms, with zone offset) taken from that JVM's wall clock, so libfaketime
        skew shows. We send `ruok`, find the line naming our source port in the node's log
        (only the bytes appended since we connected), and project that stamp to the moment
        of return with the local monotonic clock (the stamp was taken mid-request).
        Works on an isolated node as long as the harness reaches it; needs node.log_path to
        be this server's output (true for the local provider).
        Rejected alternatives: a znode's mtime is the LEADER's clock (the leader stamps each
        txn), not this node's; `cons` shows est= only for connections with a session; the
        AdminServer's HTTP Date header has 1 s resolution and needs one more port per node.
        Raises OSError when the node does not answer or the line does not appear.
        """
        if not node.log_path or not os.path.exists(node.log_path):
            raise OSError(f"{node.name}: no server log at {node.log_path!r} to read the clock from")

        def read_from(offset: int) -> str:
            with open(node.log_path, "rb") as f:
                f.seek(offset)
                return f.read().decode(errors="replace")

        return read_clock_from(node, lambda: os.path.getsize(node.log_path), read_from)

    def read_clock_from(self, node: Node, size: Callable[[], int], read_from: Callable[[int], str]) -> float:
        return read_clock_from(node, size, read_from)


def read_clock_from(node: Node, size: Callable[[], int], read_from: Callable[[int], str]) -> float:
    """ZooKeeperKind.read_clock with the server's log reached through `size()` (its length
    now) and `read_from(offset)` (its text from there): a local file, or one on a host."""
    start = size()
    t0 = time.monotonic()
    with socket.create_connection((node.host, node.port), timeout=2.0) as s:
        port = s.getsockname()[1]
        s.settimeout(2.0)
        s.sendall(b"ruok")
        while s.recv(64):
            pass
    t1 = time.monotonic()
    pat = re.compile(rf"^(\S+) \[[^\]]*\] INFO \S+ - Processing ruok command from /\S+:{port}\s*$", re.M)
    deadline = t1 + 1.0
    while True:
        m = pat.search(read_from(start))
        if m:
            stamp = datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()
            return stamp + (time.monotonic() - (t0 + t1) / 2)
        if time.monotonic() > deadline:
            raise OSError(f"{node.name}: its log shows no ruok from port {port}")
        time.sleep(0.01)
