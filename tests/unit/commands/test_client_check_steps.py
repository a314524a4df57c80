"""client-check's validity step: a reply without valid_ms is allowed (the library states none)
and is a NOTE, not a FAIL; one outside (0, TTL] fails."""

from harness.commands.client_check import Note, steps
from harness.core.contracts.client import Lease


class One:
    def __init__(self, valid_ms):
        self.valid_ms = valid_ms

    def acquire(self, key, ttl_ms, timeout_s):
        return Lease(key=key, value="v", token=None, acquired_ns=0, valid_until_ns=None,
                     meta={"valid_ms": self.valid_ms})


def validity_of(valid_ms):
    checks = dict(steps(One(valid_ms), One(valid_ms), key="k", ttl_ms=2000))
    assert checks["acquire a free lock"]() is None
    return checks["its reply carries the validity it believes (valid_ms)"]()


def test_no_valid_ms_is_a_note_and_a_wrong_one_fails():
    note = validity_of(None)
    assert isinstance(note, Note) and "none stated" in note
    assert validity_of(1800.0) is None
    bad = validity_of(5000.0)
    assert bad and not isinstance(bad, Note) and "not within (0, TTL 2000]" in bad
