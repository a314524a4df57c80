"""A shrunk run's report links back to its original and the original's to its shrink; the index
(`chaos serve`'s page) marks both (results/lineage.py). On stored run dirs, no servers."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from results import store
from results.index import render_index
from harness.commands.shrink import relink
from results.lineage import lineage
from tests.conftest import ROOT, eventually
from tests.unit.commands.test_serve import free_port, get
from tests.unit.commands.test_shrink import HISTORY

PAUSE = {"f": "pause-holder", "at": 2.0, "duration": 4.0, "value": {"worker": 0}, "heal": "resume-holder",
         "heal_value": {"worker": 0}}
KILL = dict(PAUSE, f="kill", at=7.0, heal="restart")


def a_run(root: Path, name: str, valid=False) -> Path:
    d = root / "redis-pause-holder" / name
    d.mkdir(parents=True)
    (d / "spec.json").write_text(json.dumps({"backend": "redis", "nemesis": ["pause-holder"], "time_limit": 15,
                                             "seed": 3, "store": str(root)}))
    (d / "history.jsonl").write_text("".join(json.dumps(dict(o, index=i)) + "\n" for i, o in enumerate(HISTORY)))
    store.write_json(d / "results.json", {"summary": {"valid": valid, "violations": 1, "backend": "redis"},
                                          "checkers": {}})
    (d / "report.html").write_text("<html>the report analysis wrote, before any shrink</html>")
    return d


def shrunk(root: Path, best_run=None, as_recorded=str) -> tuple[Path, Path]:
    """An original with 3 faults shrunk to 1 (reproduced in 3 of 3), in `root`."""
    orig, best = a_run(root, "20261203T100000"), a_run(root, "20261203T101500")
    store.write_json(orig / "shrink.json", {
        "of": str(orig), "findings": ["violation:overran-paused"], "trials": 3, "rate": 0.67,
        "start": {"faults": [PAUSE, KILL, KILL], "time_limit": 15}, "best": {"faults": [PAUSE], "time_limit": 8},
        "best_outcomes": [True, True, True], "best_run": as_recorded(best if best_run is None else best_run),
        "interrupted": False})
    store.write_json(best / "shrunk-from.json", {"of": as_recorded(orig), "shrink": str(orig / "shrink.json")})
    return orig, best


def links(page: Path) -> list[Path]:
    """Where each link of the report's Shrink section leads, resolved from the page's dir."""
    html = page.read_text()
    section = re.search(r"<section class='card' id='shrink'>(.*?)</section>", html, re.S)
    assert section, "no Shrink section"
    return [(page.parent / h).resolve() for h in re.findall(r'href="([^"]+)"', section.group(1))]


def test_the_reports_of_a_shrink_link_to_each_other(tmp_path):
    orig, best = shrunk(tmp_path / "store")
    assert relink(orig, best) == []
    assert links(orig / "report.html") == [(best / "report.html").resolve(), (orig / "shrink.json").resolve()]
    assert links(best / "report.html") == [(orig / "report.html").resolve()]
    page = (orig / "report.html").read_text()
    assert "Shrunk to" in page and "3 faults -&gt; 1, reproduced in 3 of 3" in page
    assert "Shrunk from" in (best / "report.html").read_text()
    assert "<a href='#shrink'>Shrink</a>" in page  # in the report's navigation too


def test_a_run_without_a_shrink_has_no_shrink_section(tmp_path):
    d = a_run(tmp_path / "store", "20261203T100000")
    relink(d)
    assert "id='shrink'" not in (d / "report.html").read_text() and not lineage(d)


def test_a_shrink_that_found_nothing_smaller_says_so_without_a_link(tmp_path):
    orig, _ = shrunk(tmp_path / "store", best_run=tmp_path / "store" / "redis-pause-holder" / "20261203T100000")
    relink(orig)
    assert lineage(orig).shrunk_to is None
    assert "found nothing smaller" in (orig / "report.html").read_text()
    assert links(orig / "report.html") == [(orig / "shrink.json").resolve()]


def test_a_path_recorded_relative_to_the_shrinks_directory_is_found_in_the_same_store(tmp_path):
    orig, best = shrunk(tmp_path / "store", as_recorded=lambda p: f"store/{p.parent.name}/{p.name}")
    lin = lineage(orig)
    assert lin.shrunk_to == best.resolve() and lineage(best).shrunk_from == orig.resolve()


def test_a_shrink_file_that_is_a_link_or_not_json_gives_no_link(tmp_path):
    orig, best = shrunk(tmp_path / "store")
    (best / "shrunk-from.json").unlink()
    (best / "shrunk-from.json").symlink_to(orig / "shrink.json")  # resolves outside its run dir: not read
    (orig / "shrink.json").write_text("not json")
    assert not lineage(best) and lineage(orig).shrunk_to is None
    assert relink(orig, best) == []  # the reports are still drawn


def test_the_index_marks_shrunk_from_and_shrunk_to_and_chaos_serve_shows_it(tmp_path):
    root = tmp_path / "store"
    orig, best = shrunk(root)
    page = render_index(root)
    assert f'shrunk to <a href="redis-pause-holder/{best.name}/report.html">redis-pause-holder/{best.name}</a>' in page
    assert f'shrunk from <a href="redis-pause-holder/{orig.name}/report.html">' in page
    (best / "report.html").unlink()
    assert f'shrunk to <a href="redis-pause-holder/{best.name}/results.json">' in render_index(root)
    relink(orig, best)
    port = free_port()
    with open(tmp_path / "serve.log", "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "harness", "serve", "--store", str(root), "--port", str(port)],
                                cwd=ROOT, stdout=log, stderr=log)
        try:
            status, _, body = eventually(lambda: get(port, "/"), until=None)
            assert status == 200 and b"shrunk to <a" in body and b"shrunk from <a" in body
            status, _, body = get(port, f"/redis-pause-holder/{best.name}/report.html")
            assert status == 200 and b"Shrunk from" in body
        finally:
            proc.terminate()
            proc.wait(10)


def test_chaos_shrink_redraws_both_reports_with_their_links(tmp_path, monkeypatch, capsys):
    """Replays simulated as stored runs: the search keeps the one pause, shrink.json lands in the
    run store/latest named when asked (not in the replay it leads to by then), and the original's
    and the best replay's reports, written before the shrink ended, now link to each other."""
    from harness.commands import shrink as cmd
    from harness.engine import runner

    root = tmp_path / "store"
    orig = a_run(root, "20261203T100000")
    two = HISTORY + [dict(o, time_ns=o["time_ns"] + 6 * 10**9) for o in HISTORY[2:]]
    (orig / "history.jsonl").write_text("".join(json.dumps(dict(o, index=i)) + "\n" for i, o in enumerate(two)))
    store.write_json(orig / "results.json", {"summary": {"valid": False, "violations": 1,
                                                         "violations_by_cause": {"overran-paused": 1}}, "checkers": {}})
    made = []

    class Outcome:
        def __init__(self, replay):
            first = any(r.at == 2.0 for r in replay.faults)
            self.summary = {"valid": not first, "violations": int(first),
                            "violations_by_cause": {"overran-paused": 1} if first else {}}
            self.run_dir = a_run(root, f"20261203T11{len(made):04d}", valid=not first)
            store.link_latest(root, self.run_dir)  # as every run does
            self.interrupted, self.signal = False, None
            made.append(self.run_dir)
    monkeypatch.setattr(runner, "run", lambda spec, progress, replay: Outcome(replay))
    store.link_latest(root, orig)
    monkeypatch.chdir(tmp_path)  # the run dir given as the user would: relative, and by the link that each replay moves
    assert cmd.shrink.main(["store/latest", "--trials", "1", "--rate", "1"], standalone_mode=False) == 0
    assert not any((m / "shrink.json").exists() for m in made)
    doc = json.loads((orig / "shrink.json").read_text())
    best = Path(doc["best_run"])
    assert best.is_absolute() and best in made and doc["of"] == str(orig.resolve())
    assert len(doc["start"]["faults"]) == 2 and len(doc["best"]["faults"]) == 1
    assert links(orig / "report.html")[0] == best / "report.html"
    assert links(best / "report.html") == [orig.resolve() / "report.html"]
    assert "2 faults -&gt; 1, reproduced in 1 of 1" in (best / "report.html").read_text()
