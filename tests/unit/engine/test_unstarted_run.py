"""A run whose cluster never came up leaves no run dir (harness/engine/runner.py _discard_unstarted),
and nothing its error pointed at is lost: the server logs' last lines move into the message."""

from __future__ import annotations

from types import SimpleNamespace

from harness.core.errors import ClusterError
from harness.engine.runner import _discard_unstarted


def run_dir(tmp_path, logs: dict[str, str]):
    d = tmp_path / "store" / "redlock-none" / "20261203T101500"
    (d / "nodes").mkdir(parents=True)
    (d / "spec.json").write_text("{}")
    (d / "history.jsonl").write_text("")
    for name, text in logs.items():
        (d / "nodes" / f"{name}.log").write_text(text)
    return d


def cluster(**kinds):
    return SimpleNamespace(nodes=[SimpleNamespace(name=n, kind=k) for n, k in kinds.items()])


def test_a_not_ready_error_carries_the_logs_it_pointed_at(tmp_path):
    d = run_dir(tmp_path, {"n1": "starting\nbind: cannot assign\nfatal: no quorum\n", "store": "ready\n"})
    err = ClusterError(f"etcd did not become ready within 40s; see the logs in {d / 'nodes'}")
    _discard_unstarted(d, True, cluster(n1="etcd", store="valkey"), err)
    assert not d.exists() and not d.parent.exists() and (tmp_path / "store").is_dir()
    text = str(err)
    assert "the run never started, so" in text and "was removed" in text
    assert "n1.log ends: starting | bind: cannot assign | fatal: no quorum" in text
    assert "store.log" not in text  # only the kind that did not become ready


def test_a_died_server_message_already_has_its_tail(tmp_path):
    d = run_dir(tmp_path, {"n1": "boom\n"})
    err = ClusterError(f"n1 (valkey) exited with code 1 during start; its log {d / 'nodes' / 'n1.log'} ends: boom")
    _discard_unstarted(d, False, None, err)
    assert str(err).count("boom") == 1 and "was removed" in str(err)
    assert not d.exists() and d.parent.is_dir()  # the test dir was there before this run


def test_a_message_that_does_not_point_into_the_run_dir_is_kept_as_is(tmp_path):
    d = run_dir(tmp_path, {})
    err = ClusterError("port 7000 (for n1) is in use; free it or pass another --base-port")
    _discard_unstarted(d, True, None, err)
    assert str(err) == "port 7000 (for n1) is in use; free it or pass another --base-port" and not d.exists()


def test_only_what_the_run_wrote_is_removed(tmp_path):
    d = run_dir(tmp_path, {"n1": "x\n"})
    (d / "mine.txt").write_text("not the run's")
    _discard_unstarted(d, True, None, ClusterError("no"))
    assert sorted(p.name for p in d.iterdir()) == ["mine.txt"]
