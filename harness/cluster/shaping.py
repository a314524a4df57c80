"""Slow links without netem: delay, jitter, loss and bandwidth on chosen links of a run.

This kernel has no netem (nor toxiproxy here), so `slow-link` is made from what works, in the
kernel path, with no proxy and no address change:

  delay, jitter  an iptables NFQUEUE rule in the source's namespace (OUTPUT, to the target's
                 address) hands each packet to harness/cluster/delayer.py, which holds it
                 delay +- jitter ms; `--queue-bypass` lets packets through if it is gone
  loss           an iptables `statistic --mode random` DROP in the target's namespace (INPUT,
                 from the source's address): a lost packet, as the network would lose it
  bandwidth      an htb class of `rate` kbit on the source's eth0, u32-filtered to the targets
                 (traffic to the never-faulted store is not shaped)

Only the direction source -> target is shaped: a request is late, its reply is not, so a
round trip grows by the delay once. Every rule carries the comment `chaosshape-<run id>`
and lives in a namespace of the run (gone with it); the delayer runs in the run's cgroup.
`shape_links` measures what it made (TCP connects from the source to the target's port,
before and after) and returns it, so a fault is recorded only as measured.
"""

from __future__ import annotations

import json
import os
import select
import signal
import statistics
import subprocess
import sys
from dataclasses import asdict
from typing import Any, Sequence

from harness.core.contracts.cluster import Shape
from harness.core.errors import NemesisError
from harness.core.interrupts import deferred, quiet_group

QUEUE = 7  # queue numbers are per namespace, and the namespaces are the run's own
MECHANISM = "nfqueue delay + iptables statistic loss + htb rate (no netem in this kernel)"

_PROBE = r"""
import json, socket, sys, time
host, port, n, timeout = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
out = []
for _ in range(n):
    t = time.monotonic()
    try:
        socket.create_connection((host, port), timeout=timeout).close()
        out.append(round((time.monotonic() - t) * 1000, 2))
    except OSError:
        out.append(None)
print(json.dumps(out))
"""


def _ns_run(ns: str, argv: list[str], *, input: str | None = None, timeout: float = 20) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", "netns", "exec", ns, *argv], input=input, capture_output=True, text=True,
                          timeout=timeout, **quiet_group())


class LinkShaping:
    """`ShapesLinks` for a cluster whose hosts are hosts of its netns.Network `self.network`
    (servers and clients c1..cN). Uses `self.run_id`, `self.dir` and, when there is one, the
    run's cgroup `self.contained`.

    `shape_links` is one walk (probe, delayers, rules, bandwidth, probe again) over *places*:
    where a link's rules go, here a namespace's name. A provider whose links start elsewhere
    (harness/cluster/swarm_links.py: an engine's host namespace, a client's pod) gives places
    of its own through the hooks: `_shaping_rules`, `_shape_restore`, `_shape_gone`,
    `_start_delayers`, `_stop_delayer`, `_probe_from`, `_rate_to` and `_shaping_mechanism`."""

    network: Any
    run_id: str

    def _shape_state(self) -> dict:
        if not hasattr(self, "_shaped"):
            self._shaped: dict = {"rules": {}, "qdiscs": [], "delayers": []}
        return self._shaped

    def shape_links(self, pairs: Sequence[tuple[str, str]], shape: Shape, *, seed: int = 0,
                    probes: int = 5) -> dict:
        """Shape every (source host, target node) link of `pairs`, replacing the last shape,
        and return what was asked and measured: the connect round trip from the first source
        to the first target before and after, and with loss the share of failed connects."""
        if not pairs:
            raise NemesisError("slow-link has no link to shape")
        rules, by_src = self._shaping_rules(pairs, shape, f"chaosshape-{self.run_id}")
        self.unshape_links()
        src0, dst0 = pairs[0]
        target = self.node(dst0)
        before = self._probe_from(src0, target, probes, timeout=2.0)
        state = self._shape_state()
        try:
            if shape.delay_ms or shape.jitter_ms:
                self._start_delayers(sorted(by_src, key=str), shape, seed, state["delayers"])
            for place, lines in rules.items():
                err = self._shape_restore(place, lines)
                if err is not None:
                    raise NemesisError(f"could not add the slow-link rules in {_words(place)}: {err}")
                state["rules"][place] = [l.replace("-I OUTPUT 1 ", "-D OUTPUT ").replace("-I INPUT 1 ", "-D INPUT ")
                                         for l in lines]
            if shape.rate_kbit:
                for place, targets in by_src.items():
                    self._rate_to(place, targets, shape.rate_kbit)
                    state["qdiscs"].append(place)
        except BaseException:
            self.unshape_links()
            raise
        timeout = 0.5 + 3 * (shape.delay_ms + shape.jitter_ms) / 1000
        after = self._probe_from(src0, target, probes if not shape.loss else max(probes, 40), timeout=timeout)
        return {"links": [list(p) for p in pairs], "asked": asdict(shape), "mechanism": self._shaping_mechanism(rules),
                "probe": f"{src0}->{dst0}:{target.port}", **_summary(before, after)}

    def unshape_links(self) -> None:
        """Remove every rule, qdisc and delayer of the last shape; safe to call twice."""
        state = self._shape_state()
        errors = []
        for place, lines in list(state["rules"].items()):
            err = self._shape_restore(place, lines)
            if err is not None and not self._shape_gone(place):
                errors.append(f"{_words(place)}: {err[:200]}")
            del state["rules"][place]
        for ns in list(state["qdiscs"]):
            _ns_run(ns, ["tc", "qdisc", "del", "dev", "eth0", "root"])
            state["qdiscs"].remove(ns)
        while state["delayers"]:
            err = self._stop_delayer(state["delayers"].pop())
            if err is not None:
                errors.append(err)
        if errors:
            raise NemesisError("could not remove the slow-link rules: " + "; ".join(errors))

    # -- the places: this machine's namespaces ------------------------------------------------
    def _shaping_rules(self, pairs: Sequence[tuple[str, str]], shape: Shape,
                       comment: str) -> tuple[dict[Any, list[str]], dict[Any, list[str]]]:
        """The iptables lines per place (`-I ...`) that shape `pairs`, and per source place
        (where the delayer runs) what its bandwidth class covers (here: the targets' addresses)."""
        rules: dict[str, list[str]] = {}
        by_src: dict[str, list[str]] = {}
        for src, dst in pairs:
            s, d = self.network.host(src), self.network.host(dst)
            by_src.setdefault(s.netns, []).append(d.addr)
            if shape.delay_ms or shape.jitter_ms:
                rules.setdefault(s.netns, []).append(
                    f"-I OUTPUT 1 -d {d.addr}/32 -m comment --comment {comment} "
                    f"-j NFQUEUE --queue-num {QUEUE} --queue-bypass")
            if shape.loss:
                rules.setdefault(d.netns, []).append(
                    f"-I INPUT 1 -s {s.addr}/32 -m statistic --mode random --probability {shape.loss:.6f} "
                    f"-m comment --comment {comment} -j DROP")
        return rules, by_src

    def _shape_restore(self, place: Any, lines: list[str]) -> str | None:
        """Apply iptables lines at a place; the error's text, or None when done."""
        r = _ns_run(place, ["iptables-restore", "-w", "--noflush"], input="*filter\n" + "\n".join(lines) + "\nCOMMIT\n")
        return None if r.returncode == 0 else r.stderr.strip()[:300]

    def _shape_gone(self, place: Any) -> bool:
        """The place is gone, and its rules with it."""
        return not os.path.exists(f"/var/run/netns/{place}")

    def _rate_to(self, ns: Any, targets: list[str], kbit: int) -> None:
        """The bandwidth class on `ns`'s eth0 for what `_shaping_rules` said it covers."""
        self._rate(ns, [["match", "ip", "dst", f"{a}/32"] for a in sorted(set(targets))], kbit)

    def _shaping_mechanism(self, rules: dict) -> str:
        return MECHANISM

    def _start_delayers(self, places: list, shape: Shape, seed: int, started: list) -> None:
        """The packet delayer for every place's queue (here one process for all the
        namespaces), appended to `started` as soon as it runs."""
        started.append(self._start_delayer(places, shape, seed))

    def _stop_delayer(self, proc: Any) -> str | None:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        return None

    def _start_delayer(self, namespaces: list[str], shape: Shape, seed: int) -> subprocess.Popen:
        contained = getattr(self, "contained", None)
        log = open(os.path.join(self.dir, "delayer.log"), "ab")
        proc = None
        try:
            with deferred():  # the at-fork hooks a preexec_fn runs must not see a press (local.py's _spawn)
                proc = subprocess.Popen(
                    [sys.executable, "-m", "harness.cluster.delayer", "--queue", str(QUEUE),
                     "--delay-ms", str(shape.delay_ms), "--jitter-ms", str(shape.jitter_ms), "--seed", str(seed),
                     *namespaces],
                    stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True,
                    preexec_fn=contained.preexec("servers") if contained is not None else None)
            ready, _, _ = select.select([proc.stdout], [], [], 15)
            line = proc.stdout.readline().strip() if ready else b""
        except KeyboardInterrupt:
            if proc is not None:
                proc.kill()
                proc.wait(timeout=5)
            raise
        finally:
            log.close()
        if line != b"ready":
            proc.kill()
            proc.wait(timeout=5)
            raise NemesisError(f"the packet delayer did not start (see {os.path.join(self.dir, 'delayer.log')}); "
                               f"is fnfqueue installed (`make install`)?")
        return proc

    @staticmethod
    def _rate(ns: str, matches: list[list[str]], kbit: int) -> None:
        """An htb class of `kbit` on ns's eth0 for the packets each u32 match (its words) selects."""
        cmds = [["tc", "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb", "default", "10", "r2q", "1000"],
                ["tc", "class", "add", "dev", "eth0", "parent", "1:", "classid", "1:10", "htb", "rate", "10gbit"],
                ["tc", "class", "add", "dev", "eth0", "parent", "1:", "classid", "1:20", "htb", "rate", f"{kbit}kbit"]]
        cmds += [["tc", "filter", "add", "dev", "eth0", "parent", "1:", "protocol", "ip", "prio", "1", "u32",
                  *m, "flowid", "1:20"] for m in matches]
        for argv in cmds:
            r = _ns_run(ns, argv)
            if r.returncode != 0:
                raise NemesisError(f"`{' '.join(argv)}` in {ns} failed: {r.stderr.strip()[:200]}")

    def _probe_from(self, src: str, target, n: int, *, timeout: float) -> list[float | None]:
        ns = self.network.host(src).netns
        r = _ns_run(ns, [sys.executable, "-c", _PROBE, target.host, str(target.port), str(n), str(timeout)],
                    timeout=n * timeout + 20)
        try:
            return json.loads(r.stdout)
        except ValueError:
            raise NemesisError(f"could not measure the link {src}->{target.name}: {r.stderr.strip()[:200]}") from None


def _words(place: Any) -> str:
    """A place in a sentence: a namespace's name, or (kind, name) as "kind name"."""
    return " ".join(place) if isinstance(place, tuple) else str(place)


def _summary(before: list, after: list) -> dict:
    ok_b = [x for x in before if x is not None]
    ok_a = [x for x in after if x is not None]
    return {"rtt_before_ms": round(statistics.median(ok_b), 2) if ok_b else None,
            "rtt_after_ms": round(statistics.median(ok_a), 2) if ok_a else None,
            "connects_failed": f"{len(after) - len(ok_a)}/{len(after)}"}
