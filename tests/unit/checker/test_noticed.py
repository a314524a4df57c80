"""harness/checker/noticed.py: a `held: true` given after another process was granted the lock
since the holder's own grant is a finding (the client did not notice it lost the lock); its
near misses are not."""

from harness.checker.noticed import check_noticed
from harness.core.contracts.checker import UNKNOWN
from harness.core.history import Op
from harness.core.spec import TestSpec

SPEC = TestSpec(backend="redis")


class H:
    """A history built op by op, indexes in order."""

    def __init__(self):
        self.ops: list[Op] = []

    def op(self, t, p, type_, f, value=None, mode=None, key="lock"):
        self.ops.append(Op(index=len(self.ops), time_ns=t * 10**6, process=p, type=type_, f=f, key=key,
                           value=value, mode=mode))
        return self

    def grant(self, t, p, mode=None, key="lock"):
        return self.op(t, p, "invoke", "acquire", mode=mode, key=key).op(t + 1, p, "ok", "acquire", f"v{p}", mode=mode,
                                                                          key=key)

    def held(self, t, p, answer):
        return self.op(t, p, "invoke", "held").op(t + 1, p, "ok", "held", answer)

    def release(self, t, p):
        return self.op(t, p, "invoke", "release", f"v{p}").op(t + 1, p, "ok", "release", f"v{p}")


def test_held_true_after_another_was_granted_is_a_finding():
    h = H().grant(100, 0).held(110, 0, True).grant(200, 1).held(300, 0, True)
    r = check_noticed(SPEC, h.ops)
    assert r.valid is False and r.summary["held_true_after_lost"] == 1
    assert "process 0 said it still held 'lock'" in r.details["findings"][0]["words"]
    assert "after process 1 was granted it" in r.details["findings"][0]["words"]


def test_the_near_misses_are_not():
    before = H().grant(100, 0).held(150, 0, True).grant(200, 1)  # asked before the other's grant
    said_no = H().grant(100, 0).grant(200, 1).held(300, 0, False)  # it noticed: counted, no finding
    regained = H().grant(100, 0).release(150, 0).grant(200, 1).grant(250, 0).held(300, 0, True)  # its own new grant
    other_key = H().grant(100, 0).grant(200, 1, key="other").held(300, 0, True)  # another lock
    reader = H().grant(100, 0, mode="write").grant(200, 1, mode="read").held(300, 0, True)  # only writes exclude
    for h in (before, said_no, regained, other_key, reader):
        r = check_noticed(TestSpec(backend="redis", lock="rw") if h is reader else SPEC, h.ops)
        assert r.valid is True and r.summary["held_true_after_lost"] == 0, r
    assert check_noticed(SPEC, said_no.ops).summary["held_false_before_write"] == 1


def test_a_client_without_an_answer_is_not_judged_and_says_so():
    r = check_noticed(SPEC, H().grant(100, 0).grant(200, 1).ops)
    assert r.valid == UNKNOWN and "not judged" in r.error
    r = check_noticed(TestSpec(backend="redis", lock="semaphore:2"), H().grant(100, 0).held(300, 0, True).ops)
    assert r.valid == UNKNOWN and "semaphore" in r.error
