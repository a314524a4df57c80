"""A run dir's files must resolve inside it (issue 25): `chaos report`, `chaos check` and the
store index never read through a link out of the run dir, and never write through one.

Run dirs are made from golden histories, so no server is needed.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from harness.core.errors import BadArgument
from harness.core.spec import TestSpec
from results import store
from results.index import write_index
from results.report import write_report
from tests.conftest import chaos
from tests.paths import TESTS

GOLDEN = TESTS / "golden"
HISTORY = GOLDEN / "lock" / "sequential-ok.jsonl"
SECRET = "SECRET-7f3a-not-for-the-report"


@pytest.fixture
def run(tmp_path):
    """store/t/<stamp> holding a golden history, with store/latest -> it; and a dir outside
    the store with a victim file and a secret."""
    root = tmp_path / "store"
    d = root / "t" / "20260101T000000"
    (d / "nodes").mkdir(parents=True)
    shutil.copy(HISTORY, d / "history.jsonl")
    store.link_latest(root, d)
    out = tmp_path / "outside"
    out.mkdir()
    (out / "victim").write_text("precious")
    (out / "secret.log").write_text(f"{SECRET}\n")
    return d, out


def test_report_replaces_links_out_instead_of_writing_through_them(run):
    d, out = run
    store.write_spec(d, TestSpec(backend="redis"))  # a run dir's spec (without one, its TTL is unknown)
    names = ("ops.csv", "results.json", "report.html", "results.json.tmp", "report.html.tmp")
    for n in names:
        (d / n).symlink_to(out / "victim")
    (d.parent.parent / "index.html").symlink_to(out / "victim")
    os.mkfifo(d / "nodes" / "n4.log")  # a tail would block on it forever
    r = chaos("report", str(d), timeout=60)
    assert r.returncode == 0, r.stderr
    assert (out / "victim").read_text() == "precious"
    for n in ("ops.csv", "results.json", "report.html"):
        assert (d / n).is_file() and not (d / n).is_symlink(), n
    assert json.loads((d / "results.json").read_text())["summary"]["valid"] is True
    index = d.parent.parent / "index.html"
    assert index.is_file() and not index.is_symlink() and "t/20260101T000000/report.html" in index.read_text()
    assert "n4.log is not shown" in (d / "report.html").read_text()


def test_a_node_log_that_leads_out_is_skipped_not_tailed(run):
    d, out = run
    (d / "nodes" / "n1.log").symlink_to(out / "secret.log")
    (d / "nodes" / "n2.log").write_text("n2 ready\n")
    (d / "nodes").joinpath("n3.log").symlink_to("n2.log")  # a link inside the run dir is fine
    (d / "ops.csv").symlink_to(out / "victim")  # not listed among the run's files
    page = write_report(d, TestSpec(), [], {"summary": {"valid": True}, "checkers": {}}).read_text()
    assert SECRET not in page
    assert "n2 ready" in page and page.count("n2 ready") == 2
    assert "n1.log is not shown" in page
    assert 'href="nodes/n1.log"' not in page and "href='ops.csv'" not in page


@pytest.mark.parametrize("name", ["history.jsonl", "spec.json", "outcome.json"])
def test_chaos_report_refuses_a_run_file_that_leads_out(run, name):
    d, out = run
    target = out / name
    if name == "history.jsonl":
        shutil.move(d / name, target)
    else:
        target.write_text('{"interrupted": false}' if name == "outcome.json" else "{}")
    (d / name).symlink_to(target)
    r = chaos("report", str(d), timeout=60)
    assert r.returncode == 254, (r.returncode, r.stderr)
    assert name in r.stderr and "outside" in r.stderr and "Traceback" not in r.stderr
    assert not (d / "results.json").exists()  # nothing written


def test_chaos_check_takes_the_named_history_but_not_a_spec_beside_it_that_leads_out(run):
    d, out = run
    (out / "spec.json").write_text("{}")
    named = d.parent / "elsewhere"
    named.mkdir()
    (named / "h.jsonl").symlink_to(HISTORY)  # the file the user names is their choice
    assert chaos("check", str(named / "h.jsonl"), "--ttl", "2000").returncode == 0  # bare: its TTL given
    (named / "spec.json").symlink_to(out / "spec.json")
    r = chaos("check", str(named / "h.jsonl"))
    assert r.returncode == 254 and "spec.json" in r.stderr and "outside" in r.stderr, r.stderr


def test_report_and_check_follow_nothing_a_spec_names_out_of_the_run_dir(tmp_path):
    """A copied run dir whose spec.json names, as its store, the directory it was copied into
    (and an external client that would leave a marker): `chaos report` writes its own files
    only, never that directory's index.html; neither command runs anything."""
    downloads = tmp_path / "downloads"
    d = downloads / "runs" / "20260101T000000"
    d.mkdir(parents=True)
    (downloads / "index.html").write_text("someone else's page")
    shutil.copy(HISTORY, d / "history.jsonl")
    marker = tmp_path / "marker"
    store.write_spec(d, TestSpec(backend="external", store=str(downloads),
                                 options={"command": f"sh -c 'touch {marker}'", "servers": "valkey:1"}))
    assert chaos("check", str(d), timeout=60).returncode == 0
    r = chaos("report", str(d), timeout=60)
    assert r.returncode == 0, r.stderr
    assert (downloads / "index.html").read_text() == "someone else's page" and not marker.exists()
    assert sorted(p.name for p in downloads.iterdir()) == ["index.html", "runs"]
    assert (d / "report.html").is_file()


def test_read_results_refuses_a_results_json_that_leads_out(run):
    d, out = run
    (out / "results.json").write_text('{"summary": {"valid": true}}')
    (d / "results.json").symlink_to(out / "results.json")
    with pytest.raises(BadArgument, match="results.json.*outside"):
        store.read_results(d)


def _results(d: Path, summary: dict) -> None:
    d.mkdir(parents=True, exist_ok=True)
    store.write_json(d / "results.json", {"summary": {"backend": "redlock", "nemesis": ["none"], "seed": 1} | summary})


def test_the_index_marks_interrupted_runs_and_counts_by_verdict(tmp_path):
    root = tmp_path / "store"
    _results(root / "a" / "20260101T000001", {"valid": "unknown", "interrupted": True})
    _results(root / "a" / "20260101T000002", {"valid": False, "interrupted": True, "violations": 1})
    _results(root / "a" / "20260101T000003", {"valid": True})
    page = write_index(root).read_text()
    assert "UNKNOWN · INTERRUPTED" in page and "INVALID · INTERRUPTED" in page
    assert page.count("INTERRUPTED") == 2
    assert "1 valid · 1 invalid · 1 unknown" in page


def test_the_index_does_not_read_a_results_json_that_leads_out(tmp_path):
    root = tmp_path / "store"
    out = tmp_path / "outside"
    _results(out, {"valid": True, "backend": SECRET})
    (root / "a" / "20260101T000001").mkdir(parents=True)
    (root / "a" / "20260101T000001" / "results.json").symlink_to(out / "results.json")
    page = write_index(root).read_text()
    assert SECRET not in page and "unreadable" in page


def _writers():
    from harness.commands.compare import page
    from harness.commands.matrix import html as matrix_html, rows as matrix_rows
    from results.csv import write_ops_csv

    meta = {"plan": "quick", "when": "now", "machine": "this one", "took_s": 1.0}
    return {
        "compare.csv": lambda d: page.write_csv(d / "compare.csv", []),
        "compare.md": lambda d: page.write_md(d / "compare.md", [], [], meta),
        "compare.html": lambda d: page.write_html(d / "compare.html", [], [], meta),
        "matrix.csv": lambda d: matrix_rows.write_csv(d / "matrix.csv", []),
        "matrix.html": lambda d: matrix_html.write_html(d / "matrix.html", [], [], title="m"),
        "spec.json": lambda d: store.write_spec(d, TestSpec()),
        "ops.csv": lambda d: write_ops_csv([], d / "ops.csv"),
        "index.html": lambda d: write_index(d),
    }


@pytest.mark.parametrize("name", list(_writers()))
def test_every_writer_replaces_a_link_instead_of_writing_through_it(tmp_path, name):
    d, victim = tmp_path / "out", tmp_path / "victim"
    d.mkdir()
    victim.write_text("precious")
    # the name and the fixed temp names writers used (a temp file written through a link is the same hole)
    for planted in {name, f"{name}.tmp", Path(name).with_suffix(".csv.tmp").name, Path(name).with_suffix(".tmp").name}:
        (d / planted).symlink_to(victim)
    _writers()[name](d)
    assert victim.read_text() == "precious"
    assert (d / name).is_file() and not (d / name).is_symlink()


def test_a_test_dir_that_leads_out_of_the_store_gets_no_run(tmp_path):
    root, out = tmp_path / "store", tmp_path / "outside"
    root.mkdir()
    out.mkdir()
    (root / "redlock-none").symlink_to(out)
    with pytest.raises(BadArgument, match="redlock-none resolves to .*outside"):
        store.new_run_dir(root, "redlock-none")
    assert list(out.iterdir()) == []
    assert store.new_run_dir(root, "etcd-none").parent == root / "etcd-none"
