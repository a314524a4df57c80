"""Reading a lock's state back from its servers, so a client fault records what the servers did.

A fault that cuts a request or a reply (cut-in-flight `-o lose=`) or kills a client inside its
acquire (kill-holder `-o during=acquire`) is verified by asking the servers, from the root
namespace (the cut is inside the client's namespace only), what they hold for the lock key:
its value and how long it still lives. One small reader per server kind, with the client
library the designs use; a kind without one is "not verified", and the op says so.

`read(nodes, key)` is the I/O; `judge` and `words` are pure (tests/unit/nemesis/test_readback.py).
"""

from __future__ import annotations

import time
from typing import Any, Sequence

READ_TIMEOUT_S = 0.3
NOT_VERIFIED = "not verified"


def readable(nodes: Sequence[Any]) -> str | None:
    """Why the lock's state on these servers cannot be read back (None: it can)."""
    kinds = {n.kind for n in nodes}
    if not nodes:
        return f"{NOT_VERIFIED}: no lock servers"
    if kinds != {"valkey"}:
        return f"{NOT_VERIFIED}: no read-back for {', '.join(sorted(kinds))} yet (valkey only)"
    return None


def read(nodes: Sequence[Any], key: str) -> dict[str, Any]:
    """{node: {"value": str, "pttl_ms": int (-1: no expiry)} | None (no key) | "error: ..."},
    and "t": the monotonic time of the read. Call only when `readable(nodes)` is None."""
    import redis

    out: dict[str, Any] = {}
    for n in nodes:
        try:
            r = redis.Redis(host=n.host, port=n.port, socket_timeout=READ_TIMEOUT_S,
                            socket_connect_timeout=READ_TIMEOUT_S)
            try:
                with r.pipeline(transaction=True) as p:
                    value, pttl = p.get(key).pttl(key).execute()
            finally:
                r.close()
        except Exception as e:  # a server down or cut: that node's state is unknown
            out[n.name] = f"error: {type(e).__name__}"
            continue
        out[n.name] = None if value is None else {"value": value.decode(errors="replace"), "pttl_ms": int(pttl)}
    out["t"] = time.monotonic()
    return out


def words(state: dict[str, Any]) -> str:
    """"n1: key present (expires in 812 ms)", "n1: key absent", "n1: key present (no expiry)"."""
    parts = []
    for name, s in sorted((k, v) for k, v in state.items() if k != "t"):
        if s is None:
            parts.append(f"{name}: key absent")
        elif isinstance(s, str):
            parts.append(f"{name}: {s}")
        elif s["pttl_ms"] < 0:
            parts.append(f"{name}: key present (no expiry)")
        else:
            parts.append(f"{name}: key present (expires in {s['pttl_ms']} ms)")
    return ", ".join(parts)


RENEW_SLACK_MS = 50  # a renew moved the expiry later by more than this: it was acted on


def acted(during: str, value: Any, before: dict[str, Any], after: dict[str, Any]) -> bool | None:
    """Whether the servers acted on a release (the key with `value` gone) or a renew (its
    expiry moved later) between the two reads; None when it cannot be told: a node that did
    not answer, a key that was not the holder's before, or one that may have expired by itself
    in between. With several nodes: True only if every node acted, False only if none did."""
    elapsed_ms = (after["t"] - before["t"]) * 1000
    seen = []
    for name in (k for k in before if k != "t"):
        b, a = before[name], after.get(name)
        if not isinstance(b, dict) or isinstance(a, str) or b["value"] != value:
            return None
        if during == "release":
            if a is not None and a["value"] == value:
                seen.append(False)
            elif 0 <= b["pttl_ms"] <= elapsed_ms:  # gone, but it could have expired meanwhile
                return None
            else:
                seen.append(True)
        else:  # renew
            if a is None or a["value"] != value:
                return None
            if b["pttl_ms"] < 0 or a["pttl_ms"] < 0:
                return None
            seen.append(a["pttl_ms"] > b["pttl_ms"] - elapsed_ms + RENEW_SLACK_MS)
    if not seen:
        return None
    return True if all(seen) else False if not any(seen) else None


def outcome(during: str, acted_: bool | None) -> str:
    """The op's words for what the servers did with the cut request."""
    if acted_ is None:
        return "cannot tell"
    if during == "release":
        return "released (key gone)" if acted_ else "not released (key present)"
    return "renewed (expiry extended)" if acted_ else "not renewed (expiry not extended)"
