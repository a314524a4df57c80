"""Hold packets for a while, in the kernel path: the delay and jitter of `slow-link`.

This kernel has no netem, so latency is made with a netfilter queue: an iptables rule in a
source namespace sends the packets of the shaped links to queue Q (`-j NFQUEUE --queue-num Q
--queue-bypass`), and this process, one per run, holds each packet `delay ± jitter` ms
before it accepts it. No proxy, no address change: the client still talks to the server's
own address and port. With `--queue-bypass` a packet passes unheld if this process is gone,
so a crash makes the link fast, never cut.

    python -m harness.cluster.delayer --queue Q --delay-ms D [--jitter-ms J] [--seed S] NETNS...
    python -m harness.cluster.delayer --queue Q --delay-ms D ... --here

`--here`: the namespace it runs in (a container's, on the swarm's engines), none entered.

One queue connection per namespace (a netlink socket belongs to the namespace it was made
in: the main thread enters each in turn). Prints "ready" once every queue is bound; runs
until SIGTERM, then lets every held packet go.
"""

from __future__ import annotations

import argparse
import ctypes
import heapq
import os
import random
import signal
import sys
import threading
import time

CLONE_NEWNET = 0x40000000


def _setns(fd: int) -> None:
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


class Holder:
    """A heap of (due, n, packet); one thread accepts each packet when it is due."""

    def __init__(self, delay_s: float, jitter_s: float, seed: int):
        self.delay_s, self.jitter_s = delay_s, jitter_s
        self.rng = random.Random(seed)
        self.heap: list = []
        self.cv = threading.Condition()
        self.n = 0
        self.stopping = False

    def hold(self, packet) -> None:
        wait = max(0.0, self.delay_s + (self.rng.uniform(-self.jitter_s, self.jitter_s) if self.jitter_s else 0.0))
        with self.cv:
            self.n += 1
            heapq.heappush(self.heap, (time.monotonic() + wait, self.n, packet))
            self.cv.notify()

    def run(self) -> None:
        while True:
            with self.cv:
                while not self.heap and not self.stopping:
                    self.cv.wait()
                if not self.heap:
                    return
                due, _, packet = self.heap[0]
                now = time.monotonic()
                if due > now and not self.stopping:
                    self.cv.wait(due - now)
                    continue
                heapq.heappop(self.heap)
            try:
                packet.accept()
            except Exception:  # the connection closed under it: the kernel lets it go (bypass)
                pass

    def stop(self) -> None:
        with self.cv:
            self.stopping = True
            self.cv.notify()


def main(argv: list[str] | None = None) -> int:
    import fnfqueue

    p = argparse.ArgumentParser(prog="python -m harness.cluster.delayer")
    p.add_argument("--queue", type=int, required=True)
    p.add_argument("--delay-ms", type=float, required=True)
    p.add_argument("--jitter-ms", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--here", action="store_true", help="bind the queue in this process's own network namespace")
    p.add_argument("netns", nargs="*")
    a = p.parse_args(argv)
    if not a.here and not a.netns:
        p.error("name the namespaces to bind the queue in, or give --here")
    holder = Holder(a.delay_ms / 1000, a.jitter_ms / 1000, a.seed)
    home = os.open("/proc/self/ns/net", os.O_RDONLY)
    conns = []
    if a.here:
        conn = fnfqueue.Connection()
        conn.bind(a.queue).set_mode(0xFFFF, fnfqueue.COPY_META)
        conns.append(conn)
    for ns in a.netns:
        fd = os.open(f"/var/run/netns/{ns}", os.O_RDONLY)
        try:
            _setns(fd)
            conn = fnfqueue.Connection()
            conn.bind(a.queue).set_mode(0xFFFF, fnfqueue.COPY_META)
            conns.append(conn)
        finally:
            _setns(home)
            os.close(fd)
    signal.signal(signal.SIGTERM, lambda *_: holder.stop())
    releaser = threading.Thread(target=holder.run, daemon=True)
    releaser.start()

    def pump(conn) -> None:
        try:
            for packet in conn:
                holder.hold(packet)
        except Exception:  # closed at exit
            pass

    for conn in conns:
        threading.Thread(target=pump, args=(conn,), daemon=True).start()
    print("ready", flush=True)
    while not holder.stopping:
        time.sleep(0.2)
    releaser.join(timeout=max(1.0, 2 * (holder.delay_s + holder.jitter_s)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
