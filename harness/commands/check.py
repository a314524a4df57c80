"""`chaos check PATH`: judge a stored run dir, or any history.jsonl, from its history alone.

A run dir's spec.json says what the run was; a history without one (a foreign one, or a copy)
is judged on what it says alone (TestSpec.bare): `--ttl`, `--keys` and `--backend` supply what
it lacks. Loads no cluster, nemesis or client code (tests/unit/architecture/test_check_imports.py).
"""

from __future__ import annotations

import json
import math

import click

from harness.commands.cli import exit_code, verdict_text
from harness.core.errors import BadArgument


@click.command()
@click.argument("path", type=click.Path())
@click.option("--model", type=click.Choice(["mutex", "register", "cas-register", "fenced-register"]), default=None,
              help="check one linearizability model only (default: every checker of a run)")
@click.option("--time-limit", type=float, default=30.0, show_default=True,
              help="budget in seconds of each linearizability search (with or without --model)")
@click.option("--json", "as_json", is_flag=True, help="print the result as JSON")
@click.option("--ttl", "ttl_ms", type=int, default=None, metavar="MS",
              help="a history without spec.json: the lock's TTL in ms (else what needs it is unknown)")
@click.option("--keys", type=int, default=None, metavar="N",
              help="a history without spec.json: how many lock keys (else each key it names is judged alone)")
@click.option("--backend", default=None, metavar="NAME",
              help="a history without spec.json: the lock design (its servers' facts explain violations)")
def check(path, model, time_limit, as_json, ttl_ms, keys, backend):
    """Check a stored run dir or a history.jsonl; exit 0 valid, 1 invalid, 2 unknown.

    A history without a spec.json beside it is judged on what it says: no backend, TTL or
    key count is assumed; --ttl, --keys and --backend supply them."""
    from pathlib import Path

    from harness.engine.analysis import read_outcome
    from harness.core.contracts.checker import safe_check
    from harness.checker.policy import summarize, verdicts
    from results.store import load_run

    if not (math.isfinite(time_limit) and 0 < time_limit <= 86_400):
        raise BadArgument(f"--time-limit must be above 0 and at most 86400 seconds, not {time_limit:g}")
    spec, history = load_run(path)
    spec = bare_given(spec, ttl_ms=ttl_ms, keys=keys, backend=backend)
    p = Path(path)
    if model:
        from harness.checker.linearizable import LinearizableChecker

        from harness.core.contracts.checker import parse_valid

        r = safe_check(LinearizableChecker(model, time_limit=time_limit), spec, history, name=model)
        out = r.to_dict()
        valid = parse_valid(r.valid)
        if valid not in (True, False):
            from harness.checker.policy import undecided

            out["unknown_reason"] = undecided({model: r}, {model}, set())
    else:
        results = verdicts(spec, history, time_limit)
        # outcome.json lies beside the history: a crashed run's history alone is never VALID
        out = summarize(spec, results, p if p.is_dir() else None, read_outcome(p if p.is_dir() else p.parent))
        valid = out["valid"]
    if as_json:
        print(json.dumps(out, default=str))
    else:
        why = out.get("unknown_reason") or out.get("error")
        print(verdict_text(out) if not model else f"{model}: {valid}" + (f" ({why})" if why else ""))
    return exit_code(valid)


def bare_given(spec, *, ttl_ms: int | None, keys: int | None, backend: str | None):
    """The spec of `chaos check`: a stored run's own, or a bare history's with what
    --ttl/--keys/--backend supply (given for a run with a spec.json: refused, it says them)."""
    from harness.core import plugins
    from harness.core.spec import MAX_KEYS, TestSpec

    given = {k: v for k, v in (("--ttl", ttl_ms), ("--keys", keys), ("--backend", backend)) if v is not None}
    if not given:
        return spec
    if not spec.is_bare:
        raise BadArgument(f"{', '.join(given)} supply what a history without a spec.json lacks; this run's spec.json "
                          f"says them (backend {spec.backend}, TTL {spec.ttl_ms} ms, {spec.keys} key(s)): drop "
                          f"{', '.join(given)}")
    if ttl_ms is not None and not 50 <= ttl_ms <= 3_600_000:
        raise BadArgument(f"--ttl must be between 50 ms and 3600000 ms (1 h), not {ttl_ms}")
    if keys is not None and not 1 <= keys <= MAX_KEYS:
        raise BadArgument(f"--keys must be between 1 and {MAX_KEYS}, not {keys}")
    if backend is not None and backend not in plugins.backend_names():  # never loads a client
        raise BadArgument(f"unknown backend {backend!r}; choose one of: {', '.join(plugins.backend_names())}")
    return TestSpec.bare(backend=backend, ttl_ms=ttl_ms, keys=keys)
