"""Ctrl-C during a run: faults healed, workers and servers stopped, the history kept and checked."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, eventually

pytestmark = pytest.mark.integration


def test_sigint_mid_run_cleans_up_and_keeps_the_history(tmp_path):
    p = subprocess.Popen([sys.executable, "-m", "harness", "run", "--backend", "redlock", "--nemesis",
                          "clock-skew,partition", "--time-limit", "60", "--seed", "2", "--store", str(tmp_path),
                          "--json"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    eventually(lambda: p.poll() is not None or mid_run(tmp_path), timeout=60, step=0.1)
    assert p.poll() is None, f"the run ended before it was interrupted: {p.communicate()[1][-2000:]}"
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, err[-2000:]
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary.get("interrupted") is True and summary["ops"] > 0
    run_dir = Path(summary["run_dir"])
    history = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    assert any(o["process"] == "final" for o in history), "the final read must still be recorded"
    assert (run_dir / "results.json").exists() and (run_dir / "report.html").exists()
    # Servers are checked by the no_leftovers fixture; workers carry our owner mark too.
    left = descendants_with_owner()
    assert not left, f"a worker or server of the interrupted run survived: {[_cmd(p) for p in left]}"


def written_ops(store: Path) -> list[dict]:
    """The ops the run under `store` has written so far (a torn last line, the one being
    written, is skipped)."""
    ops = []
    for path in store.glob("*/*/history.jsonl"):
        for line in path.read_text().splitlines():
            try:
                ops.append(json.loads(line))
            except ValueError:
                continue
    return ops


def mid_run(store: Path) -> bool:
    """Workers have completed ops and a fault has taken effect."""
    ops = written_ops(store)
    return (any(isinstance(o.get("process"), int) and o.get("type") != "invoke" for o in ops)
            and any(o.get("process") == "nemesis" and o.get("type") == "ok" for o in ops))


def descendants_with_owner() -> list[int]:
    import os

    from tests.conftest import OWNER

    found = []
    ours = set(_children(os.getpid()))  # this test process's own helpers (the resource tracker of its in-process runs)
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and int(d.name) != os.getpid():
            try:
                if f"CHAOSLOCK_OWNER={OWNER}".encode() in (d / "environ").read_bytes() and not (
                        int(d.name) in ours and b"resource_tracker" in (d / "cmdline").read_bytes()):
                    found.append(int(d.name))
            except OSError:
                pass
    return found


def test_sigint_while_the_workers_start_still_tears_down(tmp_path):
    """Ctrl-C lands while the worker processes are opening their clients: their READY
    messages are still in the queue when the runner drains it on the way out."""
    p = subprocess.Popen([sys.executable, "-m", "harness", "run", "--backend", "zookeeper", "--nemesis", "none",
                          "--time-limit", "30", "--seed", "1", "--store", str(tmp_path), "--json"],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    eventually(lambda: p.poll() is not None or spawned_workers(p.pid), timeout=60, step=0.02)
    assert spawned_workers(p.pid), "the workers never appeared"
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=90)
    assert p.returncode == 130, err[-2000:]
    assert "Traceback" not in err and "missing field" not in err, err[-2000:]
    assert json.loads(out.strip().splitlines()[-1]).get("interrupted") is True
    left = descendants_with_owner()
    assert not left, f"a worker or server of the interrupted run survived: {[_cmd(p) for p in left]}"


def _cmd(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:160]
    except OSError:
        return "?"


def _children(parent: int) -> list[int]:
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == parent:
                    found.append(int(d.name))
            except (OSError, ValueError, IndexError):
                pass
    return found


def spawned_workers(parent: int) -> list[int]:
    """The workers of the chaos process `parent`: children of its fork server."""
    servers = []
    for pid in _children(parent):
        try:
            if b"forkserver" in Path(f"/proc/{pid}/cmdline").read_bytes():
                servers.append(pid)
        except OSError:
            pass
    return [w for s in servers for w in _children(s)]


def leftovers() -> dict[str, set[str]]:
    """Everything of chaoslock's that a run could leave on this machine, by where it lives."""
    import os

    from tests.conftest import OWNER

    found = {
        "netns": {l.split()[0] for l in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                                       text=True).stdout.splitlines() if l.startswith("cl-")},
        "links": {l.split(":")[1].strip().split("@")[0] for l in subprocess.run(
            ["ip", "-o", "link", "show"], capture_output=True, text=True).stdout.splitlines()
            if l.split(":")[1].strip().startswith(("clb", "clv"))},
        "rules": {l for l in subprocess.run(["iptables-save"], capture_output=True, text=True).stdout.splitlines()
                  if "chaoslock" in l},
        "locks": {p.name for p in Path("/run/lock").glob("chaoslock-*.lock")},
        "shm": {p.name for p in Path("/dev/shm").iterdir()
                if p.name.startswith(("chaoslock", "faketime_", "sem.faketime_"))},
        "processes": set(map(str, descendants_with_owner())),
    }
    for d in Path("/dev/shm").glob("chaoslock*"):
        found["shm"] |= {f"{d.name}/{sub.name}" for sub in d.iterdir()} if d.is_dir() else set()
    assert OWNER and os.geteuid() == 0
    return found


def holder_paused(store: Path) -> bool:
    """Mid-run, and a holder is SIGSTOPped now: its pause is written and its resume is not."""
    holder = [o for o in written_ops(store) if o.get("process") == "nemesis" and o.get("f") in
              ("pause-holder", "resume-holder")]
    return mid_run(store) and bool(holder) and holder[-1]["f"] == "pause-holder" and holder[-1]["type"] == "ok"


def coming_up(store: Path) -> bool:
    """cluster.up() is under way: it has made the run's state dir (its first step, before the
    namespaces and the servers), and the workers have not opened their logs yet. That takes
    about 0.3 s here for five valkey nodes in namespaces; a press polled every 20 ms lands
    inside it. (A fixed 1 s after the start landed while the workers started: a started run.
    The run dir and its nodes/ come before make_cluster, where a press discards the run dir.)"""
    from harness.cluster.provider import state_root
    from tests.conftest import OWNER

    specs = list(store.glob("*/*/spec.json"))
    if len(specs) != 1 or any(store.glob("*/*/nodes/worker-*.log")) or not state_root().is_dir():
        return False
    for d in state_root().iterdir():
        try:
            if json.loads((d / "state.json").read_text()).get("owner") == OWNER and \
                    d.stat().st_mtime >= specs[0].stat().st_mtime:
                return True
        except (OSError, ValueError):
            continue
    return False


# What each moment waits for before the first press, and what the press must then find.
MOMENTS = {"mid-run": mid_run, "paused": holder_paused, "start-up": coming_up}


@pytest.mark.parametrize("backend, nemesis, moment, presses, gap_s", [
    ("redlock", "clock-skew", "mid-run", 2, 0.3),   # twice
    ("redlock", "clock-skew", "mid-run", 3, 0.15),  # three times within half a second
    ("redis", "pause-holder", "paused", 3, 0.3),    # while a holder is SIGSTOPped
    ("redlock", "clock-skew", "start-up", 3, 0.2),  # while the cluster is still coming up
])
def test_repeated_ctrl_c_leaves_nothing_and_keeps_the_results(tmp_path, backend, nemesis, moment, presses, gap_s):
    """A terminal's Ctrl-C reaches the whole foreground process group, pressed two or three
    times within a second: the teardown still finishes, and the results are still written.
    Each case presses once its moment shows (in the history, or the run's state dir) and
    finds that moment's outcome only: a started run's summary and final read, or an unstarted
    run's "unknown" and empty history."""
    import os

    from tests.conftest import need_root_netns

    if need_root_netns():
        pytest.skip(need_root_netns())
    before = leftovers()
    p = subprocess.Popen([sys.executable, "-m", "harness", "run", "--backend", backend, "--nemesis", nemesis,
                          "--time-limit", "60", "--seed", "4", "--nemesis-interval", "1.5", "--store", str(tmp_path),
                          "--json"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    eventually(lambda: p.poll() is not None or MOMENTS[moment](tmp_path), timeout=60,
               step=0.02 if moment == "start-up" else 0.1)
    assert p.poll() is None, f"the run ended before it was interrupted: {p.communicate()[1][-2000:]}"
    for _ in range(presses):
        os.killpg(p.pid, signal.SIGINT)  # what the terminal does: every process of the group
        time.sleep(gap_s)
    out, err = p.communicate(timeout=90)
    assert p.returncode == 130, err[-2000:]
    assert "Traceback" not in err, err[-2000:]
    after = leftovers()
    assert {k: after[k] - before[k] for k in after if after[k] - before[k]} == {}, err[-2000:]
    run_dirs = [d for d in tmp_path.glob(f"{backend}-*/*") if d.is_dir()]
    assert len(run_dirs) == 1
    outcome = json.loads((run_dirs[0] / "outcome.json").read_text())
    assert outcome["interrupted"] is True
    results = json.loads((run_dirs[0] / "results.json").read_text())
    assert results["summary"]["interrupted"] is True
    history = [json.loads(line) for line in (run_dirs[0] / "history.jsonl").read_text().splitlines()]
    if moment == "start-up":
        assert outcome["started"] is False, "the press was to land while the cluster came up"
        assert results["summary"]["valid"] == "unknown" and history == [], history[:3]
    else:
        assert outcome["started"] is True
        assert out.strip(), "a run that started prints its summary"
        assert any(o["process"] == "final" for o in history), "the final read must still be recorded"


def _worker_ops_done(store: Path) -> bool:
    return any(isinstance(o.get("process"), int) and o.get("type") != "invoke" for o in written_ops(store))


@pytest.mark.parametrize("sig, code, words", [(signal.SIGINT, 130, "Ctrl-C"), (signal.SIGTERM, 143, "SIGTERM")])
def test_an_interrupted_run_exits_with_the_signal_and_says_so_last(tmp_path, sig, code, words):
    """Never "exit code: 0" (or 1) for a run that covered only part of its time: the last line
    names the signal and the process exits with 128 + it."""
    p = subprocess.Popen([sys.executable, "-m", "harness", "run", "--backend", "redis", "--time-limit", "20",
                          "--concurrency", "2", "--seed", "3", "--store", str(tmp_path)], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    eventually(lambda: p.poll() is not None or _worker_ops_done(tmp_path), timeout=60, step=0.1)
    assert p.poll() is None, f"the run ended before it was interrupted: {p.communicate()[1][-2000:]}"
    p.send_signal(sig)
    out, err = p.communicate(timeout=60)
    assert p.returncode == code, err[-2000:]
    lines = out.strip().splitlines()
    assert lines[-1] == f"  exit code: {code} (interrupted by {words})", out[-2000:]
    assert "INTERRUPTED" in next(line for line in lines if line.startswith(("VALID", "INVALID", "UNKNOWN")))
    run_dir = next(d for d in tmp_path.glob("redis-*/*") if d.is_dir())
    summary = json.loads((run_dir / "results.json").read_text())["summary"]
    assert summary["interrupted"] is True and summary["interrupted_by"] == ("SIGINT" if code == 130 else "SIGTERM")
    assert "Traceback" not in err


def test_a_run_that_fails_to_start_leaves_no_run_dir_and_no_latest(tmp_path):
    """A server port already in use: the run dir was made before the cluster came up; it goes
    again, `latest` never moves, and the one sentence says what to do."""
    import socket

    store = tmp_path / "store"
    store.mkdir()
    (store / "keep.txt").write_text("a file of the user's")
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = busy.getsockname()[1]
    try:
        r = subprocess.run([sys.executable, "-m", "harness", "run", "--backend", "redis", "--time-limit", "5",
                            "--concurrency", "2", "--base-port", str(port), "--store", str(store)], cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
    finally:
        busy.close()
    assert r.returncode == 254, r.stdout + r.stderr
    assert f"port {port}" in r.stderr and "in use" in r.stderr and "Traceback" not in r.stderr
    assert sorted(p.name for p in store.iterdir()) == ["keep.txt"], list(store.rglob("*"))
    assert not (store / "latest").exists() and not (store / "latest").is_symlink()


def _ok_writes(store: Path) -> int:
    return sum(1 for o in written_ops(store) if o.get("f") == "write" and o.get("type") == "ok")


@pytest.mark.parametrize("backend, sig, code", [("etcd", signal.SIGTERM, 143), ("zookeeper", signal.SIGHUP, 129)])
def test_a_signal_to_the_whole_process_group_loses_no_op(tmp_path, backend, sig, code):
    """What a CI runner, systemd or `docker stop` does (SIGTERM to the whole group), and a closed
    terminal (SIGHUP): the fork server and the workers survive it, the runner stops them, and
    every write they did is in the history. (It used to kill the fork server, and with it every
    worker and the ops it had not handed in: INVALID, UNEXPLAINED, on a safe lock.)"""
    import os

    before = leftovers()
    p = subprocess.Popen([sys.executable, "-m", "harness", "run", "--backend", backend, "--time-limit", "30",
                          "--seed", "1", "--store", str(tmp_path), "--json"], cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    eventually(lambda: p.poll() is not None or _ok_writes(tmp_path) >= 6, timeout=90, step=0.1)
    assert p.poll() is None, f"the run ended before it was interrupted: {p.communicate()[1][-2000:]}"
    os.killpg(p.pid, sig)
    out, err = p.communicate(timeout=90)
    assert p.returncode == code, err[-2000:]
    assert "Traceback" not in err, err[-2000:]
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["interrupted_by"] == signal.Signals(sig).name
    # every write the clients did is in the history: the counter counts exactly the ok ones
    assert summary["final_counter"] == summary["writes_ok"] and summary["writes_info"] == 0, summary
    assert summary["valid"] is True and summary["violations"] == 0, summary
    assert not [e for e in summary.get("errors", []) if "killed" in e or "never reached" in e], summary["errors"]
    after = leftovers()
    assert {k: after[k] - before[k] for k in after if after[k] - before[k]} == {}, err[-2000:]


def _wait_for_the_commands_handlers(pid: int) -> None:
    """Until process pid catches SIGHUP (harness/entry.py's first act; the interpreter alone
    catches only SIGINT): the moment a press is the command's to answer, whatever the load."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        caught = next((int(line.split()[1], 16) for line in open(f"/proc/{pid}/status") if line.startswith("SigCgt:")), 0)
        if caught & (1 << (signal.SIGHUP - 1)):
            return
        time.sleep(0.002)
    raise AssertionError("the command never set its handlers")


@pytest.mark.parametrize("delay_s", [0.0, 0.05, 0.3, 0.6, 0.9, 1.3, 2.0])
def test_a_press_at_any_moment_of_start_up_ends_the_run(tmp_path, delay_s):
    """The moment of the press swept across start-up, counted from when the command's own
    handlers are in place (a press before, while the interpreter itself starts, is Python's to
    answer): the harness still importing, the run dir made, namespaces and servers coming up, workers starting, the first ops. Each time the
    command ends at once with 130 and its last line says so, never runs on to a verdict of 0
    (a press inside a start-up step's shield used to be swallowed: VALID, exit 0), never
    prints a traceback (a press before the fork server ignored it killed it), leaves nothing."""
    before = leftovers()
    started = time.monotonic()
    p = subprocess.Popen([sys.executable, "-m", "harness", "run", "--backend", "redlock", "--time-limit", "30",
                          "--seed", "3", "--store", str(tmp_path)], cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    _wait_for_the_commands_handlers(p.pid)
    time.sleep(delay_s)
    import os

    os.killpg(p.pid, signal.SIGINT)
    out, err = p.communicate(timeout=90)
    assert p.returncode == 130, out[-1000:] + err[-2000:]
    assert time.monotonic() - started < 25, "the run went on after the press"
    assert "Traceback" not in err, err[-2000:]
    # the verdict's last line, or (no verdict yet) the command's last line on stderr
    lasts = [(text.strip().splitlines() or [""])[-1] for text in (out, err)]
    assert any(last.endswith("exit code: 130 (interrupted by Ctrl-C)") for last in lasts), out[-1000:] + err[-1000:]
    for results in tmp_path.glob("redlock-*/*/results.json"):
        assert json.loads(results.read_text())["summary"]["interrupted"] is True
    after = leftovers()
    assert {k: after[k] - before[k] for k in after if after[k] - before[k]} == {}, err[-2000:]
