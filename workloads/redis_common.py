"""Scripts and connection settings shared by every Redis-protocol backend."""

from __future__ import annotations

from harness.cluster.valkey import connect

__all__ = ["RELEASE", "RENEW", "connect"]

# Delete only if the value is still ours: a holder whose lease expired must not free
# the lock of whoever holds it now.
RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""

# Extend only if the value is still ours (the watchdog's renewal).
RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""

