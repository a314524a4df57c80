"""A user's own lock client, packaged outside chaoslock, found through an entry point.

It is what a user would write: SET NX PX with a unique value, a token from a separate
INCR (NOT atomic with the SET: a deliberate flaw a chaos run can find), compare-and-delete
release. `tests/integration/workloads/test_plugin.py` runs it with `chaos run --backend demo-lock`.
"""

import time
import uuid

import redis

from harness.core.errors import LockLost, NotAcquired
from harness.core.contracts.client import Lease

RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"
RENEW = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0"


class DemoLock:
    name = "demo-lock"
    has_fencing = True
    servers = ("valkey", 1)

    def __init__(self, options=None, clock=None):
        self.options = options or {}

    def open(self, nodes):
        n = nodes[0]
        self.r = redis.Redis(host=n.host, port=n.port, socket_timeout=0.2, decode_responses=True)

    def acquire(self, key, ttl_ms, timeout_s):
        deadline = time.monotonic() + timeout_s
        value = uuid.uuid4().hex
        while time.monotonic() < deadline:
            start = time.monotonic_ns()
            if self.r.set(key, value, nx=True, px=ttl_ms):
                token = self.r.incr(f"{key}:demo-fence")
                return Lease(key=key, value=value, token=token, acquired_ns=time.monotonic_ns(),
                             valid_until_ns=start + int(ttl_ms * 0.9e6))
            time.sleep(0.02)
        raise NotAcquired("held by another client")

    def release(self, lease):
        return bool(self.r.eval(RELEASE, 1, lease.key, lease.value))

    def renew(self, lease):
        ttl_ms = 2000
        start = time.monotonic_ns()
        if not self.r.eval(RENEW, 1, lease.key, lease.value, ttl_ms):
            raise LockLost(f"{lease.key} is no longer ours")
        return Lease(key=lease.key, value=lease.value, token=lease.token, acquired_ns=lease.acquired_ns,
                     valid_until_ns=start + int(ttl_ms * 0.9e6))

    def close(self):
        self.r.close()
