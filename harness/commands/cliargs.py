"""Checks shared by the commands: numbers that must be finite, paths that must be writable.

Each runs before anything starts, so a long campaign never fails at its end on a value
that was wrong from the beginning.
"""

from __future__ import annotations

import math
import os

import click

from harness.core import plugins
from harness.core.errors import BadArgument


class Seconds(click.ParamType):
    """A finite number within [lo, hi] (click's FloatRange lets NaN through)."""

    name = "seconds"

    def __init__(self, lo: float = 0.0, hi: float = 86_400.0, *, open_lo: bool = False):
        self.lo, self.hi, self.open_lo = lo, hi, open_lo

    def convert(self, value, param, ctx):
        try:
            v = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not math.isfinite(v) or v > self.hi or v < self.lo or (self.open_lo and v == self.lo):
            low = f"above {self.lo:g}" if self.open_lo else f"at least {self.lo:g}"
            self.fail(f"{value!r} must be a finite number {low} and at most {self.hi:g}", param, ctx)
        return v


def check_writable_dir(path: str, flag: str) -> None:
    """A directory runs can be written into (made if missing), or one sentence why not.

    Checked before anything starts, by really creating what is missing and a file in it,
    then removing exactly what the check made: a long run must not fail at its end.
    (harness/core/pathcheck.py: too long, read-only, immutable, a FIFO, a file.)"""
    from harness.core.pathcheck import DIR, check_path

    check_path(path, flag=flag, want=DIR, write=True, create=True,
               hint="give a directory you can write to (it is created if missing)")


def check_writable_file(path: str, flag: str) -> None:
    """A file that can be (over)written in an existing directory, or one sentence why not
    (harness/core/pathcheck.py: a directory, a FIFO or device, immutable, read-only)."""
    from harness.core.pathcheck import FILE, check_path

    check_path(path, flag=flag, want=FILE, write=True)


CLUSTERS = tuple(plugins.PROVIDERS)


def ssh_options(f):
    """--hosts and the --ssh-* settings of `--cluster ssh`, --swarm-nodes of `--cluster swarm`
    (chaos run, chaos reproduce, chaos shrink)."""
    for opt in reversed([
        click.option("--hosts", default=None, metavar="H1,H2,...|@FILE",
                     help="with --cluster ssh: the hosts, [user@]address[:port], comma-separated or one per line of FILE"),
        click.option("--ssh-user", default=None, help="with --cluster ssh: login user (default root; others need passwordless sudo)"),
        click.option("--ssh-key", default=None, type=click.Path(), help="with --cluster ssh: the private key to log in with"),
        click.option("--ssh-port", default=None, type=int, help="with --cluster ssh: sshd's port (default 22)"),
        click.option("--ssh-known-hosts", default=None, type=click.Path(),
                     help="with --cluster ssh: a known_hosts file to use (new hosts are added to it)"),
        click.option("--swarm-nodes", default=None, type=click.Path(), metavar="FILE",
                     help="with --cluster swarm: the engines, one per line `NAME ENGINE-URL ADDRESS`, the manager first "
                          "(default /run/chaoslock-swarm/nodes, which `make swarm` writes)"),
    ]):
        f = opt(f)
    return f


def ssh_settings(cluster: str, hosts: str | None, user: str | None, key: str | None, port: int | None,
                 known_hosts: str | None, swarm_nodes: str | None = None) -> dict:
    """spec.ssh (where the servers run, never taken from a run dir) from the flags: the ssh
    settings with --cluster ssh, the engines file with --cluster swarm, else {}; one sentence
    for a flag without its provider."""
    if swarm_nodes is not None and cluster != "swarm":
        raise BadArgument("--swarm-nodes goes with --cluster swarm")
    given = [flag for flag, v in (("--hosts", hosts), ("--ssh-user", user), ("--ssh-key", key), ("--ssh-port", port),
                                  ("--ssh-known-hosts", known_hosts)) if v is not None]
    if cluster == "swarm":
        if given:
            raise BadArgument(f"{given[0]} goes with --cluster ssh; --cluster swarm takes its engines from --swarm-nodes FILE")
        from harness.cluster.swarm_engines import NODES_FILE, read_nodes

        path = os.path.abspath(swarm_nodes or NODES_FILE)
        read_nodes(path)  # one sentence now, for a missing or bad file
        return {"nodes_file": path}
    if cluster != "ssh":
        if given:
            raise BadArgument(f"{given[0]} goes with --cluster ssh")
        return {}
    if not hosts:
        raise BadArgument("--cluster ssh needs --hosts h1,h2,... (or --hosts @FILE, one host per line)")
    from harness.core.pathcheck import FILE, check_path

    if key is not None:
        check_path(key, flag="--ssh-key", want=FILE, hint="give the private key ssh should use")
    if known_hosts is not None:
        check_path(known_hosts, flag="--ssh-known-hosts", want=FILE, missing_ok=True,
                   hint="give a known_hosts file ssh can read (it is created if missing)")
    if hosts.startswith("@"):
        from harness.cluster.ssh import read_hosts_file

        names = read_hosts_file(hosts[1:])
    else:
        names = [h.strip() for h in hosts.split(",") if h.strip()]
    out = {"hosts": names, "user": user, "port": port, "key": os.path.abspath(key) if key else None,
           "known_hosts": os.path.abspath(known_hosts) if known_hosts else None}
    from harness.cluster.ssh import parse_hosts

    parse_hosts(out)  # one sentence now, for a bad host, port or key
    return {k: v for k, v in out.items() if v is not None}
