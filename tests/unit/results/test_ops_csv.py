"""ops.csv (results/csv.py): one row per op with its latency, the faults active when it was
invoked and a violation's cause; written without pandas, and pandas reads it back."""

from __future__ import annotations

import csv

import pandas as pd

from harness.core.history import NEMESIS, Op
from results.csv import COLUMNS, write_ops_csv

S = 1_000_000_000


def op(i, t, process, type_, f, **kw) -> Op:
    return Op(index=i, time_ns=int(t * S), process=process, type=type_, f=f, **kw)


HISTORY = [
    op(0, 1.0, 0, "invoke", "acquire", key="k"),
    op(1, 1.1, 0, "ok", "acquire", key="k", value="v0", token=7, valid_until_ns=3 * S),
    op(2, 1.5, NEMESIS, "invoke", "partition", value={"shape": "halves"}),
    op(3, 1.6, NEMESIS, "ok", "partition", value={"shape": "halves"}),
    op(4, 1.7, NEMESIS, "invoke", "pause", value=["n1"]),
    op(5, 1.8, NEMESIS, "ok", "pause", value=["n1"]),
    op(6, 2.0, 1, "invoke", "acquire", key="k"),
    op(7, 2.5, 1, "ok", "acquire", key="k", value="v1", token=8),
    op(8, 3.0, NEMESIS, "invoke", "heal", value=None),
    op(9, 3.1, NEMESIS, "ok", "heal", value=None),
    op(10, 3.2, 0, "invoke", "release", key="k"),
    op(11, 4.0, 2, "invoke", "acquire", key="k"),
]


def rows(tmp_path, causes=()):
    path = tmp_path / "ops.csv"
    write_ops_csv(HISTORY, path, causes)
    with open(path, newline="") as f:
        return list(csv.DictReader(f)), path


def test_each_op_is_a_row_with_latency_faults_and_cause(tmp_path):
    got, _ = rows(tmp_path, causes=[(1, 7, "early-partition")])
    by_index = {r["index"]: r for r in got}
    assert list(got[0]) == COLUMNS and len(got) == 7  # 4 client ops, 3 nemesis ops
    first = by_index["0"]
    assert (first["type"], first["value"], first["token"], first["latency_ms"], first["invoke_s"]) == \
        ("ok", "v0", "7", "100.0", "0.0")
    second = by_index["6"]  # invoked inside the partition and the pause
    assert second["nemesis_active"] == "partition+pause" and second["cause"] == "early-partition"
    release = by_index["10"]  # invoked after the heal: the pause was never healed, the partition was
    assert release["nemesis_active"] == "pause" and release["type"] == "info" and release["error"] == "no completion"
    pending = by_index["11"]
    assert (pending["complete_s"], pending["latency_ms"]) == ("", "")


def test_pandas_reads_it_back(tmp_path):
    _, path = rows(tmp_path)
    frame = pd.read_csv(path)
    assert list(frame.columns) == COLUMNS and len(frame) == 7


def test_an_empty_history_has_the_header_alone(tmp_path):
    write_ops_csv([], tmp_path / "ops.csv")
    assert (tmp_path / "ops.csv").read_text().strip() == ",".join(COLUMNS)
