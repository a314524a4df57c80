"""A refusal that only the running cluster or the client process can make (an external client
whose init refuses the lock kind, or that cannot start) comes after the servers are up; it is
still one sentence, exit 254, and the run leaves no run dir and does not move `store/latest`
(harness/engine/runner.py). Refusals the spec alone decides never start a server: the
bad-input table (tests/bad_inputs.py) holds those."""

from __future__ import annotations

import sys

import pytest

from tests.conftest import chaos

pytestmark = pytest.mark.integration

# A protocol client that has only the mutex, and says so at init as docs/client-protocol.md asks.
MUTEX_ONLY = '''
import json, sys
for line in sys.stdin:
    req = json.loads(line)
    rep = {"type": "unsupported", "error": "only a mutex here"} if req.get("lock", "mutex") != "mutex" else {"type": "ok"}
    print(json.dumps({"id": req["id"], **rep}), flush=True)
'''


@pytest.mark.parametrize("case", ["init-refuses-the-kind", "exits-at-init"])
def test_a_client_refusal_after_start_leaves_no_run_dir_and_keeps_latest(tmp_path, case):
    store = tmp_path / "store"
    test_dir = store / "external-none-rw"
    earlier = test_dir / "20200101T000000"  # an earlier run of the same test, which store/latest names
    earlier.mkdir(parents=True)
    (store / "latest").symlink_to("external-none-rw/20200101T000000")
    script = tmp_path / "mutex_only.py"
    script.write_text(MUTEX_ONLY)
    # (a command that does not exist is refused before anything starts: the bad-input table has it)
    command = f"{sys.executable} {script}" if case == "init-refuses-the-kind" else f"{sys.executable} -c 'exit(3)'"
    r = chaos("run", "--client", command, "--servers", "valkey:1", "--lock", "rw", "--time-limit", "3",
              "--concurrency", "2", "--store", str(store), timeout=180)
    err = r.stderr.strip().splitlines()
    assert r.returncode == 254 and len(err) == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert ("answered unsupported to init with lock rw (only a mutex here)" if case == "init-refuses-the-kind"
            else "did not start") in err[0], err
    assert sorted(p.name for p in test_dir.iterdir()) == ["20200101T000000"]  # no run dir of this run
    assert sorted(p.name for p in store.iterdir()) == ["external-none-rw", "latest"]  # nor an index of it
    assert str((store / "latest").readlink()) == "external-none-rw/20200101T000000"  # latest did not move
