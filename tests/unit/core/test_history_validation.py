"""read_history refuses histories that cannot have happened, and accepts what the harness writes;
load_run refuses malformed stored runs with one sentence naming the file."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from harness.core.errors import BadArgument, BadHistory
from harness.core.history import NEMESIS, HistoryWriter, Op, read_history
from harness.engine.worker import Recorder
from results.store import load_run, read_results, read_spec
from tests.bad_inputs import FIXTURES, GOOD
from tests.paths import TESTS

GOLDEN = TESTS / "golden"


def write(tmp_path: Path, text: str | bytes, name: str = "history.jsonl") -> Path:
    p = tmp_path / name
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    return p


def refused(tmp_path: Path, text: str | bytes) -> str:
    with pytest.raises(BadHistory) as e:
        read_history(write(tmp_path, text))
    msg = str(e.value)
    assert "history.jsonl line " in msg and "\n" not in msg
    return msg


@pytest.mark.parametrize("path", sorted(GOLDEN.rglob("*.jsonl")), ids=lambda p: p.name)
def test_every_golden_history_reads(path):
    assert read_history(path)


@pytest.mark.parametrize("name, words", [
    ("not-utf8", "not UTF-8"), ("array-line", "got an array"), ("null-line", "got null"),
    ("nan-value", "NaN is not JSON"), ("huge-int", "too long"), ("deep-nesting", "nested too deeply"),
    ("time-bool", "time_ns"), ("time-negative", "time_ns"), ("time-float", "time_ns"),
    ("process-float", "process"), ("f-number", "f must be a string"), ("index-negative", "index"),
    ("index-bool", "index"), ("token-string", "token"), ("token-bool", "token"), ("key-number", "key"),
    ("node-list", "node"), ("error-object", "error"), ("duplicate-index", "already used on line 1"),
    ("index-decreasing", "comes after index 7"), ("time-backwards", "back in time"),
    ("completion-first", "no open invoke"), ("completion-other-process", "no open invoke"),
    ("completion-other-f", "completes its acquire"), ("two-invokes", "still open"),
    ("nemesis-two-invokes", "still open"), ("garbage-last-line", "not JSON"),
])
def test_refused_with_the_line(tmp_path, name, words):
    assert words in refused(tmp_path, FIXTURES[name]["history.jsonl"])


def test_a_torn_last_line_is_dropped_only_without_its_newline(tmp_path):
    assert len(read_history(write(tmp_path, GOOD + '{"time_ns": 9, "pro'))) == GOOD.count("\n")
    assert len(read_history(write(tmp_path, GOOD.encode() + b'{"f": "acq\xc3'))) == GOOD.count("\n")  # torn mid-character
    refused(tmp_path, GOOD + '{"time_ns": 9, "pro\n')


def test_a_last_invoke_may_stay_open_and_indexes_are_optional(tmp_path):
    text = "".join(json.dumps({k: v for k, v in json.loads(line).items() if k != "index"}) + "\n"
                   for line in GOOD.splitlines())
    text += json.dumps({"time_ns": 10**6, "process": 3, "type": "invoke", "f": "acquire"}) + "\n"
    ops = read_history(write(tmp_path, "\ufeff" + text))  # a byte-order mark is tolerated
    assert [o.index for o in ops] == list(range(len(ops)))


def test_an_op_without_index_follows_the_previous_index(tmp_path):
    lines = [dict(json.loads(line)) for line in GOOD.splitlines()]
    for d in lines[3:]:
        d.pop("index")
    lines[2]["index"] = 40
    ops = read_history(write(tmp_path, "".join(json.dumps(d) + "\n" for d in lines)))
    assert [o.index for o in ops][1:5] == [1, 40, 41, 42]


def test_foreign_fields_and_string_processes_are_fine(tmp_path):
    text = (json.dumps({"time_ns": 1, "process": "c1", "type": "invoke", "f": "write", "value": 3, "extra": [1]}) + "\n"
            + json.dumps({"time_ns": 2, "process": "c1", "type": "ok", "f": "write", "value": 3, "node": "n1"}) + "\n")
    assert read_history(write(tmp_path, text))[1].node == "n1"


def test_paths_that_are_not_history_files(tmp_path):
    with pytest.raises(BadHistory, match="holds no history.jsonl and no runs, so there is nothing to read"):
        read_history(tmp_path)  # an empty store: says that nothing is there
    run = tmp_path / "store" / "redis-none" / "20261201T101500"
    run.mkdir(parents=True)
    (run / "history.jsonl").write_text("")
    for given in (tmp_path / "store", tmp_path / "store" / "redis-none"):  # a store, a test's dir: name a run
        with pytest.raises(BadHistory, match=f"is not a run but holds runs .*; give one of them, such as {run}$"):
            read_history(given)
    (tmp_path / "history.jsonl").mkdir()
    with pytest.raises(BadHistory, match="is a directory"):
        read_history(tmp_path)
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(BadHistory, match="not a regular file"):
        read_history(tmp_path / "fifo")


# ---------------------------------------------------------------- what the harness writes

class Sink(list):
    put = list.append


def harness_like_history(path: Path, seed: int, monkeypatch) -> list[Op]:
    """Ops as the runner records them: workers stamp their ops (the real Recorder) and the
    runner writes them when it drains the queue, after nemesis ops it stamped later; a
    worker's process id moves on after an info; a run can stop with ops in flight."""
    import harness.engine.worker as worker_mod

    rng = random.Random(seed)
    clock = [0]

    def now() -> int:
        clock[0] += rng.randrange(1, 1000)
        return clock[0]

    monkeypatch.setattr(worker_mod, "now_ns", now)
    w = HistoryWriter(path)
    written: list[Op] = []
    queue = Sink()
    workers = [Recorder(queue, p) for p in range(3)]
    open_f: list[str | None] = [None, None, None]
    for _ in range(300):
        roll = rng.random()
        if roll < 0.1:  # stamped and written at once, before the queue is drained
            inv = w.append(Op(time_ns=now(), process=NEMESIS, type="invoke", f="kill"))
            written += [inv, w.append(Op(time_ns=now(), process=NEMESIS, type=rng.choice(["ok", "info", "fail"]), f=inv.f))]
        elif roll < 0.3:
            for d in queue:
                written.append(w.op_at(d, w.record([d], "worker")))
            queue.clear()
        else:
            i = rng.randrange(3)
            if open_f[i] is None:
                open_f[i] = rng.choice(["acquire", "read", "write", "release"])
                workers[i]("invoke", open_f[i], key="lock")
            else:
                t = rng.choice(["ok", "fail", "info"])
                workers[i](t, open_f[i], key="lock", token=rng.choice([None, 7]))
                open_f[i] = None
                if t == "info":
                    workers[i].process += 3
    for d in queue:  # the final drain; ops still in flight never complete
        written.append(w.op_at(d, w.record([d], "worker")))
    w.close()
    return written


def test_what_the_harness_writes_reads_back(tmp_path, monkeypatch):
    out_of_time_order = 0
    for seed in range(20):
        path = tmp_path / f"h{seed}.jsonl"
        written = harness_like_history(path, seed, monkeypatch)
        ops = read_history(path)
        assert ops == written
        times = [o.time_ns for o in ops]
        out_of_time_order += times != sorted(times)
    # Why time_ns is only checked per process: the file order is not real-time order.
    assert out_of_time_order > 0


# ---------------------------------------------------------------- stored runs

def run_dir(tmp_path: Path, spec: str | bytes | None, history: str = GOOD) -> Path:
    d = tmp_path / "run"
    d.mkdir()
    (d / "history.jsonl").write_text(history)
    if spec is not None:
        (d / "spec.json").write_bytes(spec if isinstance(spec, bytes) else spec.encode())
    return d


def test_load_run_reads_a_run_dir_or_its_history(tmp_path):
    d = run_dir(tmp_path, '{"backend": "redis", "ttl_ms": 500, "fencing": true, "nemesis": ["kill"], "hold_max_ms": null}')
    spec, history = load_run(d)
    assert spec.backend == "redis" and spec.nemesis == ("kill",) and spec.fencing is True and history
    assert load_run(d / "history.jsonl")[0].ttl_ms == 500
    (d / "spec.json").unlink()
    bare = load_run(d)[0]  # no spec: nothing assumed (issue 37; this asserted the default spec, Redlock)
    assert bare.is_bare and bare.backend is None and bare.ttl_ms is None and bare.keys is None


@pytest.mark.parametrize("spec, words", [
    ('{\n "ttl_ms": 2000,,\n}', "is not valid JSON (line 2)"), ("[1]", "not an object"),
    ('{"ttl": 1}', "unknown field(s) ttl"), ('{"ttl_ms": "2000"}', "ttl_ms must be an integer"),
    ('{"ttl_ms": true}', "ttl_ms must be an integer"), ('{"time_limit": NaN}', "not valid JSON"),
    ('{"time_limit": 1e400}', "time_limit must be a finite number"), ('{"fencing": "yes"}', "fencing must be true or false"),
    ('{"nemesis": "kill"}', "nemesis must be a list of strings"), ('{"options": []}', "options must be an object"),
    ('{"netns": 1}', "netns must be true or false or null"), ('{"hold_max_ms": 1.5}', "hold_max_ms must be an integer or null"),
    (b'{"backend": "r\xe9dis"}', "is not UTF-8"), ("", "is not valid JSON (line 1)"),
])
def test_a_malformed_spec_is_one_sentence_naming_the_file(tmp_path, spec, words):
    d = run_dir(tmp_path, spec)
    with pytest.raises(BadArgument) as e:
        load_run(d)
    msg = str(e.value)
    assert words in msg and str(d / "spec.json") in msg and "\n" not in msg


def test_paths_for_load_run(tmp_path):
    with pytest.raises(BadArgument, match="does not exist"):
        load_run(tmp_path / "nope")
    d = run_dir(tmp_path, None)
    with pytest.raises(BadArgument, match="is a file, not a directory; give a run directory"):
        load_run(d / "history.jsonl", need_dir=True)
    (d / "spec.json").mkdir()
    with pytest.raises(BadArgument, match="is a directory"):
        read_spec(d / "spec.json")


def test_read_results_says_what_is_wrong(tmp_path):
    (tmp_path / "results.json").write_text("{")
    with pytest.raises(BadArgument, match="not valid JSON"):
        read_results(tmp_path)
    (tmp_path / "results.json").write_text("[]")
    with pytest.raises(BadArgument, match="no summary"):
        read_results(tmp_path)


def test_a_process_id_may_be_any_json_scalar_and_none_collides_with_an_integer(tmp_path):
    """Issue 37: a foreign history's process ids may be numbers, booleans or null; each is read as
    its JSON text, so true is not process 1, 1.5 not process "1.5"'s neighbour 1, null a process too."""
    from harness.core.history import read_history

    ids = [1, True, 1.5, None, "1", "nemesis"]
    p = tmp_path / "h.jsonl"
    p.write_text("".join(json.dumps({"index": i, "time_ns": i, "process": pid, "type": "invoke", "f": "acquire"}) + "\n"
                         for i, pid in enumerate(ids)))
    got = [o.process for o in read_history(p)]
    assert got == [1, "true", "1.5", "null", "1", "nemesis"] and len(set(got)) == len(ids)


@pytest.mark.parametrize("pid", [[1], {"a": 1}])
def test_a_process_id_that_is_not_a_scalar_is_one_sentence(tmp_path, pid):
    from harness.core.history import BadHistory, read_history

    p = tmp_path / "h.jsonl"
    p.write_text(json.dumps({"time_ns": 0, "process": pid, "type": "invoke", "f": "acquire"}) + "\n")
    with pytest.raises(BadHistory, match="process must be a JSON scalar"):
        read_history(p)
