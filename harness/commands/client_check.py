"""`chaos client-check CMD --servers KIND:N`: does a lock client speak the protocol?

A short, fault-free conformance sequence against a real cluster, with two instances of
the client (two processes, as two workers would run them): each step prints PASS, NOTE (passed,
with something to say: a reply without valid_ms) or FAIL with one sentence, and the command
exits 0 only when no step failed. Run it before
`chaos run --client`: a chaos run cannot tell a client that breaks the protocol from one
that breaks under faults.
"""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
import time
from pathlib import Path
from typing import Callable

import click

from harness.core.errors import BadArgument, LockLost, NotAcquired


class Note(str):
    """A step that passed with something to say (printed NOTE, not counted as failed)."""


def steps(a, b, key: str, ttl_ms: int) -> list[tuple[str, Callable[[], str | None]]]:
    """(what, check) pairs; a check returns None when it passed, a Note when it passed with
    something to say, else one sentence why not."""
    state: dict = {}

    def acquire_ok():
        lease = a.acquire(key, ttl_ms, 2.0)
        state["a"] = lease
        if not lease.value:
            return "acquire said ok without a value (the lease's proof of ownership)"
        return None

    def validity():
        v = state["a"].meta.get("valid_ms")
        if v is None:  # allowed (docs/client-protocol.md): a library that states no validity has none to report
            return Note("none stated: the harness records no validity for its grants, so fresh leases are not "
                        "judged and the cause of an overlap is unknown (docs/client-protocol.md)")
        if not 0 < v <= ttl_ms * 1.05 + 100:
            return f"the acquire reply's valid_ms is {v:g}, not within (0, TTL {ttl_ms}] (it counts from the reply)"
        return None

    def exclusive():
        try:
            b.acquire(key, ttl_ms, 0.5)
        except NotAcquired:
            return None
        return "a second client got the lock while the first held it, with no fault at all"

    def still_exclusive():
        if "renewed" not in state:
            return None  # the client does not renew: nothing to check
        why = exclusive()
        return why and why.replace("held it", "held it after renewing")

    def held():
        return "held said false for a lease that was just acquired" if a.still_held(state["a"]) is False else None

    def renew():
        try:
            state["a"] = a.renew(state["a"])
        except LockLost as e:
            if "unsupported" in str(e):
                return None  # allowed: the harness then does not renew this client
            return f"renew of a held lease failed: {e}"
        state["renewed"] = True
        return None

    def release_ok():
        return None if a.release(state["a"]) else "release of a held lease said fail"

    def release_again():
        return "releasing a lease that was already released said ok" if a.release(state["a"]) else None

    def other_gets_it():
        lease = b.acquire(key, ttl_ms, 2.0)
        state["b"] = lease
        tokens = (state["a"].token, lease.token)
        if None not in tokens and not tokens[1] > tokens[0]:
            return f"fencing tokens must increase from one holder to the next; got {tokens[0]} then {tokens[1]}"
        return None

    def release_b():
        return None if b.release(state["b"]) else "release of a held lease said fail"

    def clock():
        rep = a._op({"op": "clock"}, 5.0)
        if rep["type"] == "unsupported":
            return None  # allowed: a clock skew on this client then cannot be read back
        now_ms = rep.get("now_ms")
        if rep["type"] != "ok" or not isinstance(now_ms, (int, float)) or isinstance(now_ms, bool):
            return f"clock must answer ok with now_ms (its wall clock, ms since the epoch), not {rep}"
        if abs(now_ms / 1000 - time.time()) > 5:
            return f"clock says {now_ms} ms since the epoch, {now_ms / 1000 - time.time():+.1f} s from this host's clock"
        return None

    def unknown_op():
        rep = a._op({"op": "no-such-op"}, 5.0)
        return None if rep["type"] == "unsupported" else f"an unknown op must be answered unsupported, not {rep['type']}"

    return [("acquire a free lock", acquire_ok), ("its reply carries the validity it believes (valid_ms)", validity),
            ("a second client cannot take it", exclusive),
            ("held says true while held", held), ("renew a held lease (or say unsupported)", renew),
            ("after the renew, a second client still cannot take it", still_exclusive),
            ("release it", release_ok), ("a second release says fail", release_again),
            ("the other client acquires it next, with a higher token", other_gets_it),
            ("and releases it", release_b), ("clock tells its wall clock (or says unsupported)", clock),
            ("an unknown op is unsupported", unknown_op)]


@click.command(name="client-check")
@click.argument("command")
@click.option("--servers", required=True, metavar="KIND:N", help="the lock service the client talks to, e.g. etcd:3")
@click.option("--ttl", "ttl_ms", type=click.IntRange(100, 600_000), default=5000, show_default=True)
def client_check(command, servers, ttl_ms):
    """Check that a lock client COMMAND speaks the client protocol, against a real cluster."""
    from harness.core import interrupts

    with interrupts.first_press_ends():  # later presses cannot cut the cleanup short
        return _client_check(command, servers, ttl_ms)


def _client_check(command, servers, ttl_ms):
    from harness.cluster.assemble import make_cluster
    from harness.core.spec import TestSpec
    from results.store import new_run_id
    from harness.cluster.containment import PROCS_ENV
    from workloads.external import LOG_ENV, ClientBroke, ExternalClient

    from harness.core.pathcheck import check_program

    spec = TestSpec(backend="external", concurrency=1,
                    options={"command": command, "servers": servers}).validate()
    ExternalClient.servers_for(spec.options)
    check_program(command, "COMMAND")  # the program is there and runs: before any server starts
    run_id = new_run_id()
    # the servers' logs and the clients' stderr: removed at the end, unless the servers never
    # came up (the error names this directory, so its logs must still be there to read)
    logs = tempfile.mkdtemp(prefix="chaos-client-check-")
    cluster = make_cluster(spec, run_id, Path(logs) / "servers", [])
    failed = 0
    clients: list[ExternalClient] = []
    os.environ[LOG_ENV] = os.path.join(logs, "client.log")
    keep = True
    try:
        cluster.up()
        keep = False
        if cluster.contained is not None and cluster.contained.procs("clients"):
            os.environ[PROCS_ENV] = cluster.contained.procs("clients")  # each client process joins the run's cgroup
        lock_nodes = [n for n in cluster.nodes if n.role == "lock"]
        for _ in range(2):
            c = ExternalClient(spec.options, None)
            c.open(lock_nodes)
            clients.append(c)
        print(f"client-check `{command}` against {servers} ({', '.join(n.endpoint for n in lock_nodes)})")
        for what, check in steps(*clients, key=f"check-{int(time.time())}", ttl_ms=ttl_ms):
            try:
                why = check()
            except KeyError:  # the lease an earlier step should have produced
                why = "not run: it needs a lease an earlier step failed to get"
            except (ClientBroke, NotAcquired, LockLost, BadArgument) as e:
                why = f"{type(e).__name__}: {e}"
            failed += why is not None and not isinstance(why, Note)
            word = "PASS" if why is None else "NOTE" if isinstance(why, Note) else "FAIL"
            print(f"  {word}  {what}" + (f": {why}" if why else ""))
    finally:
        for c in clients:
            c.close()
        os.environ.pop(PROCS_ENV, None)
        cluster.down()
        if not keep:
            shutil.rmtree(logs, ignore_errors=True)
    print(f"{'all steps passed' if not failed else f'{failed} step(s) failed'}: `{shlex.join(shlex.split(command))}`")
    return 1 if failed else 0
