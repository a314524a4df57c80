"""`--lock`: parsed, refused in one sentence for a backend without the kind, named in the run."""

import pytest

from harness.core.errors import BadArgument
from harness.core.kinds import LockKind, parse
from harness.core.spec import TestSpec


def test_parse_kinds():
    assert parse("mutex") == LockKind() and parse("rw") == LockKind(name="rw")
    assert parse("semaphore:3") == LockKind(name="semaphore", permits=3)
    assert str(parse("semaphore:3")) == "semaphore:3"


@pytest.mark.parametrize("bad", ["semaphore", "semaphore:0", "semaphore:-1", "semaphore:99999", "rwlock", "", 3])
def test_bad_kinds_are_one_sentence(bad):
    with pytest.raises(BadArgument) as e:
        parse(bad)
    assert "\n" not in str(e.value) and "--lock" in str(e.value)


def test_a_backend_without_the_kind_is_refused_by_name():
    with pytest.raises(BadArgument, match="backend 'redlock' has no rw lock .*works with: external, zookeeper-recipe$"):
        TestSpec(backend="redlock", lock="rw").validate()


def test_the_kind_is_in_the_spec_and_the_name():
    spec = TestSpec(backend="zookeeper-recipe", lock="semaphore:2").validate()
    assert spec.lock == "semaphore:2" and spec.name.endswith("-sem2")
    assert TestSpec.from_dict(spec.to_dict()).lock == "semaphore:2"
    assert TestSpec(backend="zookeeper-recipe").validate().name == "zookeeper-recipe-none"


@pytest.mark.parametrize("backend,kind,ok", [("redis", "semaphore:2", True), ("redis", "rw", False),
                                             ("zookeeper-recipe", "rw", True), ("zookeeper", "rw", False)])
def test_which_backend_has_which_kind(backend, kind, ok):
    if ok:
        assert TestSpec(backend=backend, lock=kind).validate().lock == kind
    else:
        with pytest.raises(BadArgument, match=f"backend '{backend}' has no rw lock"):
            TestSpec(backend=backend, lock=kind).validate()


def test_the_verdict_line_names_the_kind():
    from harness.commands.cli import verdict_text

    assert "rw exclusion held" in verdict_text({"valid": True, "lock": "rw", "critical_sections": 3})
    assert "semaphore:2 exclusion violated 4 times" in verdict_text({"valid": False, "lock": "semaphore:2", "violations": 4})
    assert "mutual exclusion held" in verdict_text({"valid": True, "critical_sections": 3})
