"""The protected resource: a counter on a server outside the lock service, never faulted.

Every access presents the holder's fencing token when fencing is on. The store keeps the
highest token it has seen and rejects any read or write that presents a lower one
(Kleppmann's fencing). Reads are fenced too: with writes alone, a stale holder that read
before a newer holder could still lose the newer holder's increment.
Without fencing the token is ignored and the last writer wins.
"""

from __future__ import annotations

from harness.core.contracts.cluster import Node
from harness.cluster.valkey import connect

STALE = "stale-token"

# KEYS: value, highest token. ARGV: token or '' (unfenced). Returns {ok, value-or-max}.
_FENCE = """
if ARGV[1] ~= '' then
  local seen = tonumber(redis.call('GET', KEYS[2]) or '-1')
  if tonumber(ARGV[1]) < seen then return {0, seen} end
  redis.call('SET', KEYS[2], ARGV[1])
end
"""
READ = _FENCE + "return {1, tonumber(redis.call('GET', KEYS[1]) or '0')}"
WRITE = _FENCE + "redis.call('SET', KEYS[1], ARGV[2]) return {1, tonumber(ARGV[2])}"


class StaleToken(Exception):
    """The store saw a higher token already: the access was refused (a `fail` op)."""


class FencedCounter:
    """The counter of one lock key. `conn`: share another counter's connection (a worker
    with several keys keeps one connection to the store)."""

    def __init__(self, node: Node, key: str, *, fencing: bool, timeout_s: float = 1.0, conn=None):
        self.conn = conn if conn is not None else connect(node, timeout_s)
        self.keys = (f"{key}:value", f"{key}:max-token")
        self.fencing = fencing

    def _call(self, script: str, token: int | None, *args) -> int:
        t = "" if (token is None or not self.fencing) else str(token)
        ok, v = self.conn.eval(script, 2, *self.keys, t, *args)
        if not ok:
            raise StaleToken(f"token {token} < highest seen {v}")
        return int(v)

    def read(self, token: int | None) -> int:
        return self._call(READ, token)

    def write(self, value: int, token: int | None) -> int:
        return self._call(WRITE, token, value)

    def close(self) -> None:
        self.conn.close()


__all__ = ["FencedCounter", "StaleToken", "STALE"]
