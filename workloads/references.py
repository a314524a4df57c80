"""The reference clients shipped in clients/ (built by `make install`), as `chaos list` shows
them, and what chaoslock knows of them before one starts: the lock kinds each has, so a
`--lock` it lacks is refused before any server starts (TestSpec.validate, via
workloads/external.py `kind_refusal`).

A reference client tests its library as shipped: it adds no safety check the library does
not make. A check that is useful anyway is one of its `options`, off by default; the client
reads it from init's options (every -o reaches it as given).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from harness.core.kinds import kinds_of
from harness.core.options import Option

CLIENTS = Path(__file__).resolve().parent.parent / "clients"  # the reference clients, one folder each


@dataclass(frozen=True, slots=True, kw_only=True)
class ReferenceClient:
    """A lock client shipped in clients/, as `chaos list` shows it."""

    name: str
    command: str  # what --client takes
    servers: str  # what --servers takes
    built: Path  # exists once it is built
    about: str
    options: tuple[Option, ...] = ()  # read by the client process itself, not by chaoslock
    program: str = ""  # its file under clients/, which a --client command names (recognise)
    lock_kinds: tuple[str, ...] | None = ("mutex",)  # None: the python relay's are its --backend's

    @property
    def what(self) -> str:
        """`about`, then each option with its type and default (`chaos list` prints this)."""
        return "; ".join([self.about, *(
            f"-o {o.name} ({'true|false' if o.type is bool else o.type.__name__}, default "
            f"{str(o.default).lower() if o.type is bool else o.default}): {o.help}" for o in self.options)])


REFERENCE_CLIENTS = (
    ReferenceClient(name="go-etcd", command=str(CLIENTS / "go-etcd/bin/go-etcd"), servers="etcd:3",
                    built=CLIENTS / "go-etcd/bin/go-etcd", program="go-etcd/bin/go-etcd",
                    about="etcd's own Go clientv3/concurrency Mutex (etcd 3.4.23), as shipped",
                    options=(Option(name="reread_after_lock", type=bool, default=False,
                                    help="after Lock, Get the lock key; gone: revoke, answer fail (etcd 3.5 checks "
                                         "this after a wait, 3.4 does not)"),)),
    ReferenceClient(name="java-curator", command=str(CLIENTS / "java-curator/bin/java-curator"), servers="zookeeper:3",
                    built=CLIENTS / "java-curator/bin/java-curator", program="java-curator/bin/java-curator",
                    about="Apache Curator's InterProcessMutex (5.4.0), as shipped",
                    options=(Option(name="recheck_node_after_acquire", type=bool, default=False,
                                    help="after acquire(), read the lock node; gone: release, answer info (Curator's "
                                         "acquire() does not look again once its loop saw the node first)"),)),
    ReferenceClient(name="node-redlock", command=f"node {CLIENTS / 'node-redlock/client.js'}", servers="valkey:5",
                    built=CLIENTS / "node-redlock/node_modules", about="redlock 4.2.0 from npm on ioredis, five masters",
                    program="node-redlock/client.js"),
    ReferenceClient(name="python-relay", command=f"python3 {CLIENTS / 'python-relay/relay.py'} --backend NAME",
                    servers="KIND:N", built=CLIENTS / "python-relay/relay.py", about="any built-in backend over the protocol",
                    program="python-relay/relay.py", lock_kinds=None),
    ReferenceClient(name="example-redis", command=f"python3 {CLIENTS / 'example-redis/client.py'}", servers="valkey:1",
                    built=CLIENTS / "example-redis/client.py", about="the 35-line example: SET NX PX on one Redis",
                    program="example-redis/client.py"),
)


def reference_client(name: str) -> ReferenceClient:
    return next(c for c in REFERENCE_CLIENTS if c.name == name)


def reference_kinds(command: str) -> tuple[str, tuple[str, ...]] | None:
    """(who, the lock kinds it has) of the reference client a --client command runs, by the
    file of clients/ it names (wherever that checkout is); None for any other client (its
    init says: docs/client-protocol.md). The python relay has its --backend's kinds."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return None
    for c in REFERENCE_CLIENTS:
        tail = Path(c.program).parts
        if not any(Path(a).parts[-len(tail):] == tail for a in argv):
            continue
        if c.lock_kinds is not None:
            return f"the reference client {c.name}", c.lock_kinds
        relayed = next((b.split("=", 1)[1] if "=" in b else argv[i + 1] for i, b in enumerate(argv)
                        if (b == "--backend" and i + 1 < len(argv)) or b.startswith("--backend=")), None)
        from harness.core import plugins

        if relayed not in plugins.backend_names():
            return None  # the relay refuses it at init
        return f"{c.name} relaying backend {relayed}", kinds_of(plugins.backend_class(relayed))
    return None
