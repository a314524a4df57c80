"""The history file as a crash leaves it: every op written before the crash reads back, a
last line torn at any byte costs only that op, and every field survives the round trip.
(What read_history refuses, and the harness's own interleavings, are in
test_history_validation.py.)"""

from __future__ import annotations

from pathlib import Path

from harness.core.history import NEMESIS, HistoryWriter, Op, pair_ops, read_history


def ops_of_every_shape() -> list[Op]:
    return [
        Op(time_ns=10, process=0, type="invoke", f="acquire", key="lock"),
        Op(time_ns=20, process=0, type="ok", f="acquire", key="lock", token=7, node="n1"),
        Op(time_ns=25, process=NEMESIS, type="invoke", f="partition",
           value={"grudge": {"n1": ["n2"]}, "describe": "n1 | n2"}),
        Op(time_ns=30, process=1, type="invoke", f="write", key="counter", value=[1, "two", None]),
        Op(time_ns=31, process=NEMESIS, type="info", f="partition", error="n1 still reaches n2 ✗"),
        Op(time_ns=40, process=1, type="info", f="write", key="counter", value=3.5, error="timed out"),
        Op(time_ns=50, process="final", type="invoke", f="read", key="counter"),
        Op(time_ns=60, process="final", type="ok", f="read", key="counter", value="é and 日本"),
    ]


def write_all(path: Path, ops: list[Op]) -> list[Op]:
    w = HistoryWriter(path)
    written = [w.append(op) for op in ops]
    w.close()
    return written


def test_every_op_written_before_a_crash_reads_back(tmp_path):
    path = tmp_path / "history.jsonl"
    w = HistoryWriter(path)  # never closed, as after a SIGKILL
    written = []
    for n, op in enumerate(ops_of_every_shape(), 1):
        written.append(w.append(op.with_index(99)))  # the writer numbers the ops itself
        assert read_history(path) == written and [o.index for o in written] == list(range(n))


def test_a_last_line_torn_at_any_byte_costs_only_that_op(tmp_path):
    written = write_all(tmp_path / "whole.jsonl", ops_of_every_shape())
    raw = (tmp_path / "whole.jsonl").read_bytes()
    last_line_starts = raw.rstrip(b"\n").rfind(b"\n") + 1
    torn = tmp_path / "history.jsonl"
    for cut in range(last_line_starts, len(raw)):
        torn.write_bytes(raw[:cut])
        # all but the newline left: the line is whole and stays; any shorter: the line goes
        want = written if cut == len(raw) - 1 else written[:-1]
        assert read_history(torn) == want, (cut, raw[last_line_starts:cut])


def test_every_field_and_value_survives_the_round_trip(tmp_path):
    written = write_all(tmp_path / "history.jsonl", ops_of_every_shape())
    back = read_history(tmp_path / "history.jsonl")
    assert back == written
    assert back[2].value == {"grudge": {"n1": ["n2"]}, "describe": "n1 | n2"} and back[3].value == [1, "two", None]
    assert back[7].value == "é and 日本" and back[1].token == 7 and back[1].node == "n1"
    lines = (tmp_path / "history.jsonl").read_text(encoding="utf-8").splitlines()
    assert '"value":null' in lines[0] and "token" not in lines[0]  # value always written; empty fields left out


def test_pairs_follow_each_process_and_an_op_never_completed_pairs_with_none():
    ops = [op.with_index(i) for i, op in enumerate(ops_of_every_shape())]
    ops.append(Op(index=len(ops), time_ns=70, process=2, type="invoke", f="acquire", key="lock"))
    pairs = [(inv.process, inv.f, done and done.type) for inv, done in pair_ops(ops)]
    assert pairs == [(0, "acquire", "ok"), (NEMESIS, "partition", "info"), (1, "write", "info"),
                     ("final", "read", "ok"), (2, "acquire", None)]
