"""harness/checker/alive.py: an external client that died of its own error is a finding; a
client the harness ended (a hang, a bad reply) or that a nemesis killed is not."""

from harness.checker.alive import check_alive
from harness.core.history import Op


def op(i, type_, error=None, process=0):
    return Op(index=i, time_ns=i * 1000, process=process, type=type_, f="release", key="lock", error=error)


def test_a_client_that_died_untold_is_a_finding_with_its_last_words():
    died = "ClientDied: client died: its stdout closed during acquire (it exited with status 1); its stderr ends: boom"
    r = check_alive(None, [op(0, "invoke"), op(1, "info", died)])
    assert r.valid is False and r.summary["client_deaths"] == 1
    assert r.details["findings"][0]["words"].startswith("client died: its stdout closed during acquire")


def test_what_the_harness_ended_is_not():
    ended = ["ClientBroke: no reply to release within 3.5 s", "ClientBroke: its reply to release is not JSON",
             "killed: the process was SIGKILLed holding the lock (recorded for it by kill-holder)"]
    ops = [o for i, e in enumerate(ended) for o in (op(2 * i, "invoke"), op(2 * i + 1, "info", e))]
    r = check_alive(None, ops)
    assert r.valid is True and r.summary["client_deaths"] == 0
