"""Reproduce rates in expectations.toml (min_invalid_rate, max_invalid_rate): a cell with a rate
is judged on the share of its runs that were invalid; bad values are refused with file and line."""

from __future__ import annotations

import csv
import json

import pytest

from harness.commands.matrix.expectations import Expectations, Rate
from harness.commands.matrix.html import write_html
from harness.commands.matrix.judge import judge_rate, rejudge
from harness.commands.matrix.rows import write_csv
from harness.core.errors import BadArgument
from tests.conftest import chaos
from tests.unit.commands.test_matrix_recheck import matrix_dir


def load(tmp_path, text: str) -> Expectations:
    f = tmp_path / "e.toml"
    f.write_text(text)
    return Expectations.load(f)


def rows(valids: list[str], nemesis: str = "pause-holder", fencing: str = "off") -> list[dict]:
    return [{"backend": "redis", "nemesis": nemesis, "fencing": fencing, "seed": s, "valid": v, "run_dir": ""}
            for s, v in enumerate(valids, 1)]


# --- expectations.toml ---------------------------------------------------------------------
def test_a_rate_is_looked_up_like_a_verdict_and_a_fencing_verdict_beside_it_wins(tmp_path):
    exp = load(tmp_path, '[default]\nexpect = "safe"\n[redis]\nexpect = "unsafe"\n'
                         'pause-holder.min_invalid_rate = 0.3\npause-holder.fenced = "safe"\n'
                         '[redlock]\nmax_invalid_rate = 0.5\n')
    assert exp.rate("redis", "pause-holder", False) == Rate(min=0.3, max=1.0)
    assert exp.expect("redis", "pause-holder", False) == "invalid 0.3-1"
    assert exp.rate("redis", "pause-holder", True) is None and exp.expect("redis", "pause-holder", True) == "safe"
    assert exp.rate("redis", "kill", False) is None and exp.expect("redis", "kill", False) == "unsafe"
    assert exp.rate("redlock", "kill", False) == Rate(min=0.0, max=0.5)
    assert exp.expect("etcd", "kill", False) == "safe"


@pytest.mark.parametrize("text, where, words", [
    ("[redis.pause-holder]\nmin_invalid_rate = 1.5\n", r"e.toml:2 \[redis.pause-holder\] min_invalid_rate",
     "a number from 0 to 1 such as 0.3, not 1.5"),
    ("[redis]\nmax_invalid_rate = \"half\"\n", r"e.toml:2 \[redis\] max_invalid_rate", "not 'half'"),
    ("[redis]\nmax_invalid_rate = true\n", r"e.toml:2 \[redis\] max_invalid_rate", "not True"),
    ("[redis]\nexpect = \"safe\"\npause-holder.min_invalid_rate = -0.1\n", r"e.toml:3 \[redis.pause-holder\] min_invalid_rate",
     "not -0.1"),
    ("[default]\nmin_invalid_rate = 0.1\n", r"e.toml:2 \[default\] min_invalid_rate", "not in \\[default\\]"),
    ("[redis.kill]\nmin_invalid_rate = 0.6\nmax_invalid_rate = 0.5\n", r"e.toml:2 \[redis.kill\] min_invalid_rate",
     "is above max_invalid_rate 0.5"),
    ("[redis.kill]\nnofence = \"safe\"\nfenced = \"safe\"\nmin_invalid_rate = 0.5\n",
     r"e.toml:4 \[redis.kill\] min_invalid_rate", "the rate judges no cell"),
    ("[redis]\nmin_invalid = 0.5\n", r"e.toml:2 \[redis\] min_invalid", "use expect, .*min_invalid_rate, max_invalid_rate"),
])
def test_a_bad_rate_is_refused_with_its_file_and_line(tmp_path, text, where, words):
    with pytest.raises(BadArgument, match=where + ".*" + words) as e:
        load(tmp_path, text)
    assert "\n" not in str(e.value)


def test_the_cli_refuses_a_bad_rate_in_one_sentence(tmp_path):
    exp = tmp_path / "e.toml"
    exp.write_text("[redis.pause-holder]\nmax_invalid_rate = 2\n")
    r = chaos("matrix", "--recheck", matrix_dir(tmp_path, {"none": ["true"]}), "--expectations", str(exp),
              "--store", str(tmp_path / "store"))
    assert r.returncode == 254 and "Traceback" not in r.stderr
    assert "e.toml:2 [redis.pause-holder] max_invalid_rate" in r.stderr + r.stdout


# --- judging --------------------------------------------------------------------------------
@pytest.mark.parametrize("valids, rate, matched, share", [
    (["false", "true", "true"], Rate(min=0.3), True, "1 of 3"),          # a rare bug, 1 in 3: no flap
    (["true", "true", "true"], Rate(min=0.3), False, "0 of 3"),          # it stopped showing
    (["false", "false", "false"], Rate(min=0.3), True, "3 of 3"),
    (["false", "false", "true"], Rate(max=0.5), False, "2 of 3"),
    (["false", "true", "true", "true"], Rate(max=0.25), True, "1 of 4"),  # the bound itself holds
    (["false", "unknown", "true"], Rate(min=0.3, max=0.5), False, "1 of 3 (+1 unknown)"),  # 2 of 3 if it was
    (["false", "unknown", "true"], Rate(min=0.3), True, "1 of 3 (+1 unknown)"),  # 1 or 2 of 3: both within
    (["unknown", "true", "true"], Rate(min=0.3), False, "0 of 3 (+1 unknown)"),  # 0 of 3 if it was valid
    (["false", "crash", "true"], Rate(), False, "1 of 3"),
    (["unsupported"], Rate(), False, "0 of 1"),
    (["false", "maybe"], Rate(), False, "1 of 2 (+1 unknown)"),  # a row nobody can read proves nothing
])
def test_a_rate_cell_is_judged_on_its_share_of_invalid_runs(valids, rate, matched, share):
    observed, ok, got = judge_rate(valids, rate)
    assert (ok, got) == (matched, share), observed


def test_rejudge_gives_every_run_of_a_rate_cell_the_cells_outcome(tmp_path):
    exp = load(tmp_path, '[default]\nstuck = 0\n[redis.pause-holder]\nmin_invalid_rate = 0.3\nfenced = "safe"\n')
    nofence, fenced = rows(["true", "false", "true"]), rows(["true", "true"], fencing="on")
    cells = {c["fencing"]: c for c in rejudge(nofence + fenced, exp)}
    assert (cells[False]["observed"], cells[False]["matched"], cells[False]["invalid_rate"]) == ("unsafe", True, "1 of 3")
    assert [r["matched"] for r in nofence] == [True] * 3 and nofence[0]["cell_invalid_rate"] == "1 of 3"
    assert (cells[True]["expected"], cells[True]["matched"]) == ("safe", True) and "invalid_rate" not in cells[True]
    stuck = rows(["false", "true", "true"])
    stuck[1]["stuck"] = "1"  # a limit still fails a cell whose rate holds
    (cell,) = rejudge(stuck, exp)
    assert cell["matched"] is False and cell["stuck_over"] and [r["matched"] for r in stuck] == [False] * 3


# --- what the matrix shows ------------------------------------------------------------------
def test_recheck_shows_the_rate_in_its_table_json_and_junit(tmp_path):
    exp = tmp_path / "e.toml"
    exp.write_text("[redis.pause-holder]\nmin_invalid_rate = 0.3\n[redis.kill]\nmax_invalid_rate = 0\n")
    mdir = matrix_dir(tmp_path, {"pause-holder": ["true", "false", "true"], "kill": ["true", "false"]})
    junit = tmp_path / "j.xml"
    r = chaos("matrix", "--recheck", mdir, "--expectations", str(exp), "--junit", str(junit), "--store", str(tmp_path))
    assert r.returncode == 1, r.stdout + r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith("redis") and "pause-holder" in x)
    assert "invalid 0.3-1" in line and " ok " in line and "(invalid in 1 of 3)" in line
    assert "MISMATCH redis kill fencing off: expected invalid 0-0, observed unsafe, invalid in 1 of 2" in r.stdout
    assert "expected invalid 0-0, observed unsafe, invalid in 1 of 2" in junit.read_text()
    r = chaos("matrix", "--recheck", mdir, "--expectations", str(exp), "--json", "--store", str(tmp_path))
    cells = {c["nemesis"]: c for c in json.loads(r.stdout.strip().splitlines()[-1])["cells"]}
    assert (cells["pause-holder"]["matched"], cells["pause-holder"]["invalid_rate"]) == (True, "1 of 3")
    assert (cells["kill"]["matched"], cells["kill"]["expected"]) == (False, "invalid 0-0")


def test_the_csv_and_html_show_the_rate(tmp_path):
    exp = load(tmp_path, "[redis.pause-holder]\nmin_invalid_rate = 0.5\n")
    rs = rows(["false", "true", "true"])
    cells = rejudge(rs, exp)
    write_csv(tmp_path / "matrix.csv", rs)
    with open(tmp_path / "matrix.csv", newline="") as f:
        got = list(csv.DictReader(f))
    assert {(r["expected"], r["cell_matched"], r["cell_invalid_rate"]) for r in got} == {("invalid 0.5-1", "false", "1 of 3")}
    write_html(tmp_path / "matrix.html", cells, [], title="t")
    page = (tmp_path / "matrix.html").read_text()
    assert "invalid in 1 of 3" in page and "expected invalid 0.5-1: MISMATCH" in page
