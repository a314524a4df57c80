"""The optional describe op (workloads/describe.py): a client program's own numbers, asked
before any server; what it does not state, or cannot say, is nothing; a value that is not one
is one sentence; the program is always ended."""

import sys

import pytest

from harness.core.errors import BadArgument
from workloads.describe import check, describe


def program(tmp_path, body: str) -> str:
    p = tmp_path / "client.py"
    p.write_text("import json, sys, time\n" + body)
    return f"{sys.executable} {p}"


def test_a_client_states_its_numbers(tmp_path):
    cmd = program(tmp_path, 'req = json.loads(sys.stdin.readline())\n'
                            'print(json.dumps({"id": req["id"], "type": "ok", "ttl_ms": 30000, "acquire_timeout_s": 10,'
                            ' "renews": False, "extra": 1}), flush=True)\ntime.sleep(60)\n')
    stated, how = describe(cmd)
    assert stated == {"ttl_ms": 30000, "acquire_timeout_s": 10.0, "renews": False}
    assert how == "it stated ttl_ms 30000, acquire_timeout_s 10, renews False"


@pytest.mark.parametrize("body, words", [
    ('req = json.loads(sys.stdin.readline())\nprint(json.dumps({"id": 1, "type": "unsupported"}), flush=True)\n',
     "it answered describe unsupported"),
    ("sys.exit(3)\n", "no answer to describe"),
    ("time.sleep(60)\n", "no answer to describe within 1 s"),
    ('print("not json", flush=True)\n', "not JSON"),
])
def test_a_client_that_states_nothing_leaves_the_flags_and_defaults(tmp_path, body, words):
    stated, how = describe(program(tmp_path, body), timeout_s=1.0)
    assert stated == {} and words in how


def test_a_missing_program_states_nothing():
    stated, how = describe("/nonexistent/lockclient")
    assert stated == {} and "could not be started" in how


@pytest.mark.parametrize("rep, words", [
    ({"ttl_ms": -3}, "ttl_ms -3"), ({"ttl_ms": "30s"}, "ttl_ms '30s'"), ({"acquire_timeout_s": float("inf")}, "inf"),
    ({"session_ms": True}, "session_ms True"), ({"renews": "yes"}, "renews 'yes'"),
])
def test_a_stated_value_that_is_not_one_is_one_sentence(rep, words):
    with pytest.raises(BadArgument) as e:
        check(rep)
    assert words in str(e.value) and "\n" not in str(e.value)
