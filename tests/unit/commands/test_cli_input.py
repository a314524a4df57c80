"""Bad input: one clear sentence and exit 254, never a traceback, nothing started."""

import pytest

from tests.conftest import chaos


@pytest.mark.parametrize("args, words", [
    (["run", "--backend", "redlok"], "unknown backend 'redlok'; choose one of"),
    (["run", "--nemesis", "clock-skw"], "unknown nemesis 'clock-skw'; choose one of"),
    (["run", "--time-limit", "abc"], "'abc' is not a valid float"),
    (["run", "--time-limit", "-3"], "--time-limit must be above 0"),
    (["run", "--concurrency", "0"], "--concurrency must be between 1 and 256"),
    (["run", "--ttl", "1000", "--hold-max", "2000"], "must be below the TTL"),
    (["run", "--option", "novalue"], "is not NAME=VALUE"),
    (["check", "/nonexistent/history.jsonl"], "does not exist"),
])
def test_bad_arguments_exit_254_with_one_sentence(args, words):
    r = chaos(*args)
    assert r.returncode == 254, r.stderr
    assert words in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_check_names_the_bad_line(tmp_path):
    p = tmp_path / "history.jsonl"
    p.write_text('{"time_ns": 1, "process": 0, "type": "invoke", "f": "acquire"}\nnot json\n{"a": 1}\n')
    r = chaos("check", str(p))
    assert r.returncode == 254 and "line 2" in r.stderr and "not JSON" in r.stderr


def test_list_names_the_backends():
    r = chaos("list")
    assert r.returncode == 0 and "redlock" in r.stdout and "clock-skew" in r.stdout
