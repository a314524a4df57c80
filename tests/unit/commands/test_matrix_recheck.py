"""`chaos matrix --recheck` on a hand-written matrix dir (it runs nothing): a `valid` the
matrix never writes is judged unknown, named in one line, and fails the recheck."""

from __future__ import annotations

import csv
import json
import xml.etree.ElementTree as ET

import pytest

from harness.commands.matrix.rows import CSV_FIELDS
from tests.conftest import chaos


def matrix_dir(tmp_path, valids: dict[str, list[str]]) -> str:
    """A matrix dir with one redis cell per nemesis, one row per seed with the given `valid`s."""
    d = tmp_path / "matrix"
    d.mkdir(parents=True)
    with open(d / "matrix.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        w.writeheader()
        for nemesis, vs in valids.items():
            for seed, v in enumerate(vs, 1):
                w.writerow({"backend": "redis", "nemesis": nemesis, "fencing": "off", "seed": seed, "valid": v,
                            "violations": 0, "run_dir": "", "wall_s": 1.0})
    (d / "matrix.json").write_text(json.dumps({"skipped": []}))
    return str(d)


@pytest.fixture
def safe(tmp_path):
    p = tmp_path / "e.toml"
    p.write_text('[redis]\nnofence = "safe"\n')
    return str(p)


def recheck(tmp_path, mdir, exp, *more):
    return chaos("matrix", "--recheck", mdir, "--expectations", exp, "--store", str(tmp_path / "store"), *more)


def test_a_well_formed_matrix_still_passes(tmp_path, safe):
    r = recheck(tmp_path, matrix_dir(tmp_path, {"none": ["true", "true"]}), safe)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "never writes" not in r.stdout


@pytest.mark.parametrize("odd", ["False", "maybe", "", "True", "1", "yes"])
def test_unrecognised_verdicts_are_unknown_named_and_fail_the_recheck(tmp_path, safe, odd):
    mdir = matrix_dir(tmp_path, {"none": ["true", odd], "pause-holder": ["true"]})
    r = recheck(tmp_path, mdir, safe, "--json")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    doc = json.loads(r.stdout.strip().splitlines()[-1])
    cells = {c["nemesis"]: c for c in doc["cells"]}
    assert (cells["none"]["observed"], cells["none"]["matched"]) == ("unknown", False)
    assert (cells["pause-holder"]["observed"], cells["pause-holder"]["matched"]) == ("safe", True)
    assert doc["mismatches"] == ["redis/none/nofence"]
    notes = [line for line in r.stderr.splitlines() if "never writes" in line]
    assert len(notes) == 1 and "redis none fencing off seed 2" in notes[0] and repr(odd) in notes[0], r.stderr


def test_the_junit_of_a_recheck_has_no_pass_for_an_unrecognised_verdict(tmp_path, safe):
    junit = tmp_path / "j.xml"
    r = recheck(tmp_path, matrix_dir(tmp_path, {"none": ["False"]}), safe, "--junit", str(junit))
    assert r.returncode == 1
    case = ET.parse(junit).getroot().find("testsuite/testcase")
    assert case.find("error") is not None, ET.tostring(case)
    assert "observed unknown" in case.find("error").get("message")


def test_the_table_shows_the_read_verdict(tmp_path, safe):
    r = recheck(tmp_path, matrix_dir(tmp_path, {"none": ["maybe"]}), safe)
    assert r.returncode == 1
    row = next(line for line in r.stdout.splitlines() if line.startswith("redis"))
    assert "unknown" in row and "MISMATCH" in row and "s1:unknown" in row
    assert "MISMATCH redis none fencing off: expected safe, observed unknown" in r.stdout


def test_even_a_cell_expected_either_fails_on_a_row_nobody_can_read(tmp_path):
    either = tmp_path / "either.toml"
    either.write_text('[redis]\nnofence = "either"\n')
    r = recheck(tmp_path, matrix_dir(tmp_path, {"none": ["unknown", "maybe"]}), str(either))
    assert r.returncode == 1 and "MISMATCH redis none fencing off: expected either, observed unknown" in r.stdout
    r = recheck(tmp_path, matrix_dir(tmp_path / "ok", {"none": ["unknown"]}), str(either))
    assert r.returncode == 0, r.stdout
