"""etcd 3.4 (Debian's etcd-server) as a ServerKind: static bootstrap, probes over HTTP.

A group of etcd nodes is one Raft cluster bootstrapped statically: every member is started
with the same --initial-cluster (name=peer URL for each peer) and an --initial-cluster-token
that carries the run id. etcd derives member and cluster ids from the peer URLs and the
token, so a token reused with the same names and URLs on fresh data dirs would collide with
an earlier run ("already bootstrapped", or worse, a member joining a stranger's cluster).

What this module measures, and how:
  * node_ready: the member's GET /health says {"health":"true"}. In 3.4 that needs a known
    leader AND a quorum read through Raft (the server gives it 1 s), so an isolated or
    restarted member is "ready" only once it has rejoined a majority.
  * cluster_ready / leader(): every member's Maintenance/Status over the v3 JSON gateway
    (POST /v3/maintenance/status); the leader is the member a majority names in its status.
  * read_clock: etcd has no time API. Go's net/http stamps every response with a `Date`
    header from time.Now() of the serving process, in whole seconds. See read_clock.

libfaketime does not reach etcd (Go reads the clock through the vDSO), so its only
`clock_methods` is "timewarp": the clock nemesis moves an etcd server's wall clock by
patching its vDSO (harness/cluster/timewarp.py, provider.clock_method).

Never mutates the cluster: probes are reads. No process handling (the provider owns it).
"""

from __future__ import annotations

import email.utils
import json
import shutil
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Mapping, Sequence

from harness.core.contracts.cluster import Node
from harness.core.errors import MissingDependency

# Failure detection tuned for chaos tests on a 2-core host: a leader is suspected after
# 1 s without heartbeats (the default is 100 ms / 1000 ms as well, but we pin it so a
# future default change does not silently slow every fault down).
HEARTBEAT_MS = 100
ELECTION_MS = 1000


def etcd_binary() -> str:
    path = shutil.which("etcd")
    if path is None:
        raise MissingDependency("etcd not found on PATH; run `make install` (apt package etcd-server)")
    return path


def client_url(node: Node) -> str:
    return f"http://{node.host}:{node.port}"


def peer_url(node: Node) -> str:
    return f"http://{node.host}:{node.peer_port}"


def cluster_token(node: Node) -> str:
    """Same for every member of one run, different for every run (the state dir is per run)."""
    return f"chaoslock-{Path(node.data_dir).parent.name}"


def _http(node: Node, path: str, *, body: bytes | None = None, timeout: float = 1.0):
    """One HTTP request to a member's client URL: (status, headers, parsed JSON or None)."""
    req = urllib.request.Request(client_url(node) + path, data=body,
                                 headers={"Content-Type": "application/json"} if body is not None else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            raw = r.read()
            status, headers = r.status, r.headers
    except urllib.error.HTTPError as e:  # /health answers 503 with a JSON body when unhealthy
        raw, status, headers = e.read(), e.code, e.headers
    try:
        data = json.loads(raw) if raw else None
    except ValueError:
        data = None
    return status, headers, data


def healthy(node: Node, timeout: float = 2.0) -> bool:
    """True when the member's /health reports healthy (leader known and a quorum read works).

    The timeout must exceed the 1 s etcd itself allows the quorum read, or a slow-but-healthy
    member looks down.
    """
    try:
        _, _, data = _http(node, "/health", timeout=timeout)
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("health") == "true"


def status(node: Node, timeout: float = 1.0) -> dict | None:
    """The member's Maintenance/Status as JSON (ids are decimal strings), or None if it is unreachable.

    Served locally by the member (no quorum needed), so an isolated member still answers
    with its own, possibly stale, idea of the leader.
    """
    try:
        code, _, data = _http(node, "/v3/maintenance/status", body=b"{}", timeout=timeout)
    except (OSError, ValueError):
        return None
    return data if code == 200 and isinstance(data, dict) else None


def leader(nodes: Sequence[Node], timeout: float = 1.0) -> str | None:
    """Name of the current leader, or None when there is none a majority agrees on.

    A member is the leader when a majority of `nodes` name its member id in their status.
    An isolated ex-leader that still believes in itself cannot form a majority. A leader the
    harness cannot reach (SIGSTOPped, say) is still named while a majority follows it; its
    name then comes from the member list.
    """
    votes: dict[str, int] = {}
    ids: dict[str, str] = {}
    answered: list[Node] = []
    for n in nodes:
        st = status(n, timeout)
        if st is None:
            continue
        answered.append(n)
        me = st.get("header", {}).get("member_id")
        if me:
            ids[me] = n.name
        lead = st.get("leader")
        if lead and lead != "0":
            votes[lead] = votes.get(lead, 0) + 1
    for lead, count in votes.items():
        if count > len(nodes) // 2:
            if lead not in ids:
                ids.update(member_names(answered[0], timeout))
            return ids.get(lead)
    return None


def member_names(node: Node, timeout: float = 1.0) -> dict[str, str]:
    """member id (decimal string) -> member name, as `node` knows the membership; {} if it does not answer."""
    try:
        code, _, data = _http(node, "/v3/cluster/member/list", body=b"{}", timeout=timeout)
    except (OSError, ValueError):
        return {}
    if code != 200 or not isinstance(data, dict):
        return {}
    return {m["ID"]: m.get("name", "") for m in data.get("members", []) if "ID" in m}


def client(node: Node, timeout: float = 2.0):
    """A pyetcd (python-etcd3 API) client talking to this one member only.

    Why not pyetcd.client(): its endpoint marks itself failed for 300 s after a single
    UNAVAILABLE or DEADLINE_EXCEEDED, and every later call then raises
    ValueError("Trying to use a failed node") without touching the network. time_retry=0
    makes each call try again. The caller must close() it.
    """
    import pyetcd

    ep = pyetcd.Endpoint(node.host, node.port, secure=False, time_retry=0)
    return pyetcd.MultiEndpointEtcd3Client(endpoints=[ep], timeout=timeout, failover=False)


def date_header(node: Node, timeout: float = 1.0) -> int:
    """The member's wall clock, floored to the second, from its HTTP Date header."""
    _, headers, _ = _http(node, "/version", timeout=timeout)
    stamp = headers.get("Date")
    if not stamp:
        raise OSError(f"{node.name} sent no Date header")
    return int(email.utils.parsedate_to_datetime(stamp).timestamp())


def read_clock_precise(node: Node, budget: float = 1.5, step: float = 0.005) -> float:
    """The member's wall clock to within a few ms, found by waiting for its Date header to tick.

    Polls /version until the second in Date changes; at that instant the server's clock is
    exactly the new whole second. Returns that second plus the local time elapsed since,
    so the result refers to the moment of return. Costs up to one second.
    """
    deadline = time.monotonic() + budget
    first = date_header(node)
    while time.monotonic() < deadline:
        t0 = time.monotonic()
        now = date_header(node)
        t1 = time.monotonic()
        if now != first:
            # The tick happened between the previous poll and this one, so at this request's
            # midpoint the server read at least `now`: biased low by at most step + one request.
            return now + (time.monotonic() - (t0 + t1) / 2)
        time.sleep(step)
    raise OSError(f"{node.name}: Date header did not advance within {budget}s")


class EtcdKind:
    """etcd 3.4 members bootstrapped statically from the group's peers.

    `pre_vote` is off by default because it is off by default in 3.4 (on in 3.5+): a member
    that was partitioned away rejoins with a higher term and deposes the leader. Turn it on
    to test the 3.5 behaviour.
    """

    name = "etcd"
    prefix = "e"
    default_port = 2379
    peer_ports = (2380, 0)
    binary = "etcd"
    image = "chaoslock-etcd:3.4.23"
    compose_hosts = range(31, 34)
    health = ("etcdctl", "--endpoints=http://{host}:{port}", "endpoint", "health")
    debs = ("etcd-server",)
    host_check = "command -v etcd"
    strip_env = ("ETCD_",)  # etcd reads every ETCD_* variable as a flag
    data_dir_mode = 0o700  # etcd 3.4 warns (and 3.5 refuses) otherwise
    clock_methods = ("timewarp",)  # Go reads the time through the vDSO, out of libfaketime's reach
    clock_method = "timewarp"
    clock_expiry = False  # leases run on the monotonic clock
    clock_read_error_s = 1.0  # its only clock read-back is the 1 s HTTP Date header
    persists = True
    sessions = True  # a lock is a key attached to the client's lease
    stops_together = False  # a leader stopped with its peers waits for one to take over, until SIGKILL

    def leader(self, nodes: Sequence[Node]) -> str | None:
        return leader(nodes)

    def __init__(self, pre_vote: bool = False):
        self.pre_vote = pre_vote

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> EtcdKind:
        return cls()

    def check_installed(self) -> None:
        etcd_binary()

    def config_files(self, node: Node, peers: Sequence[Node]) -> dict[str, str]:
        return {}  # etcd creates the rest; an existing member dir is what makes a restart rejoin

    def argv(self, node: Node, peers: Sequence[Node], binary: str | None = None) -> list[str]:
        initial = ",".join(f"{p.name}={peer_url(p)}" for p in peers)
        return [binary or etcd_binary(),
                "--name", node.name,
                "--data-dir", node.data_dir,
                "--listen-client-urls", client_url(node),
                "--advertise-client-urls", client_url(node),
                "--listen-peer-urls", peer_url(node),
                "--initial-advertise-peer-urls", peer_url(node),
                "--initial-cluster", initial,
                "--initial-cluster-token", cluster_token(node),
                # Ignored when the data dir already holds a member (a restart), as it should be.
                "--initial-cluster-state", "new",
                "--heartbeat-interval", str(HEARTBEAT_MS),
                "--election-timeout", str(ELECTION_MS),
                f"--pre-vote={'true' if self.pre_vote else 'false'}",
                # capnslog is deprecated in 3.4 and prints a warning per start; zap logs JSON.
                "--logger", "zap", "--log-outputs", "stderr"]

    def env(self, node: Node) -> dict[str, str]:
        # etcd reads every ETCD_* variable as a flag; the provider strips the inherited ones
        # and we add none.
        return {}

    def node_ready(self, node: Node) -> bool:
        return healthy(node)

    def cluster_ready(self, nodes: Sequence[Node]) -> bool:
        """Every member healthy and every member naming the same leader, which is one of them."""
        if not all(healthy(n) for n in nodes):
            return False
        statuses = [status(n) for n in nodes]
        if any(s is None for s in statuses):
            return False
        leads = {s.get("leader") for s in statuses}
        ids = {s.get("header", {}).get("member_id") for s in statuses}
        return len(leads) == 1 and leads <= ids

    def requests_served(self, node: Node) -> int:
        """gRPC messages this member has received: unary calls, and each message of a
        stream (a keepalive, a watch request), from /metrics grpc_server_msg_received_total."""
        with urllib.request.urlopen(client_url(node) + "/metrics", timeout=1.0) as r:
            text = r.read().decode()
        return int(sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                       if line.startswith("grpc_server_msg_received_total{")))

    def read_clock(self, node: Node) -> float:
        """The member's wall clock from its HTTP Date header, 1 s resolution.

        Date is time.Now() of the etcd process floored to the second, so the true value lies
        in [Date, Date + 1); we return the midpoint (error <= 0.5 s plus the request time).
        Use read_clock_precise() when sub-second accuracy is worth up to a second of polling.
        """
        return date_header(node) + 0.5
