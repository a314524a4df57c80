"""A renew that said ok while another process held the lock is named by the mutex checker."""

from harness.checker.lock import check_mutex
from harness.core.history import Op


def h(*rows):
    return [Op(index=i, time_ns=t, process=p, type=ty, f=f) for i, (t, p, ty, f) in enumerate(rows)]


def test_a_renew_ok_inside_another_holders_window_is_named():
    history = h((0, 0, "invoke", "acquire"), (1, 0, "ok", "acquire"),
                (5, 1, "invoke", "acquire"), (6, 1, "ok", "acquire"),      # 1 holds from 6 (0 believes too)
                (7, 0, "invoke", "renew"), (8, 0, "ok", "renew"),          # 0 renews ok while 1 holds
                (9, 0, "invoke", "release"), (10, 0, "ok", "release"),
                (11, 1, "invoke", "release"), (12, 1, "ok", "release"))
    r = check_mutex(None, history)
    assert r.valid is False and r.summary["renewed_while_other_held"] == 1
    assert r.details["renewed_while_other_held"][0]["renew"]["process"] == 0


def test_renews_of_the_only_holder_are_fine():
    history = h((0, 0, "invoke", "acquire"), (1, 0, "ok", "acquire"),
                (2, 0, "invoke", "renew"), (3, 0, "ok", "renew"),
                (4, 0, "invoke", "release"), (5, 0, "ok", "release"),
                (6, 1, "invoke", "acquire"), (7, 1, "ok", "acquire"),
                (8, 1, "invoke", "renew"), (9, 1, "fail", "renew"))
    r = check_mutex(None, history)
    assert r.valid is True and r.summary["renewed_while_other_held"] == 0
