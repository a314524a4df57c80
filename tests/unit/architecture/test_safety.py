"""Issue 13: hostile names never reach a delete, option values parse with their type, a run
that proved nothing is never VALID, and state dirs are per user. No servers needed."""

import json
import os
import shutil
from pathlib import Path

import pytest

from harness.core.errors import BadArgument
from tests.conftest import chaos
from tests.paths import TESTS

GOLDEN = TESTS / "golden"

HOSTILE_IDS = ["..", "/", "../x", "../../../tmp/x", ".", "a b c", "x" * 300, "ABCDEF", "abcde", "abcdefa",
               "", "abc/ef", "abcde\n", "*", "-rf"]


@pytest.fixture
def sentinels(tmp_path):
    """Directories a hostile id could reach from the state root: they must all survive."""
    from harness.cluster.provider import state_root

    made = [Path("/tmp/x"), state_root().parent / "chaoslock-sentinel", tmp_path / "keep"]
    fresh = [d for d in made if not d.exists()]
    for d in made:
        d.mkdir(parents=True, exist_ok=True)
        (d / "file").write_text("must survive")
    yield made
    for d in made:
        assert (d / "file").read_text() == "must survive", f"{d} was touched"
    for d in fresh:
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("run_id", HOSTILE_IDS)
def test_a_hostile_run_id_is_refused_before_anything_is_removed(run_id, sentinels):
    from harness.cluster.reaper import kill_run

    with pytest.raises(BadArgument, match="is not a run id"):
        kill_run(run_id)


@pytest.mark.parametrize("run_id", ["..", "/", "../x", "a b", "x" * 300])
def test_cluster_down_with_a_hostile_id_is_one_sentence(run_id, sentinels):
    r = chaos("cluster", "down", run_id)
    assert r.returncode == 254 and "is not a run id" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_down_removes_only_state_dirs_it_wrote(tmp_path):
    """A dir under the state root that is not named by a run id, or holds no state.json
    (the first thing a run writes), or is a symlink, is not ours: it is left alone."""
    from harness.cluster.provider import make_state_root
    from harness.cluster.reaper import _ours, kill_run

    root = make_state_root()
    alien = [root / "notarun", root / "fedcba"]
    for d in alien:
        d.mkdir(exist_ok=True)
        (d / "data").write_text("x")
    link = root / "abcabc"
    link.symlink_to(tmp_path)
    (tmp_path / "state.json").write_text("{}")
    try:
        assert not any(_ours(d) for d in alien + [link])
        kill_run("fedcba")
        kill_run("abcabc")
        assert all((d / "data").exists() for d in alien) and (tmp_path / "state.json").exists()
    finally:
        link.unlink()
        for d in alien:
            shutil.rmtree(d)
        _drop_if_empty(root)


def _drop_if_empty(d: Path) -> None:
    try:
        d.rmdir()
    except OSError:
        pass


@pytest.mark.parametrize("raw, want", [("no", False), ("No", False), ("off", False), ("0", False), ("false", False),
                                       ("yes", True), ("TRUE", True), ("on", True), ("1", True), (True, True),
                                       (False, False)])
def test_flags_parse_their_usual_spellings(raw, want):
    from harness.core.options import CLUSTER_OPTIONS
    from harness.cluster.kinds import server_kind
    from harness.core.spec import TestSpec

    spec = TestSpec(backend="redis", options={"appendonly": raw}).validate()
    assert spec.options["appendonly"] is want
    assert server_kind("valkey", spec.options).appendonly is want
    assert CLUSTER_OPTIONS[0].parse(raw) is want


@pytest.mark.parametrize("options, words", [
    ({"appendonly": "maybe"}, "appendonly is a flag"),
    ({"appendonly": ""}, "appendonly is a flag"),
    ({"pause_multiple": "abc"}, "pause_multiple takes a number"),
    ({"pause_multiple": "nan"}, "must be a finite number"),
    ({"pause_multiple": "-1"}, "must be above 0"),
    ({"pause_multiplee": "3"}, "did you mean pause_multiple"),
    ({"session_timeout_ms": "-1"}, "session_timeout_ms must be at least"),
    ({"cut_servers": "2.5"}, "takes an integer"),
    ({"partition_shape": "triangle"}, "choose one of"),
])
def test_bad_option_values_are_refused_by_name(options, words):
    from harness.core.spec import TestSpec

    with pytest.raises(BadArgument, match=words):
        TestSpec(backend="zookeeper", nemesis=("pause-holder", "partition"), options=options).validate()


def test_an_option_of_another_component_is_kept_with_a_note():
    from harness.core.spec import TestSpec

    spec = TestSpec(backend="redis", options={"session_timeout_ms": "2000"}).validate()
    assert spec.options["session_timeout_ms"] == 2000.0
    assert "no effect here" in spec.notes()[0]


def _stored_run(tmp_path, outcome: dict | None, history: Path) -> Path:
    d = tmp_path / "run"
    d.mkdir()
    shutil.copy(history, d / "history.jsonl")
    (d / "spec.json").write_text(json.dumps({"backend": "redis"}))
    if outcome is not None:
        (d / "outcome.json").write_text(json.dumps(outcome))
    return d


def test_a_run_that_crashed_is_unknown_even_with_a_clean_history(tmp_path):
    d = _stored_run(tmp_path, {"aborted": "the run crashed: ValueError: x", "started": True},
                    GOLDEN / "lock" / "sequential-ok.jsonl")
    r = chaos("check", str(d), "--json")
    assert r.returncode == 2, r.stderr
    s = json.loads(r.stdout)
    assert s["valid"] == "unknown" and "did not finish" in s["unknown_reason"]


def test_a_run_without_a_critical_section_is_unknown(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    d = _stored_run(tmp_path, None, empty)
    r = chaos("check", str(d), "--json")
    assert r.returncode == 2, r.stderr
    assert "no critical section" in json.loads(r.stdout)["unknown_reason"]
    r = chaos("report", str(d))
    assert r.returncode == 0 and "unknown" in r.stdout
    assert json.loads((d / "results.json").read_text())["summary"]["valid"] == "unknown"


def test_a_proven_violation_stands_in_a_crashed_run(tmp_path):
    d = _stored_run(tmp_path, {"aborted": "the run crashed: X", "started": True}, GOLDEN / "lock" / "overlap-bad.jsonl")
    assert chaos("check", str(d)).returncode == 1


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become another user")
def test_a_root_run_does_not_lock_other_users_out():
    """Root's state root exists; a non-root user still gets a private one of its own."""
    from harness.cluster.provider import make_state_root, state_root

    root_dir = make_state_root()
    pid = os.fork()
    if pid == 0:  # the child becomes nobody, with everything it needs already imported
        code = 1
        try:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            mine = make_state_root()
            probe = mine / "abcdef"
            probe.mkdir()
            probe.rmdir()
            code = 0 if mine != root_dir and (mine.stat().st_mode & 0o777) == 0o700 else 3
        except BaseException:
            code = 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    other = state_root().parent / "chaoslock-65534"
    shutil.rmtree(other, ignore_errors=True)
    _drop_if_empty(root_dir)
