"""The report's timeline draws an rw lock's readers apart from its writers."""

from harness.checker.kinds import check_exclusion
from harness.core.history import read_history
from results import charts
from tests.paths import TESTS

GOLDEN = TESTS / "golden" / "kinds"


def _timeline(name: str):
    h = read_history(GOLDEN / name)
    r = check_exclusion(None, h)
    doc = {"checkers": {"mutex": {"valid": r.valid, "summary": r.summary, "details": r.details}}}
    return charts.timeline(charts.frame(h, {}), doc, h)


def test_readers_are_green_bars_with_their_own_legend_and_a_count():
    html, notes = _timeline("rw-readers-ok.jsonl")
    assert html.count('class="held read"') == 3 and "held to read" in html and "held to write" in html
    assert any("3 windows held to read" in n and "1 to write" in n for n in notes)


def test_a_violation_says_which_modes_overlapped():
    html, _ = _timeline("rw-writer-over-reader-bad.jsonl")
    assert "violation (read and write)" in html


def test_a_mutex_or_semaphore_timeline_has_no_reader_bars():
    html, notes = _timeline("semaphore-over-bad.jsonl")
    assert 'class="held read"' not in html and "lock held" in html and "3 holders at once" in html
    assert not any("read-write" in n for n in notes)
