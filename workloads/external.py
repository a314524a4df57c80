"""Any lock client, in any language: a child process that speaks JSON lines.

`chaos run --client 'CMD ARGS' --servers etcd:3` starts CMD once per worker, as a long-lived
child inside that worker's network namespace and process group (so pause-holder stops it
with its relay), and drives it with one JSON object per line (Maelstrom's model). The
protocol, in full (docs/client-protocol.md has an example):

  request  {"id": 1, "op": "init", "servers": [{"kind", "name", "host", "port"}...],
            "lock": "mutex" | "rw" | "semaphore:N", "options": {...}}
           {"id": 2, "op": "acquire", "key": k, "ttl_ms": t, "timeout_s": s}; with `--lock rw` also
            "mode": "read" | "write", with `--lock semaphore:N` also "permits": N (the mutex: neither)
           {"id": 3, "op": "release" | "renew" | "held", "key": k, "value": v, "ttl_ms": t}
           {"id": 4, "op": "clock"}: the client's own wall clock, so a clock skew on it is read back
           {"id": 5, "op": "close"}
  reply    {"id": n, "type": "ok", ...}: for acquire "value" (the lease's proof of ownership),
           "token" (fencing token or null) and "valid_ms" (how long, from this reply, the client
           believes the lease is valid); for renew "valid_ms"; for held "held": true|false; for clock
           "now_ms" (milliseconds since the epoch, as the client's wall clock says).
           {"id": n, "type": "fail", "error": "..."}: it certainly did not happen (acquire:
           not acquired; release: not held; renew: the lease is lost).
           {"id": n, "type": "info" | "error", "error": "..."}: it may have happened.
           {"id": n, "type": "unsupported"}: the client has no such op (renew, held, clock); the
           harness adapts: no renewals, no opinion on holding, skews it cannot read back. To
           init: it has no such lock kind; the run is refused (its run dir discarded).

A client that does not answer within its op's timeout plus a margin, writes a line that is
not JSON or not its reply, or dies: the pending op is `info`, the child is ended and a new
one started at the next op (the worker continues as a new process id, Jepsen's rule), and
the reason goes to the worker's log. Anything the child writes on stderr is kept beside it.

`clock-skew -o clock_target=clients` moves the child's wall clock with the vDSO patch
(harness/cluster/timewarp.py), which reaches Go (time.Now), the JVM, Node and CPython alike
(their clock reads go through the vDSO): a thread here follows the offset the nemesis sets,
patches the running child (again after every restart), and reads it back with `clock`.
Why not libfaketime: it leaves shared-memory files per process a killed run cannot name, it
fakes the monotonic clocks too (a client skew here is a wall-clock skew, as in-process), and
Go never calls the libc it hooks.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import select
import shlex
import signal
import subprocess
import threading
import time
from typing import Any, Mapping, Sequence

from harness.core.contracts.cluster import Node
from harness.cluster.containment import PROCS_ENV, RunCgroup
from harness.cluster.kinds import KINDS
from harness.core.errors import CLIENT_DIED, BadArgument, LockLost, NotAcquired
from harness.core.interrupts import die_with_parent
from harness.core.kinds import LockKind, backends_with
from harness.core.options import Option, values
from harness.core.outputcap import CappedLog, pump
from harness.core.contracts.client import Clock, Lease
from workloads.references import (CLIENTS, REFERENCE_CLIENTS, ReferenceClient,  # noqa: F401 (re-exported)
                                  reference_client, reference_kinds)

MARGIN_S = 2.0  # on top of an op's own timeout before the client counts as hung
ROUND_TRIPS = 4  # of a slow link's delay, added to that margin
MAX_LINE = 1 << 20  # longest reply line a client may write
MAX_VALUE = 4096  # longest lease value (it is recorded in every op of the lease)
MAX_VALID_MS = 86_400_000.0  # a validity beyond a day either way is not a lease
START_S = 20.0  # a client must answer init within this (a JVM needs a few seconds)
LOG_ENV = "CHAOSLOCK_WORKER_LOG"  # the worker's log; the child's stderr goes beside it
WRAP_ENV = "CHAOSLOCK_CLIENT_WRAP"  # JSON argv the command runs after: its container elsewhere (swarm -o clients_on)


class ClientBroke(Exception):
    """The child hung, died or wrote something that is not its reply (an `info`)."""


class ClientDied(ClientBroke):
    """The child exited on its own, untold (not killed by the harness, not at close): a
    finding, "client died" (harness/checker/alive.py), besides the op it leaves in doubt."""




def parse_servers(text: str) -> tuple[str, int]:
    """"etcd:3" -> ("etcd", 3), or a BadArgument saying how to write it."""
    kind, _, count = str(text).partition(":")
    if kind not in KINDS or not count.isdigit() or not 1 <= int(count) <= 9:
        raise BadArgument(f"--servers {text!r} must be KIND:COUNT with KIND one of {', '.join(KINDS)} and "
                          f"COUNT 1-9, for example etcd:3")
    return kind, int(count)


def option_ms(options: Mapping[str, Any] | None, name: str) -> float | None:
    """An option given in ms (a slow link's delay, a client's own session or command timeout, which
    reach a client as the strings given), as a number of 0..600000 ms; None when absent or not one."""
    try:
        v = float((options or {}).get(name))
    except (TypeError, ValueError):
        return None
    return v if 0 <= v <= 600_000 else None


class ExternalClient:
    """A LockClient that relays to a child process over the protocol above."""

    name = "external"
    has_fencing = True  # a client that sends no token (null) is simply not fenced
    servers = ("valkey", 1)  # replaced by -o servers (servers_for)
    forwards_options = True  # every -o option reaches the client process in its init, as given
    lock_kinds = ("mutex", "rw", "semaphore")  # the client says unsupported to a kind it has not
    clock_reads = ("every wall-clock read of the client process (vDSO patch); its monotonic clock stays true",)
    OPTIONS = (
        Option(name="command", type=str, default="", help="the client's command line (set by --client)",
               given_by="--client CMD"),
        Option(name="servers", type=str, default="valkey:1", help="KIND:COUNT of the lock service (set by --servers)"),
        Option(name="lock", type=str, default="mutex", help="the lock kind init asks the client for (set by --lock)"),
        Option(name="op_timeout_s", type=float, default=5.0, above=0, max=600,
               help="how long release, renew and held may take before the client counts as hung, s"),
        Option(name="release_checks_owner", type=str, default="unknown", choices=("yes", "no", "unknown"),
               help="whether the client's release deletes only its own lock (compare-and-delete): with yes, "
                    "a slow or cut release is no excuse for a later holder granted early"),
    )

    @staticmethod
    def release_checks_owner(options: Mapping[str, Any]) -> bool | None:
        """What `-o release_checks_owner` says; None: unknown (the cause checker then allows
        that a release in flight during a network fault deleted another's lock)."""
        return {"yes": True, "no": False}.get(str(options.get("release_checks_owner", "unknown")))

    @classmethod
    def kind_refusal(cls, options: Mapping[str, Any], kind: LockKind) -> str | None:
        """Why the client cannot serve `kind` (None: it can, or only its init can tell)."""
        found = reference_kinds(values(options, cls.OPTIONS)["command"]) if kind.name != "mutex" else None
        if found is None or kind.name in found[1]:
            return None
        who, have = found
        others = [b for b in backends_with(kind.name) if b != "external"]
        return (f"{who} has no {kind.name} lock (it has: {', '.join(have)}); run it with --lock mutex"
                + (f", or relay a backend that has one ({', '.join(others)})" if " relaying " in who and others else ""))

    @classmethod
    def servers_for(cls, options: Mapping[str, Any]) -> tuple[str, int]:
        return parse_servers(values(options, cls.OPTIONS)["servers"])

    def __init__(self, options: Mapping[str, Any] | None = None, clock: Clock | None = None):
        v = values(options, self.OPTIONS)
        if not v["command"].strip():
            raise BadArgument("an external client needs its command: chaos run --client 'CMD ARGS' --servers KIND:N")
        self.argv = shlex.split(v["command"])
        if os.environ.get(WRAP_ENV):  # the worker's client runs on another engine: `docker run -i ... IMAGE` first
            self.argv = [*json.loads(os.environ[WRAP_ENV]), *self.argv]
        self.op_timeout = v["op_timeout_s"]
        # a slow link (slow-link's -o delay_ms / jitter_ms) makes each of the client's round trips
        # slower: its answers may come that much later (a few round trips each, Redlock's to five
        # servers) before it counts as hung, so the harness never breaks the client first
        self.margin = MARGIN_S + ROUND_TRIPS * 2 * ((option_ms(options, "delay_ms") or 0.0) + (option_ms(options, "jitter_ms") or 0.0)) / 1000
        self.lock = v["lock"]  # told in init, apart from the options (TestSpec.validate sets it from --lock)
        self.options = {k: val for k, val in (options or {}).items() if k not in ("command", "servers", "lock")}
        self.proc: subprocess.Popen | None = None
        self.nodes: Sequence[Node] = ()
        self.next_id = 0
        self.buf = b""
        self.unsupported: set[str] = set()
        self.death: str | None = None  # a ClientDied swallowed by a side question (clock), raised at the next op
        self.starts = 0
        self.log = os.environ.get(LOG_ENV)
        self.io = threading.RLock()  # one request at a time on the child's pipes
        self.clock = clock
        self.closed = threading.Event()
        self.ready_pid: int | None = None  # the child that has answered its init
        self.stderr_done: threading.Thread | None = None  # stores the child's stderr, up to a cap
        self.read_pending: float | None = None  # an offset whose read-back is still to be asked
        self.follows_clock = clock is not None and clock.shared is not None and \
            self.options.get("clock_target") == "clients"

    # -- the child ---------------------------------------------------------------------------
    def _start(self) -> None:
        # Same process group as the worker (pause-holder stops both); dies with it; in the
        # run's cgroup (the worker is; client-check names it in PROCS_ENV), so whatever it
        # forks is found. Its stderr is kept up to a cap (harness/core/outputcap.py).
        procs = os.environ.get(PROCS_ENV)

        def prepare() -> None:
            die_with_parent()
            for s in (signal.SIGTERM, signal.SIGHUP):  # the worker ignores them (the runner stops it); its client need not
                signal.signal(s, signal.SIG_DFL)
            if procs:
                RunCgroup.join_file(procs)

        try:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE if self.log else subprocess.DEVNULL, preexec_fn=prepare)
        except OSError as e:
            raise BadArgument(f"cannot start the client `{shlex.join(self.argv)}`: {e.strerror}; check the command") from None
        if self.log:
            self.stderr_done = pump(os.dup(self.proc.stderr.fileno()), CappedLog(self.log + ".client-stderr"),
                                    name="client-stderr")
            self.proc.stderr.close()
        self.buf = b""
        self.starts += 1
        servers = [{"kind": n.kind, "name": n.name, "host": n.host, "port": n.port} for n in self.nodes]
        try:
            rep = self._call({"op": "init", "servers": servers, "lock": self.lock, "options": self.options}, START_S)
        except ClientBroke as e:
            raise BadArgument(f"the client `{shlex.join(self.argv)}` did not start: {e}{self._stderr_tail()}") from None
        if rep["type"] == "unsupported":  # it has no such lock kind: a refusal, before the workload
            self._end("it answered unsupported to init")
            why = f" ({str(rep['error'])[:200]})" if rep.get("error") else ""
            raise BadArgument(f"the client `{shlex.join(self.argv)}` answered unsupported to init with lock "
                              f"{self.lock}{why}: " + ("it has no such lock; run it with --lock mutex" if self.lock != "mutex"
                                                       else "a client must answer ok to init (docs/client-protocol.md)"))
        self.ready_pid = self.proc.pid

    def _stderr_tail(self) -> str:
        if not self.log:
            return ""
        if self.stderr_done is not None:
            self.stderr_done.join(2)  # the child is gone: what it wrote last is being stored
        try:
            with open(self.log + ".client-stderr", "rb") as f:
                f.seek(0, 2)
                f.seek(max(0, f.tell() - 300))
                tail = f.read().decode(errors="replace").strip().splitlines()[-3:]
        except OSError:
            return ""
        return f"; its stderr ends: {' | '.join(tail)}" if tail else ""

    def _end(self, why: str) -> None:
        """End the child (after a hang, a bad line or its death); the next op starts a new one."""
        with self.io:
            p, self.proc = self.proc, None
        if p is None:
            return
        self._note(f"external client pid {p.pid} ended: {why}")
        if p.poll() is None:
            p.kill()
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:  # not even SIGKILL ended it (stuck in the kernel): the cgroup will
            self._note(f"external client pid {p.pid} did not end within 5 s of SIGKILL")
        for s in (p.stdin, p.stdout):
            try:
                s.close()
            except OSError:
                pass

    def _call(self, req: dict, timeout_s: float) -> dict:
        """Send one request and return its reply, or raise ClientBroke (the child is ended)."""
        with self.io:
            if self.read_pending is not None:
                self._read_pending()
                if self.proc is None:
                    raise ClientBroke("the client broke while it told its clock")
            return self._exchange(req, timeout_s)

    def _exchange(self, req: dict, timeout_s: float) -> dict:
        if self.proc is None:
            raise ClientBroke("the client is not running")
        self.next_id += 1
        req = {"id": self.next_id, **req}
        try:
            self.proc.stdin.write((json.dumps(req) + "\n").encode())
            self.proc.stdin.flush()
        except OSError:
            return self._broke(f"its stdin closed before {req['op']} ({self._gone()})")
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return self._broke(f"no reply to {req['op']} within {timeout_s:g} s")
            if len(self.buf) > MAX_LINE:
                return self._broke(f"its reply to {req['op']} is longer than {MAX_LINE >> 20} MiB without a newline")
            ready, _, _ = select.select([self.proc.stdout], [], [], left)
            if ready:
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                if not chunk:
                    return self._broke(f"its stdout closed during {req['op']} ({self._gone()})")
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        if len(line) > MAX_LINE:
            return self._broke(f"its reply to {req['op']} is longer than {MAX_LINE >> 20} MiB")
        try:
            rep = json.loads(line)
        except (ValueError, RecursionError):  # not JSON, not UTF-8, nested too deep
            return self._broke(f"its reply to {req['op']} is not JSON (or nested too deep): {line[:80]!r}")
        if not isinstance(rep, dict) or rep.get("id") != req["id"] or rep.get("type") not in (
                "ok", "fail", "info", "error", "unsupported"):
            return self._broke(f"its reply to {req['op']} (id {req['id']}) is not one: {line[:80]!r}")
        return rep

    def _gone(self) -> str:
        """How the child stands: exited (with its status) or still running."""
        try:
            status = self.proc.wait(0.5)
        except subprocess.TimeoutExpired:
            return "it is still running"
        return f"it exited with status {status}"

    def _broke(self, why: str) -> dict:
        died = self.proc is not None and self.proc.poll() is not None  # it exited before we ended it
        tail = self._stderr_tail() if died else ""
        self._end(why)
        if died:
            raise ClientDied(f"{CLIENT_DIED}: {why}{tail}")
        raise ClientBroke(why)

    def _op(self, req: dict, timeout_s: float) -> dict:
        if self.death is not None:  # it died while answering a question of ours (clock, held): say so first
            said, self.death = self.death, None
            raise ClientDied(said)
        if self.proc is None:
            self._start()
        return self._call(req, timeout_s)

    # -- the child's clock (clock-skew on clients) -------------------------------------------
    def _follow_clock(self) -> None:
        """Keep the child's wall clock at the offset the nemesis asks for, and read it back.

        Patching needs no word from the child, so it takes effect at once, even in the middle
        of an acquire; the read-back waits until the child is free (one request at a time)."""
        from harness.cluster import timewarp

        applied: tuple[int, float] | None = None  # (pid, offset) the running child has
        read: tuple[int, float] | None = None  # what was last read back
        while not self.closed.wait(0.02):
            proc, want = self.proc, self.clock.offset
            if proc is None or proc.pid != self.ready_pid:
                continue  # patch only after init: until its exec is done a process has no vDSO of its own
            if want == 0.0 and (applied is None or applied[0] != proc.pid):
                applied = (proc.pid, 0.0)  # a new process: its clock is true, nothing to patch
            elif applied != (proc.pid, want):
                try:
                    timewarp.set_offset(proc.pid, want)
                    applied = (proc.pid, want)
                except Exception as e:  # it died meanwhile (restarted next op), or ptrace refused
                    self._note(f"the clock of client pid {proc.pid} did not move to {want:+.3f} s: {e}")
                    self.closed.wait(0.5)
                    continue
            if read != (proc.pid, want) and applied == (proc.pid, want):
                read = (proc.pid, want)
                self.read_pending = want  # read back by this thread if the child is free, else before the next op
                if self.io.acquire(timeout=0.05):
                    try:
                        self._read_pending()
                    finally:
                        self.io.release()

    def _read_pending(self) -> None:
        """With the pipes held: ask the child its clock if a read-back is pending, and report
        the child's clock minus ours (NaN when it could not answer, infinity when it never can:
        `clock` unsupported). Done before the next op at the latest, so a busy client (one
        acquire after another) cannot starve it."""
        want, self.read_pending = self.read_pending, None
        if want is None or self.clock.offset != want or self.proc is None:
            return
        if "clock" in self.unsupported:
            self.clock.report(math.inf)
            return
        before = time.time()
        try:
            rep = self._exchange({"op": "clock"}, self.op_timeout + self.margin)
        except ClientBroke as e:
            if isinstance(e, ClientDied):
                self.death = str(e)
            self.clock.report(math.nan)
            return
        after = time.time()
        now_ms = rep.get("now_ms")
        if rep["type"] == "unsupported":
            self.unsupported.add("clock")
            measured = math.inf
        elif rep["type"] != "ok" or not isinstance(now_ms, (int, float)) or isinstance(now_ms, bool):
            measured = math.nan
        else:
            measured = now_ms / 1000 - (before + after) / 2
        if self.clock.offset == want:  # not already moved again while it answered
            self.clock.report(measured)

    def _note(self, line: str) -> None:
        if self.log:
            with open(self.log, "a") as f:
                f.write(line + "\n")

    # -- LockClient --------------------------------------------------------------------------
    def open(self, nodes: Sequence[Node]) -> None:
        self.nodes = [n for n in nodes if n.role == "lock"]
        self._start()
        if self.follows_clock:
            threading.Thread(target=self._follow_clock, name="client-clock", daemon=True).start()

    def acquire(self, key: str, ttl_ms: int, timeout_s: float, *, mode: str | None = None,
                permits: int | None = None) -> Lease:
        kind = {k: v for k, v in (("mode", mode), ("permits", permits)) if v is not None}  # harness/core/kinds.py
        rep = self._op({"op": "acquire", "key": key, "ttl_ms": ttl_ms, "timeout_s": timeout_s, **kind},
                       timeout_s + self.margin)
        if rep["type"] == "unsupported" and kind:
            raise BadArgument(f"the client answered unsupported to an acquire with {', '.join(kind)}: it has no "
                              f"{'rw lock' if mode else 'semaphore'}; run it with --lock mutex")
        if rep["type"] == "fail":
            raise NotAcquired(str(rep.get("error") or "not acquired"))
        if rep["type"] != "ok":
            raise ClientBroke(str(rep.get("error") or rep["type"]))
        value, token = rep.get("value"), rep.get("token")
        if not isinstance(value, str) or not (token is None or (isinstance(token, int) and not isinstance(token, bool))):
            self._end(f"its acquire reply has no string value or a token that is not an integer: {str(rep)[:200]}")
            raise ClientBroke("the acquire reply has no string value, or a token that is not an integer or null")
        if len(value) > MAX_VALUE or (token is not None and not -2**63 <= token < 2**63):
            self._end(f"its acquire reply has a value longer than {MAX_VALUE} characters or a token outside 64 bits")
            raise ClientBroke(f"the acquire reply has a value longer than {MAX_VALUE} characters, or a token that "
                              f"does not fit in 64 bits")
        # valid_ms counts from the reply: a waiter's lease starts when the service granted it,
        # not when its acquire was sent. A client that says nothing has no validity on record
        # (reported=False); the TTL from the reply only paces the holder's work.
        now = time.monotonic_ns()
        valid_ms = self._valid_ms(rep, "acquire")
        valid = now + int((valid_ms if valid_ms is not None else ttl_ms) * 1e6)
        return Lease(key=key, value=value, token=token, acquired_ns=now, valid_until_ns=valid,
                     meta={"ttl_ms": ttl_ms, "pid": self.proc.pid if self.proc else None, "valid_ms": valid_ms},
                     reported=valid_ms is not None)

    def release(self, lease: Lease) -> bool:
        rep = self._op({"op": "release", "key": lease.key, "value": lease.value}, self.op_timeout + self.margin)
        if rep["type"] in ("ok", "fail"):
            return rep["type"] == "ok"
        raise ClientBroke(str(rep.get("error") or rep["type"]))

    def renew(self, lease: Lease) -> Lease:
        if "renew" in self.unsupported:
            raise LockLost("the client does not renew (it answered unsupported)")
        rep = self._op({"op": "renew", "key": lease.key, "value": lease.value, "ttl_ms": lease.meta.get("ttl_ms")},
                       self.op_timeout + self.margin)
        if rep["type"] == "unsupported":
            self.unsupported.add("renew")
            raise LockLost("the client does not renew (it answered unsupported)")
        if rep["type"] == "fail":
            raise LockLost(str(rep.get("error") or "lost"))
        if rep["type"] != "ok":
            raise ClientBroke(str(rep.get("error") or rep["type"]))
        valid_ms = self._valid_ms(rep, "renew")
        if valid_ms is None:  # renewed, for how long it does not say: no validity on record, and the
            # holder's next renew paced by the TTL from now (the old expiry made it renew in a busy loop)
            ttl_ms = lease.meta.get("ttl_ms") or 0
            return dataclasses.replace(lease, reported=False, valid_until_ns=time.monotonic_ns() + int(ttl_ms * 1e6))
        return Lease(key=lease.key, value=lease.value, token=lease.token, acquired_ns=lease.acquired_ns,
                     valid_until_ns=time.monotonic_ns() + int(valid_ms * 1e6), meta=lease.meta)

    def _valid_ms(self, rep: dict, op: str) -> float | None:
        """A reply's valid_ms, None when it sends none; a number that is not finite or beyond
        a day either way breaks the reply (it would overflow every later computation)."""
        v = rep.get("valid_ms")
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            return None
        if not (math.isfinite(v) and abs(v) <= MAX_VALID_MS):
            self._end(f"its {op} reply has valid_ms {str(v)[:40]}, not a finite number of at most a day")
            raise ClientBroke(f"the {op} reply has valid_ms {str(v)[:40]}, not a finite number of ms of at most a day")
        return float(v)

    def still_held(self, lease: Lease) -> bool | None:
        """The client's own belief, if it has one (`held`); None when it has none."""
        if "held" in self.unsupported or self.proc is None:
            return None
        try:
            rep = self._call({"op": "held", "key": lease.key, "value": lease.value}, self.op_timeout + self.margin)
        except ClientDied:
            raise  # recorded as the held op's outcome (info), and judged: the client died
        except ClientBroke:
            return False  # it hung: it cannot be trusted to hold anything
        if rep["type"] == "unsupported":
            self.unsupported.add("held")
            return None
        return bool(rep.get("held")) if rep["type"] == "ok" else None

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                self._call({"op": "close"}, 2.0)
            except ClientBroke:
                pass
        self._end("closed")
        self.closed.set()  # the clock thread, if any, ends
