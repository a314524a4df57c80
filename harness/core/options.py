"""Options (`-o NAME=VALUE`): declared by whoever reads them, parsed in one place.

A backend or nemesis class lists what it reads in `OPTIONS`, a tuple of `Option`; the
cluster's own options are `CLUSTER_OPTIONS` below. `resolve(spec)` runs before anything
starts: it parses every value with its option's declared type and range, refuses a name
nobody declares (a typo such as `pause_multiplee` would otherwise run with the default,
silently), and returns the typed values. Readers then get real bools and numbers, never
the string "no" read as True.

A plugin backend that declares no OPTIONS gets its own names passed through as strings,
as before: only it knows what they mean.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from harness.core.errors import BadArgument

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


@dataclass(frozen=True, slots=True, kw_only=True)
class Option:
    """One option: its type (bool, int, float or str), default, range or choices, help."""

    name: str
    type: type
    default: Any
    help: str
    min: float | None = None  # inclusive bounds for numbers
    max: float | None = None
    above: float | None = None  # exclusive lower bound ("must be positive": above=0)
    choices: tuple[str, ...] = ()
    # The flag that gives this option ("--client CMD"), when its value names a program or a path
    # of this machine: a replay or shrink never takes it from a run dir, only from that flag.
    given_by: str = ""

    def parse(self, raw: Any) -> Any:
        """The typed value of `raw` (a string from the command line, or a value already typed
        in a stored spec.json), or a BadArgument naming the option and what it accepts."""
        where = f"-o {self.name}={raw}"
        if self.type is bool:
            if isinstance(raw, bool):
                return raw
            s = str(raw).strip().lower()
            if s in _TRUE or s in _FALSE:
                return s in _TRUE
            raise BadArgument(f"{where}: {self.name} is a flag; give true or false (or yes/no, on/off, 1/0)")
        if self.type in (int, float):
            return self._number(raw, where)
        s = str(raw).strip()
        if self.choices and s not in self.choices:
            raise BadArgument(f"{where}: choose one of {', '.join(self.choices)}")
        return s

    def _number(self, raw: Any, where: str) -> int | float:
        kind = "an integer" if self.type is int else "a number"
        if isinstance(raw, bool):
            raise BadArgument(f"{where}: {self.name} takes {kind}, not a flag")
        try:
            value = self.type(raw) if not isinstance(raw, str) else self.type(raw.strip())
        except (TypeError, ValueError):
            raise BadArgument(f"{where}: {self.name} takes {kind}{self._range_text()}") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise BadArgument(f"{where}: {self.name} must be a finite number{self._range_text()}")
        if (self.min is not None and value < self.min) or (self.max is not None and value > self.max) \
                or (self.above is not None and value <= self.above):
            raise BadArgument(f"{where}: {self.name} must be{self._range_text(bare=True)}")
        return value

    def _range_text(self, bare: bool = False) -> str:
        parts = []
        if self.above is not None:
            parts.append(f"above {self.above:g}")
        if self.min is not None:
            parts.append(f"at least {self.min:g}")
        if self.max is not None:
            parts.append(f"at most {self.max:g}")
        if not parts:
            return "" if not bare else " a number"
        return (" " if bare else ", ") + " and ".join(parts)


def values(options: Mapping[str, Any] | None, opts: Iterable[Option]) -> dict[str, Any]:
    """name -> typed value (or default) of each declared option: how a reader gets them all."""
    return {o.name: read(options or {}, o) for o in opts}


def read(options: Mapping[str, Any], opt: Option) -> Any:
    """The typed value of `opt` in `options` (raw or already resolved), or its default."""
    return opt.parse(options[opt.name]) if opt.name in options else opt.default


CLUSTER_OPTIONS = (
    Option(name="appendonly", type=bool, default=False,
           help="valkey keeps keys across a kill (append-only file); off: a killed node restarts empty"),
    Option(name="zk_clock", type=str, default="timewarp", choices=("timewarp", "faketime"),
           help="how clock-skew moves ZooKeeper's clock: vDSO patch (wall clock only) or libfaketime (also monotonic)"),
    Option(name="margin_ms", type=float, default=20.0, min=0, max=3_600_000,
           help="with --hold-until-expiry: a holder writes and releases this long before its validity ends"),
    Option(name="max_history_mb", type=int, default=2048, min=1, max=1_000_000,
           help="the history may grow to this many MB; a run that reaches it stops its workload there, with a note"),
    Option(name="load_clients", type=int, default=0, min=0, max=4096,
           help="load mode (fault-free performance runs): this many clients per worker process, as threads of "
                "the same client code; 0: one process per client, as every fault needs"),
    Option(name="load_driver", type=str, default="python", choices=("python", "native"),
           help="native: fault-free performance runs of the redis and etcd designs driven by clients/load-driver "
                "(Go goroutines running the same cycle, every op recorded and checked), so the figure is the "
                "service's, not our Python driver's"),
    Option(name="resource", type=str, default="counter", choices=("counter", "none"),
           help="what a holder does: read and write the fenced counter on the store server; none: nothing, the "
                "lock cycle alone (a throughput probe as the services' own load tools measure; mutual exclusion "
                "and tokens are still judged, lost updates and stale writes cannot be)"),
    Option(name="held_check", type=str, default="grant", choices=("grant", "write", "both"),
           help="when a holder asks its client whether it still holds the lock (`held`): right after the grant, "
                "right before its write and each renew (the application's last look), or both; a `held: true` "
                "after another process was granted the lock is a finding (the client did not notice it lost it). "
                "Default grant: a last look would keep a paused holder that tracks its validity from writing, "
                "and the articles' stale write (what fencing is for) from happening"),
    Option(name="handover_s", type=float, default=0.0, min=0, max=3600,
           help="a lock released (or whose lease ended) while others asked for it, with no fault in effect or "
                "healed in the last 5 s, must be granted again within this many seconds, or the run reports "
                "\"handover stalled\" (a waiter that missed its wake-up); 0: 1 s plus the design's retry delay "
                "(-o retry_delay_ms, where it has one)"),
    Option(name="own_key", type=bool, default=False,
           help="client i always takes lock key i (mod --keys) instead of a random key per cycle: a throughput "
                "probe without contention, as the services' own load tools measure"),
    Option(name="clients_on", type=str, default="control", choices=("control", "manager", "spread"),
           help="with --cluster swarm and --client CMD: where the client processes run. control: on this machine "
                "(the control node), as with every other provider; manager: in containers on the swarm's manager; "
                "spread: in containers round robin over the swarm's engines (client host cI on engine I). Their "
                "network is a container's own, cut and paused through its engine. Never taken from a run dir: a "
                "replay's clients run on this machine",
           given_by="-o clients_on"),
    Option(name="client_image", type=str, default="",
           help="with -o clients_on=manager|spread: the image the client command runs in (default: the harness "
                "image, which has Python and the harness's libraries); this machine's working directory and the "
                "chaoslock checkout are mounted at the same paths. Never taken from a run dir",
           given_by="-o client_image"),
)


def cluster_option(options: Mapping[str, Any], name: str) -> Any:
    """The value of one of CLUSTER_OPTIONS, by name, from a run's options."""
    return read(options, next(o for o in CLUSTER_OPTIONS if o.name == name))


def declared(component: Any) -> tuple[Option, ...] | None:
    """A backend's or nemesis's declared options; None if it declares none (a plugin)."""
    return getattr(component, "OPTIONS", None)


def every_option() -> dict[str, Option]:
    """Every option any built-in or installed backend or nemesis declares (first wins)."""
    from harness.core import plugins

    found = {o.name: o for o in CLUSTER_OPTIONS}
    for cls in [plugins.backend_class(n) for n in plugins.backend_names()] + \
               [plugins.nemesis_class(n) for n in plugins.nemesis_names()]:
        for o in declared(cls) or ():
            found.setdefault(o.name, o)
    return found


def resolve(backend: Any, nemeses: Iterable[Any], options: Mapping[str, Any]) -> tuple[dict, list[str]]:
    """(typed options, notes) for a run of `backend` under `nemeses`.

    Raises BadArgument for a value that does not parse, and for a name no component of
    chaoslock declares (with the nearest known names). A name another backend or nemesis
    reads, but none of this run's, is kept and gets a note: it has no effect here.
    """
    mine: dict[str, Option] = {o.name: o for o in CLUSTER_OPTIONS}
    for c in (backend, *nemeses):
        for o in declared(c) or ():
            mine.setdefault(o.name, o)
    # A plugin that declares nothing reads its own names; an external client process gets
    # every option in its init (forwards_options): neither is ours to refuse.
    open_ended = declared(backend) is None or getattr(backend, "forwards_options", False)
    known = None
    typed: dict[str, Any] = {}
    notes: list[str] = []
    for name, raw in options.items():
        if name in mine:
            typed[name] = mine[name].parse(raw)
            continue
        if open_ended:
            known = known if known is not None else every_option()
            typed[name] = known[name].parse(raw) if name in known else raw
            continue
        known = known if known is not None else every_option()
        if name in known:
            typed[name] = known[name].parse(raw)
            notes.append(f"option {name} is not read by backend {getattr(backend, 'name', backend)} or "
                         f"the nemeses of this run; it has no effect here")
            continue
        near = difflib.get_close_matches(name, list(known), n=3, cutoff=0.6)
        hint = f"did you mean {' or '.join(near)}? " if near else ""
        who = f"backend {getattr(backend, 'name', backend)}" + "".join(
            f" / nemesis {getattr(n, 'name', n)}" for n in nemeses)
        raise BadArgument(f"unknown option {name!r} for {who}; {hint}known: {', '.join(sorted(mine))}")
    return typed, notes
