"""What the spec alone decides, before any server starts: refusals, and notes on settings
that have no effect.

A run that cannot do what was asked must say so before it makes a run dir or moves
`store/latest`, in one sentence naming the setting and the fix (exit 254):

- `refuse(spec)` (TestSpec.validate, on the typed spec): each nemesis's own refusal
  (JudgesSpec: a waiter fault with one client, a fault that needs `--renew`, a partition of
  one server, a slow link that changes nothing), the lock kind an external client lacks
  (harness/core/kinds.py), load mode with a fault, a `--hold-until-expiry` margin that eats
  the whole lease, a `--hold-max` longer than the run.
- `fit(spec)` (the runner, for a run that plans its own faults; a replay's recorded faults
  bring their own timing): a fault phase too short for any fault to start and end in it.
- `notes(spec)`: a flag or option without effect on the chosen design (one line each; the
  run goes on), such as `--fencing` on a design without tokens.

Must not: look at the host, start anything, or refuse what a run could still do.
"""

from __future__ import annotations

from typing import Any

from harness.core import plugins
from harness.core.contracts.nemesis import JudgesSpec
from harness.core.errors import BadArgument
from harness.core.options import cluster_option

RENEWERS = (("watchdog", "watchdog_interval_ms", "the watchdog"), ("keepalive", "keepalive_interval_ms", "the keepalive"))
DEFAULT_INTERVAL_S = 3.0  # TestSpec.nemesis_interval's default


def refuse(spec: Any) -> None:
    """BadArgument, one sentence, for the first setting of `spec` (typed) no run can serve."""
    for name in spec.nemesis:
        cls = plugins.nemesis_class(name)
        if isinstance(cls, JudgesSpec) and (why := cls.refusal(spec)):
            raise BadArgument(why)
    if spec.nemesis and cluster_option(spec.options, "load_clients"):
        raise BadArgument(f"-o load_clients serves fault-free performance runs; a fault ({', '.join(spec.nemesis)}) "
                          f"needs one process per client: drop -o load_clients or the nemesis")
    if getattr(spec, "fencing", False) and cluster_option(spec.options, "resource") == "none":
        raise BadArgument("--fencing makes the verdict the data's, and -o resource=none writes no data: drop one "
                          "(without --fencing, mutual exclusion is judged)")
    if why := _clients_on_refusal(spec):
        raise BadArgument(why)
    margin = cluster_option(spec.options, "margin_ms")
    if spec.hold_until_expiry and margin >= spec.ttl_ms:
        raise BadArgument(f"-o margin_ms={margin:g} with --hold-until-expiry leaves no time to hold a lease of "
                          f"--ttl {spec.ttl_ms} ms; give a margin below the TTL (default 20)")
    if spec.hold_max_ms is not None and spec.hold_max_ms >= spec.time_limit * 1000:
        raise BadArgument(f"--hold-max ({spec.hold_max_ms} ms) must be shorter than --time-limit "
                          f"({spec.time_limit:g} s), or no hold ends within the run")


def _swarm_refusal(spec: Any) -> str | None:
    """What the swarm provider cannot shape: bandwidth where the rules run in containers (links
    from the servers, or from clients on the swarm), whose interfaces this machine does not own."""
    if getattr(spec, "cluster", None) != "swarm" or "slow-link" not in spec.nemesis or not spec.options.get("rate_kbit"):
        return None
    if spec.options.get("between") == "servers" or cluster_option(spec.options, "clients_on") != "control":
        return ("slow-link -o rate_kbit on the swarm limits only the links of clients on this machine (-o between=clients "
                "-o clients_on=control); delay, jitter and loss work on every link")
    return None


def _clients_on_refusal(spec: Any) -> str | None:
    """-o clients_on=manager|spread: client processes in containers on a swarm's engines."""
    if why := _swarm_refusal(spec):
        return why
    where = cluster_option(spec.options, "clients_on")
    if where == "control":
        if cluster_option(spec.options, "client_image"):
            return "-o client_image goes with -o clients_on=manager|spread (the clients' containers on a swarm)"
        return None
    if getattr(spec, "cluster", None) != "swarm":
        return f"-o clients_on={where} places the clients on a swarm's engines: it goes with --cluster swarm"
    if spec.backend != "external":
        return (f"-o clients_on={where} runs client processes in containers, and backend {spec.backend} runs inside "
                f"the harness's workers; give it as a client: --client 'python3 clients/python-relay/relay.py "
                f"--backend {spec.backend}' --servers KIND:N")
    if cluster_option(spec.options, "load_driver") != "python" or cluster_option(spec.options, "load_clients"):
        return f"-o clients_on={where} runs one client process per worker; drop -o load_driver and -o load_clients"
    if "clock-skew" in spec.nemesis and spec.options.get("clock_target") == "clients":
        return (f"clock-skew -o clock_target=clients moves a client process's clock from this machine (the vDSO "
                f"patch), and with -o clients_on={where} it runs in a container on the swarm (libfaketime there would "
                f"fake its monotonic clock too, or fail its sleeps); use clock_target=servers or drop -o clients_on")
    return None


def fit(spec: Any) -> str | None:
    """Why no fault of the spec's nemeses can start and end within its fault phase (None:
    one can). A fault starts half a --nemesis-interval in at the earliest (generator.plan),
    and a nemesis that times its own faults (pause-holder) starts one only if it ends before
    the fault phase does."""
    phase = spec.time_limit - spec.recovery
    first = spec.nemesis_interval / 2
    for name in spec.nemesis:
        cls = plugins.nemesis_class(name)
        span = cls.span_s(spec) if isinstance(cls, JudgesSpec) else 0.0
        if phase <= first + span:
            lasts = f" and lasts {span:g} s" if span else ""
            return (f"--nemesis {name}: no fault fits in the fault phase of {phase:g} s (--time-limit {spec.time_limit:g} "
                    f"minus --recovery {spec.recovery:g}): the first starts {first:g} s in (half of --nemesis-interval)"
                    f"{lasts}; lengthen --time-limit or shorten --nemesis-interval")
    return None


def notes(spec: Any) -> list[str]:
    """One line for each flag or option of `spec` (typed) that has no effect on this run."""
    out = []
    backend = plugins.backend_class(spec.backend)
    if spec.fencing and getattr(backend, "has_fencing", True) is False:
        out.append(f"--fencing has no effect on backend {spec.backend}: it hands out no fencing tokens, so the "
                   f"store rejects no stale write (only the writes checker then decides the verdict)")
    if spec.clock_jump_s is not None and "clock-skew" not in spec.nemesis:
        out.append("--clock-jump has no effect without --nemesis clock-skew")
    if not spec.nemesis and spec.nemesis_interval != DEFAULT_INTERVAL_S:
        out.append("--nemesis-interval has no effect without a nemesis")
    if "margin_ms" in spec.options and not spec.hold_until_expiry:
        out.append("-o margin_ms has no effect without --hold-until-expiry")
    if spec.hold_max_ms is not None and (spec.renew or spec.hold_until_expiry):
        how = "--renew (holders work 1-2 TTLs)" if spec.renew else \
            "--hold-until-expiry (holders hold until -o margin_ms before their validity ends)"
        out.append(f"--hold-max has no effect with {how}")
    if cluster_option(spec.options, "own_key") and spec.keys == 1:
        out.append("-o own_key has no effect with one lock key: every client takes it; give --keys K")
    for flag, option, what in RENEWERS:
        every = spec.options.get(option)
        if spec.options.get(flag, flag == "keepalive") is True and isinstance(every, (int, float)) \
                and every >= spec.ttl_ms:
            out.append(f"-o {option}={every:g} is not below --ttl {spec.ttl_ms}: {what} renews only after the lease "
                       f"has expired")
    return out
