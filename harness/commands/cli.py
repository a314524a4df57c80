"""The `chaos` command line. Flags only build a TestSpec; `runner.run(spec)` does the work.

Exit codes (DESIGN.md): 0 valid, 1 invalid, 2 unknown, 130 interrupted by Ctrl-C (SIGINT),
143 by SIGTERM, 129 by SIGHUP, 254 bad arguments, 255 crash. An interrupted command says so on
its last line ("exit code: 130 (interrupted by Ctrl-C)"), whatever it found before.
Bad input gets one sentence that says what to do, never a traceback.
"""

from __future__ import annotations

import json
import math
import random
import shlex
import signal
import sys
import traceback

import click

from harness.commands.cliargs import CLUSTERS, check_writable_dir, check_writable_file, ssh_options, ssh_settings
from harness.core.errors import (EXIT_BAD_ARGS, EXIT_CRASH, EXIT_HANGUP, EXIT_INTERRUPTED, EXIT_INVALID, EXIT_TERMINATED,
                                  EXIT_UNKNOWN, EXIT_VALID, BadArgument, ChaosError)


def exit_code(valid) -> int:
    """0, 1 or 2 for a verdict as stored (parse_valid: anything unrecognised is unknown)."""
    from harness.core.contracts.checker import parse_valid

    v = parse_valid(valid)
    if v is True:
        return EXIT_VALID
    if v is False:
        return EXIT_INVALID
    return EXIT_UNKNOWN


def parse_options(pairs: tuple[str, ...]) -> dict:
    """NAME -> VALUE of the -o options; a name given twice is refused (no option is
    repeatable: the last would silently win)."""
    out: dict[str, str] = {}
    for p in pairs:
        k, sep, v = p.partition("=")
        if not sep or not k.strip():
            raise BadArgument(f"--option {p!r} is not NAME=VALUE; for example --option node_timeout_ms=50")
        k = k.strip()
        if k in out:
            raise BadArgument(f"-o {k} given twice ({k}={out[k]} and {k}={v.strip()}); give it once")
        out[k] = v.strip()
    return out


def verdict_text(s: dict, *, interrupted_by: int | None = None) -> str:
    """The verdict of a summary in words; its last line is the exit code of the command that
    prints it: the verdict's, or for a run ended by a signal (`interrupted_by`) 130 or 143,
    saying so. (`chaos check` of a stored interrupted run was not interrupted itself.)"""
    from harness.core.contracts.checker import verdict_word

    v = s.get("valid")
    head = verdict_word(v)
    parts = []
    viol = s.get("violations") or 0
    what = "mutual exclusion" if s.get("lock", "mutex") == "mutex" else f"{s['lock']} exclusion"  # --lock rw, semaphore:N
    parts.append(f"{what} held" if not viol else f"{what} violated {viol} time{'s' if viol != 1 else ''}")
    acc, rej = s.get("stale_writes_accepted") or 0, s.get("stale_writes_rejected") or 0
    if acc or rej:
        parts.append(f"{rej} stale write{'s' if rej != 1 else ''} rejected by fencing, {acc} accepted"
                     + ("" if s.get("fencing") else " (no fencing)"))
    lost = s.get("lost_updates")
    if lost:
        parts.append(f"{lost} lost update{'s' if lost != 1 else ''}")
    stuck, starved = s.get("stuck") or 0, s.get("starved") or 0
    if stuck:
        parts.append(f"lock STUCK {stuck} time{'s' if stuck != 1 else ''}")
    if starved:
        parts.append(f"{starved} waiter{'s' if starved != 1 else ''} STARVED")
    stalls = s.get("handover_stalls") or 0
    if stalls:
        parts.append(f"handover STALLED {stalls} time{'s' if stalls != 1 else ''}")
    timeouts = (s.get("acquires_late") or 0) + (s.get("acquires_early") or 0)
    if timeouts:
        parts.append(f"acquire timeout NOT HONOURED {timeouts} time{'s' if timeouts != 1 else ''}")
    denied = s.get("held_false_unexplained") or 0
    if denied:
        parts.append(f"the client DENIED holding a lock it had just been granted {denied} time{'s' if denied != 1 else ''}")
    lines = [f"{head}: " + "; ".join(parts)]
    if s.get("interrupted"):
        lines[0] += " (INTERRUPTED: this covers only the part that ran)"
    from harness.checker.causes import cause_text

    if viol and cause_text(s):
        lines.append(f"  {viol} violation{'s' if viol != 1 else ''}: {cause_text(s)}")
    late = [f"{s[k]} {f}{'s' if s[k] != 1 else ''}" for k, f in (("releases_ok_after_lease_lost", "release"),
                                                            ("renews_ok_after_lease_lost", "renew")) if s.get(k)]
    if late:
        lines.append(f"  {' and '.join(late)} said ok after the lock was lost: the client cannot tell")
    lines += liveness_lines(s)
    if s.get("unknown_reason"):
        lines.append(f"  unknown because {s['unknown_reason']}")
    lines.append(f"  {s.get('critical_sections')} critical sections, acquires ok/fail/info "
                 f"{s.get('acquires_ok')}/{s.get('acquires_fail')}/{s.get('acquires_info')}, "
                 f"acquire p50 {s.get('p50_acquire_ms')} ms p99 {s.get('p99_acquire_ms')} ms")
    other = [f"{n}={val}" for n, val in (s.get("checkers") or {}).items() if n not in ("stats",)]
    if other:
        lines.append("  checkers: " + ", ".join(other))
    for n, why in (s.get("not_judged") or {}).items():  # each row neither true nor false, with its reason
        if f"checker {n} could not decide" not in (s.get("unknown_reason") or ""):
            lines.append(f"  {n} not judged: {why}")
    for e in s.get("errors") or []:
        lines.append(f"  note: {e}")
    if s.get("netns_fallback"):
        lines.append(f"  note: ran on loopback without namespaces ({s['netns_fallback']})")
    lines.append(f"  run dir: {s.get('run_dir')}")
    if interrupted_by is not None:
        from harness.core import interrupts

        lines.append(f"  {interrupts.exit_line(interrupted_by)}")
    else:
        lines.append(f"  exit code: {exit_code(v)}")
    return "\n".join(lines)


def liveness_lines(s: dict) -> list[str]:
    """The summary's lines on the lock's other promises (harness/checker/liveness.py,
    leases.py): stuck and starved (each its own line), availability by phase, how long a dead
    holder's lock lived on, and leases granted already expired."""
    lines = []
    bound = s.get("liveness_bound_s")
    if s.get("stuck"):
        lines.append(f"  STUCK: the lock was free but nobody could get it for {s.get('free_unavailable_s')} s "
                     f"outside faults (bound {bound} s: lease + acquire timeout + margin)")
    if s.get("starved"):
        lines.append(f"  STARVED: {s['starved']} waiter(s) queued longer than {bound} s while others were granted")
    if s.get("handover_stalls"):
        lines.append(f"  HANDOVER STALLED: a lock released while others asked was free up to {s.get('handover_max_s')} s "
                     f"before the next grant, with no fault near (bound {s.get('handover_bound_s')} s: -o handover_s)")
    if s.get("acquires_late") or s.get("acquires_early"):
        lines.append(f"  TIMEOUT NOT HONOURED: {s.get('acquires_late') or 0} acquire(s) answered more than "
                     f"{_late_margin()} s after their timeout, {s.get('acquires_early') or 0} gave up long before it "
                     f"while the lock was taken, with no fault to explain it")
    avail = s.get("availability")
    if isinstance(avail, dict):
        shares = [f"{p} {round(100 * v['share'])}% of {v['attempts']}" for p, v in avail.items()
                  if isinstance(v, dict) and v.get("share") is not None]
        if shares:
            lines.append("  availability (acquires ok): " + ", ".join(shares))
    if s.get("outlived_holder_s") is not None:
        over = s.get("outlived_holder") or 0
        lines.append(f"  a dead holder's lock lived on {s['outlived_holder_s']} s at most"
                     + (f"; OUTLIVED its holder past the lease + margin {over} time{'s' if over != 1 else ''}" if over else ""))
    if s.get("expired_grants") or s.get("overlong_grants"):
        lines.append(f"  granted an expired lease {s.get('expired_grants') or 0} time(s), "
                     f"a lease longer than the TTL {s.get('overlong_grants') or 0} time(s)")
    if s.get("lingering_releases"):
        lines.append(f"  {s['lingering_releases']} release(s) answered fail or info, and nobody could take the lock "
                     f"until the releaser's lease ran out (up to {s.get('lingered_s')} s)")
    if s.get("duplicate_tokens"):
        lines.append(f"  {s['duplicate_tokens']} grant(s) carried a fencing token another grant of the key already had")
    return lines


def _late_margin() -> float:
    from harness.checker.timeouts import LATE_MARGIN_S

    return LATE_MARGIN_S


# The other commands, each loaded only when named (or listed by --help), so that `chaos check`
# of a stored run loads no cluster, nemesis or client code (tests/unit/architecture/test_check_imports.py).
LAZY = {
    "cluster": "harness.commands.cluster_cli:cluster",
    "report": "harness.commands.report:report",
    "serve": "harness.commands.report:serve",
    "reproduce": "harness.commands.reproduce:reproduce",
    "client-check": "harness.commands.client_check:client_check",
    "explore": "harness.commands.explore:explore",
    "matrix": "harness.commands.matrix:matrix",
    "compare": "harness.commands.compare:compare",
    "shrink": "harness.commands.shrink:shrink",
    "check": "harness.commands.check:check",
    "audit": "harness.commands.audit:audit",
}


class LazyGroup(click.Group):
    """A group whose LAZY commands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(LAZY))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in LAZY and name not in self.commands:
            import importlib

            mod, _, attr = LAZY[name].partition(":")
            self.add_command(getattr(importlib.import_module(mod), attr), name)
        return super().get_command(ctx, name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """chaoslock: Jepsen-style chaos tests for distributed locks on real servers."""


@cli.command()
@click.option("--backend", "-b", default=None, help="lock design under test (chaos list; default redlock)")
@click.option("--client", "client_cmd", default=None, metavar="CMD",
              help="test your own lock client: a command speaking the client protocol (docs/client-protocol.md)")
@click.option("--servers", default=None, metavar="KIND:N", help="with --client: the lock service, e.g. etcd:3")
@click.option("--nemesis", "-n", default="none", show_default=True, help="comma-separated faults, or none")
@click.option("--time-limit", type=float, default=30.0, show_default=True, help="seconds of workload")
@click.option("--recovery", type=float, default=None, help="fault-free seconds at the end (default 3, at most a quarter of --time-limit)")
@click.option("--concurrency", "-c", type=int, default=5, show_default=True, help="client worker processes (at most 256)")
@click.option("--keys", "-k", type=int, default=1, show_default=True,
              help="distinct lock keys; each cycle a worker picks one (checked per key)")
@click.option("--seed", type=int, default=None, help="seed of the schedule (random if omitted; printed)")
@click.option("--ttl", "ttl_ms", type=int, default=2000, show_default=True, help="lock TTL in ms")
@click.option("--acquire-timeout", type=float, default=2.0, show_default=True, help="seconds before an acquire fails")
@click.option("--hold-max", "hold_max_ms", type=int, default=None, help="longest critical section in ms (default 60% of TTL)")
@click.option("--fencing/--no-fencing", default=False, show_default=True, help="resource enforces fencing tokens")
@click.option("--watchdog", is_flag=True, help="renew the lease in the background (backends with a watchdog)")
@click.option("--renew", is_flag=True, help="holders work 1-2 TTLs, renewing in the foreground every TTL/3")
@click.option("--reenter", is_flag=True, help="holders ask again for the lock they hold (measures reentrancy)")
@click.option("--hold-until-expiry", is_flag=True,
              help="holders keep the lock until -o margin_ms (default 20) before their validity ends, then write and release")
@click.option("--nemesis-interval", type=float, default=3.0, show_default=True, help="seconds per fault and between faults")
@click.option("--clock-jump", "clock_jump_s", type=float, default=None, help="seconds clock-skew jumps (default 2.5 x TTL)")
@click.option("--lock", "lock", default="mutex", show_default=True, metavar="mutex|rw|semaphore:N",
              help="lock kind: a mutex, a read-write lock, or a semaphore of N permits (docs/running.md)")
@click.option("--option", "-o", "options", multiple=True,
              help="option NAME=VALUE (chaos list --options); give several -o, each name once")
@click.option("--netns/--no-netns", default=None, help="require / refuse network namespaces (default: use if possible)")
@click.option("--cluster", type=click.Choice(CLUSTERS), default="local", show_default=True,
              help="local processes in namespaces, Docker Compose (needs a Docker engine), your hosts over ssh, or a Docker Swarm")
@ssh_options
@click.option("--base-port", type=int, default=None, help="first server port on loopback (default: free ports)")
@click.option("--store", default="store", show_default=True, help="where runs are stored")
@click.option("--json", "as_json", is_flag=True, help="print one JSON summary line on stdout")
@click.option("--junit", type=click.Path(dir_okay=False), default=None, help="also write a JUnit XML file")
@click.option("--replay", "replay_dir", default=None, metavar="RUN_DIR",
              help="run again with RUN_DIR's workload options and its recorded faults; the store, provider, hosts "
                   "and client command come from this command line (docs/reproduce.md)")
@click.option("--repeat", type=click.IntRange(1, 1000), default=1, show_default=True, metavar="M",
              help="run the same spec M times (each run kept) and report \"invalid in k of M\"")
def run(backend, client_cmd, servers, nemesis, time_limit, recovery, concurrency, keys, seed, ttl_ms, acquire_timeout, hold_max_ms, fencing,
        watchdog, renew, reenter, hold_until_expiry, nemesis_interval, clock_jump_s, lock, options, netns, cluster, hosts, ssh_user, ssh_key, ssh_port, ssh_known_hosts,
        swarm_nodes,        base_port, store, as_json, junit, replay_dir, repeat):
    """Run one chaos test and print its verdict."""
    from harness.core.spec import TestSpec

    schedule = None
    if replay_dir is not None:
        from harness.commands.shrink import replay_cli

        # the run dir gives the workload and its faults; never a command, a store or a host
        spec, schedule = replay_cli(replay_dir, click.get_current_context())
        seed, time_limit, store = spec.seed, spec.time_limit, spec.store
    else:
        names = tuple(n.strip() for n in nemesis.split(",") if n.strip() and n.strip() != "none")
        options = parse_options(options)
        if client_cmd is not None:
            if backend not in (None, "external"):
                raise BadArgument(f"--client runs your own client; drop --backend {backend} (or drop --client)")
            if not servers:
                raise BadArgument("--client needs --servers KIND:N, the lock service it talks to (e.g. etcd:3)")
            if not client_cmd.strip():
                raise BadArgument("an external client needs its command: chaos run --client 'CMD ARGS' --servers KIND:N")
            given = [f"-o {k}" for k in ("command", "servers") if k in options]
            if given:
                raise BadArgument(f"{given[0]} is set by --{given[0][3:].replace('command', 'client')}; drop it")
            backend, options["command"], options["servers"] = "external", client_cmd, servers
        elif servers is not None:
            raise BadArgument("--servers goes with --client; a built-in backend declares its own servers")
        backend = backend or "redlock"
        if watchdog:
            if options.get("watchdog", "true").strip().lower() not in ("1", "true", "yes", "on"):
                raise BadArgument(f"--watchdog contradicts -o watchdog={options['watchdog']}; give one of them")
            options["watchdog"] = "true"
        seed = seed if seed is not None else random.SystemRandom().randrange(1, 2**31)
        if recovery is None:  # only the default adapts to a short run; an explicit value is kept or refused
            recovery = min(3.0, time_limit / 4) if math.isfinite(time_limit) else 3.0
        spec = TestSpec(backend=backend, nemesis=names, time_limit=time_limit, recovery=recovery,
                        concurrency=concurrency, keys=keys, seed=seed, ttl_ms=ttl_ms, acquire_timeout=acquire_timeout,
                        hold_max_ms=hold_max_ms, fencing=fencing, renew=renew, reenter=reenter,
                        hold_until_expiry=hold_until_expiry, nemesis_interval=nemesis_interval,
                        clock_jump_s=clock_jump_s, lock=lock, options=options, netns=netns, cluster=cluster, base_port=base_port, store=store,
                        ssh=ssh_settings(cluster, hosts, ssh_user, ssh_key, ssh_port, ssh_known_hosts, swarm_nodes),
                        command=shlex.join(["chaos"] + sys.argv[1:] + ([] if "--seed" in sys.argv else ["--seed", str(seed)])))
    spec = spec.validate()
    if client_cmd is not None and replay_dir is None:
        from harness.core.pathcheck import check_program

        check_program(client_cmd, "--client")  # the program is there and runs: before any server starts
    check_writable_dir(store, "--store")
    if junit:
        check_writable_file(junit, "--junit")
    human = sys.stderr if as_json else sys.stdout
    from harness.commands.cluster_cli import say_reaped

    say_reaped()
    print(f"chaos run {spec.name} seed {seed} for {time_limit:g}s", file=human)
    for note in spec.notes():
        print(f"note: {note}", file=human)
    if schedule is not None:
        print(f"replaying {schedule.of}: {len(schedule.faults)} recorded fault(s)", file=human)
    if repeat > 1:
        from harness.commands.shrink import repeat as repeat_runs

        code, summaries = repeat_runs(spec, repeat, schedule, human, junit)
        if as_json:
            print(json.dumps(summaries, default=str))
        return code
    from harness.engine.runner import run as run_spec  # late: a refusal above need not import the servers' code

    outcome = run_spec(spec, progress=True, replay=schedule)
    ended_by = (outcome.signal or signal.SIGINT) if outcome.interrupted else None
    print(verdict_text(outcome.summary, interrupted_by=ended_by), file=human)
    if as_json:
        print(json.dumps(outcome.summary, default=str))
    if junit:
        from results.junit import cases_from_doc, write_junit

        write_junit(junit, cases_from_doc(outcome.results))
    if ended_by is not None:
        from harness.core import interrupts

        return interrupts.exit_code(ended_by)
    return exit_code(outcome.summary["valid"])


@cli.command(name="list")
@click.option("--options", "show_options", is_flag=True, help="also list every -o option with its type and default")
def list_cmd(show_options):
    """List backends and nemeses (built in and from entry points), and their options."""
    from harness.core import options, plugins

    for title, names, load in (("backends", plugins.backend_names(), plugins.backend_class),
                               ("nemeses", plugins.nemesis_names(), plugins.nemesis_class)):
        print(f"{title}:")
        for n in names:
            opts = options.declared(load(n))
            said = ", ".join(o.name for o in opts) if opts else ("none" if opts is not None else "not declared (a plugin)")
            print(f"  {n:22} -o {said}" if opts else f"  {n:22} options: {said}")
    print("cluster:  -o " + ", ".join(o.name for o in options.CLUSTER_OPTIONS))
    from workloads.external import REFERENCE_CLIENTS

    print("clients (chaos run --client CMD --servers KIND:N; yours too, see docs/client-protocol.md):")
    for c in REFERENCE_CLIENTS:
        print(f"  {c.name:22} --client '{c.command}' --servers {c.servers}"
              + ("" if c.built.exists() else "  (not built: make install)"))
        print(f"  {'':22} {c.what}")
    if show_options:
        owners: dict[str, list[str]] = {}
        for kind, names, load in (("backend", plugins.backend_names(), plugins.backend_class),
                                  ("nemesis", plugins.nemesis_names(), plugins.nemesis_class)):
            for n in names:
                for o in options.declared(load(n)) or ():
                    owners.setdefault(o.name, []).append(n)
        for o in options.CLUSTER_OPTIONS:
            owners.setdefault(o.name, []).append("cluster")
        every = options.every_option()
        for c in REFERENCE_CLIENTS:  # read by the client process itself; declared beside it
            for o in c.options:
                every.setdefault(o.name, o)
                owners.setdefault(o.name, []).append(f"client {c.name}")
        print("options (-o NAME=VALUE):")
        for name, o in sorted(every.items()):
            kind = "|".join(o.choices) if o.choices else ("true|false" if o.type is bool else o.type.__name__)
            print(f"  {name} ({kind}, default {o.default}; {', '.join(owners.get(name, []))}): {o.help}")
    return 0


def _interrupted() -> None:
    """A command that a signal ended without a last line of its own: say so, exit 130, 143 or 129."""
    from harness.core import interrupts

    interrupts.exiting_interrupted()
    print(f"chaos: INTERRUPTED; {interrupts.exit_line()}", file=sys.stderr)
    sys.exit(interrupts.exit_code())


OUR_PACKAGES = ("harness", "nemesis", "workloads", "results", "benchmarks", "clients")  # a missing one is a bug


def main(argv: list[str] | None = None) -> None:
    from harness.core import interrupts

    interrupts.handle_stops()  # SIGTERM and SIGHUP tear down like Ctrl-C
    try:
        rv = cli.main(args=argv, prog_name="chaos", standalone_mode=False)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except click.UsageError as e:
        print(f"chaos: {e.format_message()} (see chaos {e.ctx.command_path.split(' ', 1)[-1] if e.ctx else ''} --help)".replace(" chaos --help", " --help"), file=sys.stderr)
        sys.exit(EXIT_BAD_ARGS)
    except click.Abort:
        _interrupted()
    except ChaosError as e:
        print(f"chaos: {e}", file=sys.stderr)
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        _interrupted()
    except Exception as e:
        missing = e.name if isinstance(e, ModuleNotFoundError) else None
        if missing and missing.split(".")[0] not in OUR_PACKAGES:
            print(f"chaos: the Python package {missing!r} is not installed; run `make install` (it installs what "
                  f"chaoslock needs)", file=sys.stderr)
            sys.exit(EXIT_BAD_ARGS)
        import tempfile

        fd, crash = tempfile.mkstemp(prefix="chaos-crash-", suffix=".txt")
        with open(fd, "w") as f:
            f.write(traceback.format_exc())
        print(f"chaos: crashed with {type(e).__name__}: {e} (traceback in {crash}); please report it", file=sys.stderr)
        sys.exit(EXIT_CRASH)
    code = rv if isinstance(rv, int) else 0
    if code in (EXIT_INTERRUPTED, EXIT_TERMINATED, EXIT_HANGUP) or interrupts_pressed():
        # A second or third press must not end the exit itself: Python's default handler would
        # raise in the interpreter's teardown (multiprocessing's atexit) and die of SIGINT (-2).
        from harness.core import interrupts

        interrupts.exiting_interrupted()
    sys.exit(code)


def interrupts_pressed() -> bool:
    from harness.core import interrupts

    return interrupts.presses() > 0


if __name__ == "__main__":
    main()
