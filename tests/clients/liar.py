#!/usr/bin/env python3
"""clients/example-redis/client.py with a bug put in, on purpose: the checkers must name
what it does. MODE:
  long-validity  asks the server for a quarter of the TTL (it still claims 0.9 TTL of validity):
                 every violation it causes is UNEXPLAINED, with no fault at all
  skip-nx        every third acquire is a plain SET: it takes the lock from whoever holds it
  no-ttl         sets its key without a TTL: a holder that dies leaves the lock taken for good
                 (kill-holder: "the lock outlived its holder", and STUCK)
  late-ok        answers ok even when its acquire took longer than the lease (slow-link:
                 "granted an expired lease")
  from-reply     counts its validity from the moment the reply arrived, ignoring the time the
                 request took (slow-link with --hold-until-expiry: its claim outlasts the key on
                 the server, and the violation is UNEXPLAINED, not excused by the slow link)
  dies-after-release  exits with an unhandled error right after every third ok release (a
                 background refresh that throws once its lock is gone): "client died"
  held-always    answers `held: true` whatever happened, as a library whose background refresh
                 silently re-creates an expired key would (pause-holder with -o held_check=both:
                 "the client did not notice it lost the lock")
  misses-wakeup  sleeps 1.9 s between the tries of an acquire, not 0.05 s: a waiter that misses
                 its wake-up after a release (no fault: "handover stalled")
  gives-up-early  gives up an acquire after a tenth of its timeout (contention: "acquire timeout
                 not honoured", gave up long before it while the lock was taken)
  wall-clock-deadline  measures its acquire deadline on the wall clock (time.time()): a client
                 clock jumped back (clock-skew -o clock_target=clients -o clock_mode=back) makes
                 it wait far past its timeout ("acquire timeout not honoured", answered late)
  blind-retry    a release that fails on the connection (reset, timeout) forgets whose key it
                 was and retries a plain DEL until a server answers (without redis-py's own
                 retries, which re-send the owner-checked EVAL, as redis-py before 6 had none;
                 cut-in-flight -o
                 lose=request with a cut longer than the lease: after the heal it deletes the
                 next holder's key, a third process is let in, and the release said ok although
                 the lock had been lost)
  two-step       takes the key with SET NX and no expiry, then sets the expiry in a second
                 command (PEXPIRE) 20 ms later (a slow second round trip): killed between the two
                 (kill-holder -o during=acquire -o when=free) it leaves a key that never expires
"""
import sys
from pathlib import Path

import time

import redis

mode = sys.argv[1]
honest_set = redis.Redis.set
calls = 0
EXAMPLE = Path(__file__).resolve().parents[2] / "clients/example-redis/client.py"
# The source edits of the modes that change the client's own reasoning (each must apply).
EDITS = {"late-ok": ("            if valid_ms <= 0:", "            if False:"),
         "blind-retry": ("rep = {\"type\": \"ok\" if r.eval(RELEASE, 1, req[\"key\"], req[\"value\"]) else \"fail\"}",
                         "rep = {\"type\": \"ok\" if blind_release(r, req) else \"fail\"}"),
         "misses-wakeup": ("                time.sleep(0.05)", "                time.sleep(1.9)"),
         "gives-up-early": ('value, deadline = uuid.uuid4().hex, time.monotonic() + req["timeout_s"]',
                            'value, deadline = uuid.uuid4().hex, time.monotonic() + req["timeout_s"] / 10'),
         "wall-clock-deadline": [('value, deadline = uuid.uuid4().hex, time.monotonic() + req["timeout_s"]',
                                  'value, deadline = uuid.uuid4().hex, time.time() + req["timeout_s"]'),
                                 ("if time.monotonic() > deadline:", "if time.time() > deadline:")],
         "from-reply": ("req[\"ttl_ms\"] * 0.9 - (time.monotonic() - sent) * 1000", "req[\"ttl_ms\"] * 0.9"),
         "held-always": ("        elif op == \"release\":",
                         "        elif op == \"held\":\n            rep = {\"type\": \"ok\", \"held\": True}\n"
                         "        elif op == \"release\":"),
         "dies-after-release": ("    print(json.dumps({\"id\": req[\"id\"], **rep}), flush=True)",
                                "    print(json.dumps({\"id\": req[\"id\"], **rep}), flush=True)\n"
                                "    if op == \"release\" and rep[\"type\"] == \"ok\":\n"
                                "        released = globals().get(\"released\", 0) + 1\n"
                                "        globals()[\"released\"] = released\n"
                                "        if released % 3 == 0:\n"
                                "            raise SystemExit(\"refresh thread: KeyError: the lock key vanished after release\")")}


def lying_set(self, name, value, nx=False, px=None, **kw):
    global calls
    if px is not None:  # the acquire's SET (the example's only one with a TTL)
        calls += 1
        if mode == "long-validity":
            px = max(1, px // 4)
        elif mode == "skip-nx" and calls % 3 == 0:
            nx = False
        elif mode == "no-ttl":
            px = None
    return honest_set(self, name, value, nx=nx, px=px, **kw)


RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"
TWO_STEP_GAP_S = 0.02


def blind_release(r, req):
    try:
        return r.eval(RELEASE, 1, req["key"], req["value"])
    except redis.ConnectionError:  # a reset or a timeout: it retries without its value
        deadline = time.monotonic() + 10
        while True:
            try:
                return r.delete(req["key"])
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)


def two_step_set(self, name, value, nx=False, px=None, **kw):
    if px is None:
        return honest_set(self, name, value, nx=nx, **kw)
    if not honest_set(self, name, value, nx=nx, **kw):  # taken, with no expiry yet
        return None
    time.sleep(TWO_STEP_GAP_S)
    self.pexpire(name, px)
    return True


if mode not in ("long-validity", "skip-nx", "no-ttl", "two-step", *EDITS):
    sys.exit(f"liar.py: unknown MODE {mode!r}")
redis.Redis.set = two_step_set if mode == "two-step" else lying_set
if mode == "blind-retry":
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    honest_init = redis.Redis.__init__

    def no_retries(self, *args, **kw):
        kw["retry"] = Retry(NoBackoff(), 0)
        honest_init(self, *args, **kw)

    redis.Redis.__init__ = no_retries
source = EXAMPLE.read_text()
for old, new in ([EDITS[mode]] if isinstance(EDITS.get(mode), tuple) else EDITS.get(mode, [])):
    if old not in source:
        sys.exit(f"liar.py: {EXAMPLE} no longer has the line mode {mode} edits ({old.strip()!r})")
    source = source.replace(old, new)
exec(compile(source, str(EXAMPLE), "exec"), {"__name__": "__main__", "__file__": str(EXAMPLE),
                                             "blind_release": blind_release})
