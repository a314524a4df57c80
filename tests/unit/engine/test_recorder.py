"""The worker's Recorder keeps the shared holding flag that pause-holder aims by."""

from harness.engine.worker import Recorder


class Sink(list):
    put = list.append


def test_flag_is_set_by_an_ok_acquire_and_cleared_before_the_release_is_sent():
    flags, sink = [0, 0], Sink()
    rec = Recorder(sink, 1, flags, 1)
    rec("invoke", "acquire")
    assert flags == [0, 0]
    rec("ok", "acquire", value="v", token=3)
    assert flags == [0, 1]
    rec("ok", "read", value=1)
    rec("ok", "write", value=2)
    assert flags == [0, 1]
    rec("invoke", "release")
    assert flags == [0, 0] and sink[-1]["f"] == "release" and sink[-1]["process"] == 1


def test_failed_or_uncertain_acquires_do_not_set_it():
    flags = [0]
    rec = Recorder(Sink(), 0, flags, 0)
    rec("fail", "acquire", error="held by another client")
    rec("info", "acquire", error="timeout")
    assert flags == [0]


def test_without_shared_flags_it_only_records():
    sink = Sink()
    Recorder(sink, 4)("ok", "acquire")
    assert sink[0]["process"] == 4 and sink[0]["type"] == "ok"


def test_a_batching_recorder_sends_lists_on_flush_when_full_and_once_settled(monkeypatch):
    import harness.engine.worker as worker_mod

    clock = [100.0]
    monkeypatch.setattr(worker_mod.time, "monotonic", lambda: clock[0])
    sink = Sink()
    rec = Recorder(sink, 2, batch=3)
    rec("invoke", "acquire", key="k")
    rec("ok", "acquire", key="k", token=None)
    rec.settle()
    assert sink == []  # kept: the oldest op is younger than FLUSH_S
    clock[0] += 2 * worker_mod.FLUSH_S
    rec.settle()
    assert [[d["type"] for d in b] for b in sink] == [["invoke", "ok"]] and "token" not in sink[0][1]
    for t in ("invoke", "ok", "invoke"):
        rec(t, "read")
    assert len(sink) == 2 and len(sink[1]) == 3  # full: sent at once
    rec("ok", "read")
    rec.flush()
    rec.flush()  # nothing kept: nothing sent
    assert len(sink) == 3 and sink[2][0]["process"] == 2


def test_a_worker_past_its_op_rate_waits_for_the_next_second_and_says_so_once():
    """A client that answers in no time must not flood the runner and the disk: past
    max_rate ops in a second the worker waits, no op is dropped, and the runner hears once."""
    import time

    from harness.engine.worker import THROTTLED

    sink = Sink()
    rec = Recorder(sink, 0, batch=10, max_rate=50)
    t = time.monotonic()
    for _ in range(120):
        rec("ok", "read", value=1)
    rec.flush()
    took = time.monotonic() - t
    ops = [op for batch in sink if isinstance(batch, list) for op in batch]
    assert len(ops) == 120, "every op is still sent"
    assert [m for m in sink if isinstance(m, dict)] == [{THROTTLED: 0}]
    assert rec.throttled >= 2 and took >= 1.5, (rec.throttled, took)


def test_a_worker_below_its_op_rate_is_never_slowed():
    sink = Sink()
    rec = Recorder(sink, 0, batch=10, max_rate=10_000)
    for _ in range(500):
        rec("ok", "read", value=1)
    rec.flush()
    assert rec.throttled == 0 and all(isinstance(b, list) for b in sink)


def test_an_armed_worker_records_the_invoke_sends_it_and_waits_until_let_go(monkeypatch):
    import threading

    import harness.engine.worker as worker_mod

    parking, sink = [0, worker_mod.PARK_CODES["release"]], Sink()
    rec = Recorder(sink, 1, [0, 0], 1, batch=256, parking=parking)
    rec("invoke", "acquire")  # armed for release, not acquire: goes on
    assert parking[1] == worker_mod.PARK_CODES["release"] and sink == []
    threading.Timer(0.05, lambda: parking.__setitem__(1, 0)).start()  # the nemesis lets it go
    rec("invoke", "release")
    assert parking[1] == 0
    assert [d["f"] for batch in sink for d in batch] == ["acquire", "release"]  # sent before it waited


def test_a_parked_worker_nobody_lets_go_goes_on_after_park_max_s(monkeypatch):
    import harness.engine.worker as worker_mod

    monkeypatch.setattr(worker_mod, "PARK_MAX_S", 0.02)
    parking = [worker_mod.PARK_CODES["renew"]]
    Recorder(Sink(), 0, parking=parking)("invoke", "renew")
    assert parking == [0]
