"""`chaos reproduce` and `chaos explore`: their verdict predicates, the campaign table and
the bisection, on hand-made histories and rows (no servers)."""

import json

import pytest

from harness.commands.explore import bisect_boundary
from harness.core.history import NEMESIS, Op
from harness.commands.reproduce import (first_violation_s, foreign_releases, minority_blocked, read_rows, seed_ranges,
                               stuck_after_crash, summarize, summary_table)
from tests.conftest import chaos

MS = 1_000_000


def op(t_ms: float, process, type_: str, f: str, **kw) -> Op:
    return Op(time_ns=int(t_ms * MS), process=process, type=type_, f=f, **kw)


def hold(p, t_acq: float, t_rel: float, release: str = "ok") -> list[Op]:
    return [op(t_acq - 1, p, "invoke", "acquire"), op(t_acq, p, "ok", "acquire"),
            op(t_rel, p, "invoke", "release"), op(t_rel + 1, p, release, "release")]


# --- unsafe-release ---------------------------------------------------------------------
def test_a_release_after_someone_else_acquired_is_foreign():
    h = hold(0, 1, 30) + hold(1, 10, 50)  # 0 was paused; 1 acquired at 10; 0's DEL at 30 succeeds
    assert foreign_releases(h) == 1


def test_a_release_before_the_next_acquire_is_not_foreign():
    assert foreign_releases(hold(0, 1, 5) + hold(1, 10, 20)) == 0


def test_a_refused_release_is_not_foreign():
    assert foreign_releases(hold(0, 1, 30, release="fail") + hold(1, 10, 50)) == 0


# --- setnx-expire-crash -----------------------------------------------------------------
def crash_at(t: float) -> list[Op]:
    return [op(t - 1, 0, "invoke", "acquire"), op(t, 0, "info", "acquire", error="Crash: between SETNX and EXPIRE")]


def fails(p, *ts) -> list[Op]:
    return [o for t in ts for o in (op(t - 1, p, "invoke", "acquire"), op(t, p, "fail", "acquire"))]


def test_nobody_acquires_after_the_crash_is_stuck():
    assert stuck_after_crash({}, hold(1, 1, 5) + crash_at(10) + fails(1, 20, 30, 40)) is True


def test_an_acquire_after_the_crash_means_the_lock_came_free():
    assert stuck_after_crash({}, crash_at(10) + fails(1, 20, 30, 40) + hold(2, 50, 60)) is False


def test_without_a_crash_or_without_attempts_there_is_nothing_to_show():
    assert stuck_after_crash({}, fails(1, 20, 30, 40)) is False
    assert stuck_after_crash({}, crash_at(10) + fails(1, 20)) is False  # too few tries to call it stuck


# --- partition-minority -----------------------------------------------------------------
def cut(worker: int, a: float, b: float) -> list[Op]:
    return [op(a - 5, NEMESIS, "invoke", "partition-client"),
            op(a, NEMESIS, "ok", "partition-client", value={"worker": worker}),
            op(b, NEMESIS, "invoke", "heal-client"), op(b + 5, NEMESIS, "ok", "heal-client")]


def test_the_cut_client_acquires_nothing_while_others_do():
    h = cut(0, 100, 200) + fails(0, 150, 190) + hold(1, 120, 160) + hold(2, 170, 180)
    assert minority_blocked({"violations": 0, "concurrency": 3}, h) is True


def test_an_acquire_by_the_cut_client_while_cut_is_a_miss():
    h = cut(0, 100, 200) + hold(0, 150, 160) + hold(1, 170, 180)
    assert minority_blocked({"violations": 0, "concurrency": 3}, h) is False


def test_an_acquire_while_the_heal_runs_is_not_held_against_the_cut():
    # seed 9 of etcd-partition-minority: the heal was invoked at 17.00 s, returned at 17.06 s,
    # and the cut client acquired at 17.05 s: after its rules may already have gone.
    h = cut(1, 100, 200) + hold(2, 120, 160) + [op(150, 1, "invoke", "acquire"), op(203, 1, "ok", "acquire")]
    assert minority_blocked({"violations": 0, "concurrency": 3}, h) is True


def test_the_majority_side_must_make_progress():
    h = cut(0, 100, 200) + fails(0, 150) + fails(1, 160)
    assert minority_blocked({"violations": 0, "concurrency": 3}, h) is False


def test_two_holders_or_no_cut_are_misses():
    h = cut(0, 100, 200) + hold(1, 120, 160)
    assert minority_blocked({"violations": 1, "concurrency": 3}, h) is False
    assert minority_blocked({"violations": 0, "concurrency": 3}, hold(1, 120, 160)) is False


def test_first_violation_is_seconds_from_the_start_of_the_history():
    h = [op(1000, 0, "invoke", "acquire"), op(9000, 0, "ok", "acquire")]
    results = {"checkers": {"mutex": {"details": {"overlaps": [{"start_ns": 4500 * MS}, {"start_ns": 3500 * MS}]}}}}
    assert first_violation_s(results, h) == 2.5
    assert first_violation_s({"checkers": {}}, h) is None


# --- the campaign table -----------------------------------------------------------------
def row(seed, matched=True, variant="nofence", first=3.5, violations=4, stale=(2, 0), lost=2):
    return {"scenario": "gc-pause", "variant": variant, "seed": seed, "expected": "unsafe", "matched": matched,
            "violations": violations, "stale_accepted": stale[0], "stale_rejected": stale[1], "lost": lost,
            "first_violation_s": first}


def test_summary_counts_hits_and_spans_the_first_violation():
    rows = [row(1, first=3.7), row(2, first=4.1), row(3, matched=False, first=None, violations=0, stale=(0, 0), lost=0)]
    (g,) = summarize(rows)
    assert (g["seeds"], g["hits"], g["seed_range"], g["first_violation_s"]) == (3, 2, "1-3", "3.7-4.1")
    assert g["runs_with_overlap"] == 2 and g["stale_accepted"] == 4 and g["lost"] == 4


def test_seed_ranges_are_compressed():
    assert seed_ranges([8, 1, 2, 3, 5, 7]) == "1-3, 5, 7-8" and seed_ranges([4]) == "4"


def test_summary_keeps_variants_apart_in_the_catalogue_order():
    redlock = dict(row(1), scenario="redlock-clock-jump")
    rows = [redlock, row(1), row(1, variant="fenced", stale=(0, 2), lost=0), row(2)]
    assert [g["scenario"] for g in summarize(rows)] == ["gc-pause", "gc-pause", "redlock-clock-jump"]
    rows = rows[1:]
    groups = summarize(rows)
    assert [(g["variant"], g["seeds"]) for g in groups] == [("nofence", 2), ("fenced", 1)]
    table = summary_table(rows)
    assert "| gc-pause | fenced | unsafe | 1 | 1/1 | 1/1 | 3.5 | 0 / 2 | 0 |" in table


def test_rows_merge_from_campaign_files_and_json_output(tmp_path):
    a = tmp_path / "a" / "rows.jsonl"
    a.parent.mkdir()
    a.write_text("".join(json.dumps(row(s)) + "\n" for s in (1, 2)))
    b = tmp_path / "b.out"  # `--json` output: text lines, then rows
    b.write_text("gc-pause nofence seed 3 ... MATCH\n" + json.dumps(row(3)) + "\n3/3 runs\n")
    rows = read_rows([str(a.parent), str(b)])
    assert [r["seed"] for r in rows] == [1, 2, 3]


def test_recheck_names_a_run_dir_that_is_gone(tmp_path):
    p = tmp_path / "rows.jsonl"
    p.write_text(json.dumps(dict(row(1), run_dir=str(tmp_path / "gone"))) + "\n")
    r = chaos("reproduce", "--summarize", str(p), "--recheck")
    assert r.returncode == 254 and "is gone" in r.stderr and "Traceback" not in r.stderr


def test_summarize_cli_prints_the_merged_table_and_fails_on_a_miss(tmp_path):
    p = tmp_path / "rows.jsonl"
    p.write_text(json.dumps(row(1)) + "\n" + json.dumps(row(2, matched=False)) + "\n")
    r = chaos("reproduce", "--summarize", str(p))
    assert r.returncode == 1 and "| gc-pause | nofence | unsafe | 1-2 | 1/2 |" in r.stdout


@pytest.mark.parametrize("content, words", [
    (None, "does not exist"),
    ('{"scenario": "x"\n', "not a JSON row"),
    ('{"scenario": "x"}\n', "missing variant, seed, expected, matched"),
    ("nothing here\n", "no reproduce rows"),
])
def test_bad_rows_get_one_sentence(tmp_path, content, words):
    p = tmp_path / "rows.jsonl"
    if content is not None:
        p.write_text(content)
    r = chaos("reproduce", "--summarize", str(p))
    assert r.returncode == 254 and words in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("args, words", [
    ([], "name one or more scenarios or use --all"),
    (["gc-paws"], "unknown scenario 'gc-paws'"),
    (["gc-pause", "--time-limit", "90"], "at least 5 and at most 60"),
    (["gc-pause", "--summarize", "x"], "runs nothing"),
    (["--recheck"], "give their rows with --summarize"),
])
def test_reproduce_bad_arguments(args, words):
    r = chaos("reproduce", *args)
    assert r.returncode == 254 and words in r.stderr and "Traceback" not in r.stderr


# --- explore's bisection ----------------------------------------------------------------
@pytest.mark.parametrize("threshold", [0.3, 1.0, 1.19, 1.66, 3.9])
def test_bisection_brackets_the_threshold(threshold):
    probes = []

    def breaks(x):
        probes.append(x)
        return x >= threshold

    kind, held, broke = bisect_boundary(breaks, 0.25, 4.0, steps=6)
    assert kind == "between" and held < threshold <= broke
    assert broke - held <= (4.0 - 0.25) / 2 ** 6 + 1e-3  # mids are rounded to 4 places
    assert len(probes) == 2 + 6


def test_bisection_reports_no_break_and_a_break_at_the_floor():
    assert bisect_boundary(lambda x: False, 0.25, 4.0, 5)[0] == "never"
    assert bisect_boundary(lambda x: True, 0.25, 4.0, 5)[0] == "below"


@pytest.mark.parametrize("args, words", [
    (["--backend", "redis", "--lo", "2", "--hi", "1"], "must be positive and below --hi"),
    (["--backend", "redis", "--steps", "-1"], "--steps must be 0..20"),
    (["--backend", "nope"], "unknown backend 'nope'"),
])
def test_explore_bad_arguments(args, words):
    r = chaos("explore", *args)
    assert r.returncode == 254 and words in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("causes, matched", [({"overran-paused": 3}, True), ({"overran-paused": 2, "unexplained": 1}, False),
                                             ({"early-server-clock": 3}, False)])
def test_a_scenario_misses_when_its_violations_have_another_cause(tmp_path, causes, matched):
    from harness.commands.reproduce import judge

    (tmp_path / "spec.json").write_text(json.dumps({"concurrency": 3}))
    (tmp_path / "history.jsonl").write_text(json.dumps({"index": 0, "time_ns": 1, "process": 0, "type": "invoke",
                                                        "f": "acquire"}) + "\n")
    summary = {"valid": False, "violations": 3, "stale_writes_accepted": 1, "lost_updates": 1,
               "violations_by_cause": causes}
    (tmp_path / "results.json").write_text(json.dumps({"summary": summary, "checkers": {}}))
    r = judge("gc-pause", "nofence", 1, tmp_path)
    assert r["matched"] is matched and r["causes"] == causes
    if not matched:
        assert "expected only overran-paused" in r["errors"][-1]


def test_a_miss_names_its_first_wrongly_caused_violation(tmp_path):
    """CI keeps only the log: the sentence of the first unexplained overlap goes with the miss."""
    from harness.commands.reproduce import judge

    (tmp_path / "spec.json").write_text(json.dumps({"concurrency": 3}))
    (tmp_path / "history.jsonl").write_text("")
    summary = {"valid": False, "violations": 2, "stale_writes_accepted": 1, "lost_updates": 1,
               "violations_by_cause": {"overran-paused": 1, "unexplained": 1}}
    overlaps = [{"first": {"index": 4}, "second": {"index": 9}, "cause": {"cause": "overran-paused", "detail": "paused"}},
                {"first": {"index": 12}, "second": {"index": 20}, "cause": {"cause": "unexplained", "detail": "UNEXPLAINED: x"}}]
    (tmp_path / "results.json").write_text(json.dumps({"summary": summary,
                                                       "checkers": {"mutex": {"details": {"overlaps": overlaps}}}}))
    r = judge("gc-pause", "nofence", 1, tmp_path)
    assert not r["matched"]
    assert r["errors"][-1].startswith("the first: UNEXPLAINED: x (acquires #12 and #20 of ")
