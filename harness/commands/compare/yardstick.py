"""The services' own yardsticks: how many lock cycles the servers can serve to a native load
tool, measured on a cluster of the same kind in the same run as our figure.

A performance figure of ours means something only beside the service's ceiling: a Python
driver on 2 cores saturates long before valkey does (issue 30). For the Redis designs the
tool is Debian's `redis-benchmark` (C, hiredis) sending the design's own commands: EVAL of
workloads.redis_single.ACQUIRE (SET NX PX and INCR of the fence, one script) and EVAL of
workloads.redis_common.RELEASE (compare-and-delete). It runs one command at a time, so a
cycle is measured as its two halves: cycles/s = 1 / (1/acquires/s + 1/releases/s), the
rate at which one server does both. The acquire's keys are random over 10^9 (`-r`), so it
takes a free key almost always; redis-benchmark cannot give a release the key an acquire
took, so before the release half the server is filled with locks held by the release's value
on 3 x its requests keys, and the release's random keys are drawn from those: about 85 % of
the releases find their lock and delete it (the full path). The printed `acquired` and
`deleted` shares say how far each half was the full path. Redlock's yardstick runs
redis-benchmark on all five masters at once (its acquire on each is a plain SET NX PX): a
Redlock client asks every master in turn, so its ceiling is the slowest master's cycle rate.

For etcd the tool is clients/etcd-yardstick (etcd's own Go client, clientv3, built offline
from Debian's etcd sources by scripts/clients/etcd-yardstick.sh): goroutines each cycling on a
key of its own through the design's four calls (lease grant, txn put-if-absent with the
lease, txn delete-if-value, revoke), timed as whole cycles.

For ZooKeeper it is clients/zk-yardstick (ZooKeeper's own Java client, Debian's jars,
scripts/clients/zk-yardstick.sh): threads each creating an EPHEMERAL_SEQUENTIAL node under
a parent of its own and deleting it.

The tool runs in client c1's network namespace, against the lock node as the workers reach it.
Must not: run on servers a nemesis touches, or report a rate it did not measure (a tool that
fails raises ChaosError with its output's last line).
"""

from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from harness.core.errors import ChaosError, MissingDependency
from harness.core.interrupts import deferred

BENCH_KEYS = 1_000_000_000  # redis-benchmark -r: random keys from this many, so acquires rarely collide
PREFIX = "yardstick:"


@dataclass(frozen=True, slots=True, kw_only=True)
class Yardstick:
    """One design's ceiling as its native tool measured it."""

    tool: str
    cycles_per_s: float
    connections: int
    acquires_per_s: float | None = None  # for a tool that measures the two halves apart
    releases_per_s: float | None = None
    acquired_share: float | None = None  # of the acquires, those that set the key (the full path)
    deleted_share: float | None = None  # of the releases, those that deleted (the full path)

    def line(self) -> str:
        if self.acquires_per_s is None:
            return f"{self.tool}, {self.connections} concurrent cycles: {self.cycles_per_s:,.0f} cycles/s"
        shares = ""
        if self.acquired_share is not None:
            shares = f"; {100 * self.acquired_share:.0f} % acquired, {100 * (self.deleted_share or 0):.0f} % deleted"
        return (f"{self.tool}, {self.connections} connections: {self.cycles_per_s:,.0f} cycles/s "
                f"(acquire {self.acquires_per_s:,.0f}/s, release {self.releases_per_s:,.0f}/s{shares})")


def cycle_rate(acquires_per_s: float, releases_per_s: float) -> float:
    """Acquire and release done one after the other by the same server: the harmonic sum."""
    if acquires_per_s <= 0 or releases_per_s <= 0:
        return 0.0
    return 1.0 / (1.0 / acquires_per_s + 1.0 / releases_per_s)


def redis_benchmark() -> str:
    found = shutil.which("redis-benchmark")
    if found is None:
        raise MissingDependency("redis-benchmark not found; run `make install` (it installs Debian's redis-tools)")
    return found


def parse_csv_rps(text: str) -> float:
    """The requests per second of redis-benchmark --csv's one row ("test","rps",...)."""
    rows = [r for r in csv.reader(io.StringIO(text)) if r]
    if len(rows) < 2 or "rps" not in rows[0]:
        raise ChaosError(f"redis-benchmark printed no rate: {(text.strip().splitlines() or ['nothing'])[-1][:200]}")
    return float(rows[1][rows[0].index("rps")])


def _in_netns(netns: str | None):
    if not netns:
        return None

    def enter() -> None:
        from harness.cluster.netns import enter_netns

        enter_netns(netns)

    return enter


def _run_in(netns: str | None, argv: list[str], timeout: float) -> subprocess.CompletedProcess:
    """subprocess.run(argv, capture_output=True, text=True) inside `netns`, started with presses held
    (a press in the at-fork hooks a preexec_fn runs would be lost) and killed if one comes later."""
    proc = None
    try:
        with deferred():
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    preexec_fn=_in_netns(netns))
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        if proc is not None:
            proc.kill()
            proc.communicate()
        raise
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


# Sets KEYS[1]..%012d (redis-benchmark's __rand_int__) for 0..ARGV[1]-1 to ARGV[2]: the locks the
# release half then finds held by its value, so it runs the script's full path (GET, then DEL).
_FILL = "for i = 0, tonumber(ARGV[1]) - 1 do redis.call('SET', KEYS[1] .. string.format('%012d', i), ARGV[2]) end"
FILL_FACTOR = 3  # keys filled per release request: about 85 % of the releases find a lock of theirs


def _benchmarks(nodes, netns: str | None, connections: int, requests: int, keyspace: int,
                *command: str) -> list[float]:
    """redis-benchmark on every node at once (one process each), `command` `requests` times over
    `connections`, keys __rand_int__ below `keyspace`: each node's requests per second."""
    tool = redis_benchmark()
    procs = []
    try:
        with deferred():  # a press in the at-fork hooks a preexec_fn runs would be lost
            for n in nodes:
                procs.append(subprocess.Popen([tool, "-h", n.host, "-p", str(n.port), "-c", str(connections), "-n",
                                               str(requests), "-r", str(keyspace), "--csv", *command],
                                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                              preexec_fn=_in_netns(netns)))
        outs = [p.communicate(timeout=600) + (p.returncode,) for p in procs]
    except BaseException:
        for p in procs:
            p.kill()
            p.communicate()
        raise
    rates = []
    for out, err, code in outs:
        if code != 0:
            raise ChaosError(f"redis-benchmark failed ({code}): {(err.strip() or out.strip()).splitlines()[-1:]}")
        rates.append(parse_csv_rps(out))
    return rates


def redis_yardstick(nodes, netns: str | None, *, requests: int = 100_000, connections: int = 32,
                    ttl_ms: int = 60_000, acquire: tuple[str, ...] | None = None) -> Yardstick:
    """redis-benchmark on the lock nodes (valkey, nothing else on them), all at once: the
    design's acquire (default: workloads.redis_single's script; Redlock's is a plain SET NX PX
    on each master), then its release script on locks filled beforehand, `requests` each over
    `connections` per node. A design that asks every node in turn for each cycle (Redlock) is
    as fast as its slowest node: the figure is that node's."""
    from harness.cluster.valkey import connect
    from workloads.redis_common import RELEASE
    from workloads.redis_single import ACQUIRE

    value = "held-by-yardstick"
    fence = f"{PREFIX}fence"
    acquire = acquire or ("EVAL", ACQUIRE, "2", f"{PREFIX}__rand_int__", fence, value, str(ttl_ms))
    conns = [connect(n, timeout=30.0) for n in nodes]
    try:
        for c in conns:
            c.flushall()
        acquires = _benchmarks(nodes, netns, connections, requests, BENCH_KEYS, *acquire)
        acquired = [int(c.get(fence) or 0) if acquire[0] == "EVAL" else c.dbsize() for c in conns]
        keyspace = FILL_FACTOR * requests
        for c in conns:
            c.flushall()
            c.eval(_FILL, 1, PREFIX, keyspace, value)
        dels_before = [_calls(c, "del") for c in conns]
        releases = _benchmarks(nodes, netns, connections, requests, keyspace,
                               "EVAL", RELEASE, "1", f"{PREFIX}__rand_int__", value)
        deleted = [_calls(c, "del") - b for c, b in zip(conns, dels_before)]
        for c in conns:
            c.flushall()
    finally:
        for c in conns:
            c.close()
    rates = [cycle_rate(a, r) for a, r in zip(acquires, releases)]
    slowest = rates.index(min(rates))
    # redis-benchmark sends a few requests past -n on some connections; the shares are capped at 1
    return Yardstick(tool="redis-benchmark" + (f" on {len(nodes)} masters at once, the slowest" if len(nodes) > 1 else ""),
                     cycles_per_s=round(rates[slowest], 1), acquires_per_s=acquires[slowest],
                     releases_per_s=releases[slowest], connections=connections,
                     acquired_share=min(1.0, acquired[slowest] / requests),
                     deleted_share=min(1.0, deleted[slowest] / requests))


def _calls(conn, command: str) -> int:
    """How many times the server ran `command` (INFO commandstats counts the scripts' calls)."""
    stats = conn.info("commandstats").get(f"cmdstat_{command}") or {}
    return int(stats.get("calls", 0))


def _redis(nodes, netns: str | None) -> Yardstick:
    lock = [n for n in nodes if n.role == "lock"]
    return redis_yardstick(lock[:1], netns)


def _redlock(nodes, netns: str | None) -> Yardstick:
    """Redlock's acquire on each master is a plain SET NX PX (workloads/redlock.py)."""
    lock = [n for n in nodes if n.role == "lock"]
    return redis_yardstick(lock, netns, requests=40_000,
                           acquire=("SET", f"{PREFIX}__rand_int__", "held-by-yardstick", "NX", "PX", "60000"))


ETCD_TOOL = Path(__file__).resolve().parents[3] / "clients" / "etcd-yardstick" / "bin" / "etcd-yardstick"


def etcd_yardstick(nodes, netns: str | None, *, clients: int = 32, conns: int = 4, seconds: float = 4.0,
                   ttl_s: int = 2) -> Yardstick:
    """clients/etcd-yardstick against every etcd member (clientv3 balances over them)."""
    if not ETCD_TOOL.exists():
        raise MissingDependency(f"{ETCD_TOOL} not built; run `make install` (scripts/clients/etcd-yardstick.sh)")
    endpoints = ",".join(f"{n.host}:{n.port}" for n in nodes if n.role == "lock")
    out = _run_in(netns, [str(ETCD_TOOL), "-endpoints", endpoints, "-clients", str(clients), "-conns", str(conns),
                          "-seconds", str(seconds), "-ttl", str(ttl_s)], timeout=seconds + 60)
    if out.returncode != 0:
        raise ChaosError(f"etcd-yardstick failed ({out.returncode}): "
                         f"{(out.stderr.strip() or out.stdout.strip() or 'no output').splitlines()[-1][:300]}")
    got = json.loads(out.stdout.strip().splitlines()[-1])
    return Yardstick(tool=f"etcd-yardstick (Go clientv3, {conns} connections)", cycles_per_s=round(got["cycles_per_s"], 1),
                     connections=clients)


ZK_TOOL = Path(__file__).resolve().parents[3] / "clients" / "zk-yardstick" / "bin" / "zk-yardstick"


def zk_yardstick(nodes, netns: str | None, *, clients: int = 32, sessions: int = 4, seconds: float = 4.0) -> Yardstick:
    """clients/zk-yardstick against the whole ensemble (the Java client picks a server per session)."""
    if not ZK_TOOL.exists():
        raise MissingDependency(f"{ZK_TOOL} not built; run `make install` (scripts/clients/zk-yardstick.sh)")
    connect = ",".join(f"{n.host}:{n.port}" for n in nodes if n.role == "lock")
    out = _run_in(netns, [str(ZK_TOOL), connect, str(clients), str(sessions), str(seconds)], timeout=seconds + 60)
    if out.returncode != 0:
        raise ChaosError(f"zk-yardstick failed ({out.returncode}): "
                         f"{(out.stderr.strip() or out.stdout.strip() or 'no output').splitlines()[-1][:300]}")
    got = json.loads(out.stdout.strip().splitlines()[-1])
    return Yardstick(tool=f"zk-yardstick (ZooKeeper Java client, {sessions} sessions)",
                     cycles_per_s=round(got["cycles_per_s"], 1), connections=clients)


# design -> its yardstick, given the lock nodes as client c1 reaches them and c1's namespace
YARDSTICKS = {"redis": _redis, "redlock": _redlock, "etcd": etcd_yardstick, "zookeeper": zk_yardstick}


def measure_yardstick(backend: str, nodes, netns: str | None) -> Yardstick:
    """The yardstick of `backend` on its running servers (ChaosError: none for it, or it failed)."""
    if backend not in YARDSTICKS:
        raise ChaosError(f"no yardstick for {backend!r}; there is one for: {', '.join(YARDSTICKS)}")
    return YARDSTICKS[backend](nodes, netns)
