"""One account of when a fault was in effect (issue 37): the checkers (causes, liveness,
leases: `faults_of`), the report's bands and ops.csv (`fault_intervals`) all read
harness/core/faults.py `in_effect`. They disagreed: a heal that failed ended the fault for the
checkers only, and a start that never completed was a fault for the checkers only."""

from harness.checker.causes import faults_of
from harness.core.faults import fault_intervals, in_effect, table
from harness.core.history import Op

S = 1_000_000_000


def nem(i, t, typ, f, value=None):
    return Op(index=i, time_ns=t, process="nemesis", type=typ, f=f, value=value)


HISTORY = [
    nem(0, 1 * S, "invoke", "partition", {"shape": "halves"}), nem(1, 1 * S + 10, "ok", "partition"),
    nem(2, 2 * S, "invoke", "heal"), nem(3, 2 * S + 10, "fail", "heal"),  # did not heal
    nem(4, 4 * S, "invoke", "heal"), nem(5, 4 * S + 10, "ok", "heal"),
    nem(6, 5 * S, "invoke", "kill", ["n1"]),  # never completed: may be in effect to the end
    Op(index=7, time_ns=9 * S, process=0, type="invoke", f="acquire", key="lock"),
]


def test_the_checkers_the_report_and_the_csv_read_one_account():
    spans = [(f.f, f.start_ns, f.end_ns) for f in faults_of(HISTORY, table())]
    assert spans == [("partition", 1 * S, 4 * S + 10), ("kill", 5 * S, 9 * S)]
    bands = [(b["f"], b["start_ns"], b["end_ns"]) for b in fault_intervals(HISTORY, table())]
    assert bands == [("partition", 1 * S, 4 * S + 10), ("kill", 5 * S, None)]  # None: to the end
    assert [(x["f"], x["start_ns"]) for x in in_effect(HISTORY, table())] == [("partition", 1 * S), ("kill", 5 * S)]


def test_bands_join_overlapping_faults_of_one_kind_the_checkers_keep_both():
    h = [nem(0, 1 * S, "invoke", "pause", ["n1"]), nem(1, 1 * S + 1, "ok", "pause", ["n1"]),
         nem(2, 2 * S, "invoke", "pause", ["n2"]), nem(3, 2 * S + 1, "ok", "pause", ["n2"]),
         nem(4, 3 * S, "invoke", "resume"), nem(5, 3 * S + 1, "ok", "resume")]
    assert len(faults_of(h, table())) == 2
    assert [(b["f"], b["start_ns"], b["end_ns"]) for b in fault_intervals(h, table())] == [("pause", 1 * S, 3 * S + 1)]
