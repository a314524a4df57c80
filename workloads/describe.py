"""The optional `describe` op: what a client program states of itself, asked before any server.

`chaos audit` scales its faults to the client's own numbers. Flags give them; a client may also
state them, so whoever audits it need not know them: asked `{"id": 1, "op": "describe"}` on its
stdin before `init` (no server exists yet), it answers one line

    {"id": 1, "type": "ok", "ttl_ms": 30000, "acquire_timeout_s": 10, "session_ms": 10000,
     "command_timeout_ms": 500, "renews": true}

every field optional (docs/client-protocol.md). `unsupported`, any other answer, no answer
within START_S, or an exit means it states nothing: the audit uses its flags and defaults. A
field it states with a value that is not one (a TTL of -3, a string) is one sentence naming the
field, as a flag would be.
"""

from __future__ import annotations

import json
import math
import os
import select
import shlex
import subprocess
import time
from typing import Any

from harness.core.errors import BadArgument

START_S = 20.0  # as for init: a JVM needs a few seconds to answer its first line
# field -> (lowest, highest, what it is): the numbers an audit scales its faults to
FIELDS = {"ttl_ms": (100, 600_000, "its lock TTL in ms"),
          "acquire_timeout_s": (0.01, 600, "its acquire timeout in s"),
          "session_ms": (100, 600_000, "its session timeout in ms (ZooKeeper, etcd leases)"),
          "command_timeout_ms": (1, 600_000, "its timeout for one command to a server, in ms")}


def describe(command: str, timeout_s: float = START_S) -> tuple[dict[str, Any], str]:
    """(what the client program `command` states of itself, one line saying how it answered).
    Nothing stated is ({}, why). The program is started in its own session, never given a
    server, and killed (its whole group) once it answered or the time is up."""
    try:
        p = subprocess.Popen(shlex.split(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, start_new_session=True)
    except (OSError, ValueError) as e:
        return {}, f"it could not be started to ask ({e})"
    try:
        line = _first_line(p, timeout_s)
    finally:
        _end(p)
    if line is None:
        return {}, f"it gave no answer to describe within {timeout_s:g} s"
    try:
        rep = json.loads(line)
    except ValueError:
        return {}, "its answer to describe is not JSON"
    if not isinstance(rep, dict) or rep.get("type") != "ok":
        return {}, f"it answered describe {rep.get('type') if isinstance(rep, dict) else 'with no object'}"
    return check(rep), "it stated " + (", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}"
                                                 for k, v in check(rep).items()) or "nothing")


def check(rep: dict) -> dict[str, Any]:
    """The fields of a describe reply the audit uses, checked: one sentence for a bad value."""
    out: dict[str, Any] = {}
    for name, (lo, hi, what) in FIELDS.items():
        v = rep.get(name)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not lo <= v <= hi:
            raise BadArgument(f"the client's describe reply gives {name} {v!r}; it must be {what}, "
                              f"{lo:g}..{hi:g} (fix the client, or give the audit the number with its flag)")
        out[name] = int(v) if name.endswith("_ms") else float(v)
    renews = rep.get("renews")
    if renews is not None and not isinstance(renews, bool):
        raise BadArgument(f"the client's describe reply gives renews {renews!r}; it must be true or false")
    if renews is not None:
        out["renews"] = renews
    return out


def _first_line(p: subprocess.Popen, timeout_s: float) -> bytes | None:
    try:
        p.stdin.write(b'{"id": 1, "op": "describe"}\n')
        p.stdin.flush()
    except OSError:
        return None
    buf, deadline = b"", time.monotonic() + timeout_s
    while b"\n" not in buf and len(buf) < 1 << 16:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([p.stdout], [], [], left)[0]:
            return None
        chunk = os.read(p.stdout.fileno(), 65536)
        if not chunk:
            return None
        buf += chunk
    return buf.split(b"\n", 1)[0]


def _end(p: subprocess.Popen) -> None:
    try:
        os.killpg(p.pid, 9)  # its own session: whatever it started goes with it
    except OSError:
        pass
    p.wait()
    for s in (p.stdin, p.stdout):
        try:
            s.close()
        except OSError:
            pass
