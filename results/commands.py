"""`chaos report RUN_DIR` and `chaos serve`: rebuild a report, browse the store."""

from __future__ import annotations

import click


@click.command()
@click.argument("run_dir", type=click.Path())
def report(run_dir):
    """Rebuild results.json, ops.csv and report.html of a stored run from its history."""
    from pathlib import Path

    from harness.analysis import analyse
    from harness.errors import BadArgument
    from harness.spec import TestSpec
    import json

    d = Path(run_dir)
    if not (d / "history.jsonl").exists():
        raise BadArgument(f"{run_dir} holds no history.jsonl; give a run directory such as store/latest")
    spec = TestSpec.from_dict(json.loads((d / "spec.json").read_text())) if (d / "spec.json").exists() else TestSpec()
    doc = analyse(spec, d)
    print(f"rebuilt {d / 'results.json'} and {d / 'ops.csv'}; verdict {doc['summary']['valid']}")
    return 0


@click.command()
@click.option("--store", default="store", show_default=True)
@click.option("--port", type=int, default=8088, show_default=True)
def serve(store, port):
    """Serve the run store on 127.0.0.1 for browsing."""
    import functools
    import http.server

    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=store)
    with http.server.ThreadingHTTPServer(("127.0.0.1", port), handler) as httpd:
        print(f"serving {store} on http://127.0.0.1:{port}/ (Ctrl-C stops)")
        httpd.serve_forever()
