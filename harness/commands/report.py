"""`chaos report RUN_DIR` and `chaos serve`: rebuild a report, browse the store."""

from __future__ import annotations

import click


REBUILT = ("results.json", "ops.csv", "report.html")  # what `chaos report` replaces in a run dir


@click.command()
@click.argument("run_dir", type=click.Path())
def report(run_dir):
    """Rebuild results.json, ops.csv and report.html of a stored run from its history."""
    from pathlib import Path

    from harness.core.pathcheck import DIR, check_path
    from harness.engine.analysis import analyse
    from results.store import load_run

    # Everything is read and checked before anything is written: a malformed run keeps
    # the results.json and report it has, and one that cannot be written is refused first.
    spec, _ = load_run(run_dir, need_dir=True)
    check_path(run_dir, want=DIR, write=True, replaces=REBUILT,
               hint="copy the run dir somewhere you can write, and report that copy")
    d = Path(run_dir)
    doc = analyse(spec, d)
    print(f"rebuilt {d / 'results.json'} and {d / 'ops.csv'}; verdict {doc['summary']['valid']}")
    return 0


def check_port(port: int) -> int:
    from harness.core.errors import BadArgument

    if not 1 <= port <= 65535:
        raise BadArgument(f"--port must be between 1 and 65535, not {port}; for example --port 8088")
    return port


def check_store(store: str) -> str:
    from harness.core.pathcheck import DIR, check_path

    check_path(store, flag="--store", want=DIR,
               hint="give the directory runs were stored in (chaos run --store), one you can read")
    return store


@click.command()
@click.option("--store", default="store", show_default=True)
@click.option("--port", type=int, default=8088, show_default=True)
def serve(store, port):
    """Serve the run store on 127.0.0.1 for browsing (only files inside it; see harness/commands/serve.py)."""
    import errno

    from harness.core.errors import BadArgument, PortInUse
    from harness.commands.serve import serve_store

    check_port(port)
    check_store(store)
    try:
        httpd = serve_store(store, port)
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise PortInUse(f"port {port} on 127.0.0.1 is in use; stop what holds it or give another --port") from None
        if e.errno == errno.EACCES:
            raise BadArgument(f"port {port} needs root (ports below 1024 are privileged); give --port 1024 or above") from None
        raise BadArgument(f"cannot listen on 127.0.0.1:{port} ({e.strerror}); give another --port") from None
    with httpd:
        print(f"serving {store} on http://127.0.0.1:{port}/ (Ctrl-C stops)", flush=True)
        httpd.serve_forever()
