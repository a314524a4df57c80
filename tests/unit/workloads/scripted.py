"""A protocol client written on the spot (a few lines of Python), opened as an ExternalClient:
for the unit tests of what the harness does with a client's replies."""

import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from workloads.external import ExternalClient


@contextmanager
def scripted_client(directory: Path, source: str, name: str = "client.py") -> Iterator[ExternalClient]:
    """An ExternalClient running `source` (saved as `directory/name`), open for the block."""
    script = directory / name
    script.write_text(source)
    c = ExternalClient({"command": f"{sys.executable} {script}", "servers": "valkey:1"})
    c.open([])
    try:
        yield c
    finally:
        c.close()
