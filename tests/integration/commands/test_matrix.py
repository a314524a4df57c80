"""`chaos matrix` end to end on real servers: 2 backends x 2 nemeses x 2 fencing x 1 seed.

One real matrix run (8 runs of 20 s, about 4 minutes here); everything else re-judges its
matrix.csv with `--recheck`, which runs nothing: the exit code follows the expectations, a
flipped expectation makes exactly that cell a mismatch, and matrix.html renders in Chromium
with one cell per combination. The first tests need no servers (expectations parsing,
judging, argument errors) and are not marked integration.
"""

import json
import re
import shutil
import subprocess
import time
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.core import plugins
from harness.core.errors import BadArgument
from harness.commands.matrix.expectations import Expectations
from harness.commands.matrix.judge import judge_cell
from tests.conftest import ROOT, chaos, installed

BACKENDS = ["redis"] if "redis" in plugins.backend_names() else ["redlock"]
NEMESES = ["none", "pause-holder"]
CHROMIUM = "/usr/bin/chromium"


def dump_toml(doc: dict) -> str:
    """Enough TOML for expectations: [table] of strings, [table.sub] of strings."""
    out = []
    for name, t in doc.items():
        out.append(f"[{name}]")
        out += [f'{k} = "{v}"' for k, v in t.items() if isinstance(v, str)]
        for sub, st in t.items():
            if isinstance(st, dict):
                out.append(f'[{name}."{sub}"]')
                out += [f'{k} = "{v}"' for k, v in st.items()]
    return "\n".join(out) + "\n"


def _json(r: subprocess.CompletedProcess) -> dict:
    lines = [line for line in r.stdout.splitlines() if line.startswith("{")]
    assert lines, f"no JSON on stdout; exit {r.returncode}; stderr: {r.stderr[-3000:]}"
    return json.loads(lines[-1])


GOOD = """# comment
[default]
expect = "either"
[redlock]
nofence = "safe"
[redlock.clock-skew]
nofence = "unsafe"
[redis.pause-holder]
nofence = "unsafe"
fenced = "safe"
[redis."pause+partition"]
expect = "unsafe"
"""


def test_expectations_fall_back_from_cell_to_backend_to_default(tmp_path):
    p = tmp_path / "e.toml"
    p.write_text(GOOD)
    e = Expectations.load(p)
    assert e.expect("redlock", "clock-skew", False) == "unsafe"
    assert e.expect("redlock", "none", False) == "safe"
    assert e.expect("redis", "pause-holder", True) == "safe" and e.expect("redis", "pause-holder", False) == "unsafe"
    assert e.expect("redis", "pause+partition", True) == "unsafe"
    assert e.expect("etcd", "none", True) == "either"
    assert Expectations.load(None).expect("redis", "none", False) == "either"


@pytest.mark.parametrize("text, message", [
    ('[redlok.none]\nnofence = "safe"\n', r"e.toml:1 \[redlok\]: unknown backend 'redlok'; choose one of: "),
    ('[redis]\n\n[redis.pause-holdr]\nfenced = "safe"\n', r"e.toml:3 \[redis.pause-holdr\]: unknown nemesis 'pause-holdr'"),
    ('[redis.none]\nfenced = "save"\n', r"e.toml:2 \[redis.none\] fenced: 'save' is not a verdict; use one of: safe, unsafe"),
    ('[redis.none]\nfencing = "safe"\n', r"e.toml:2 \[redis.none\] fencing: unknown key 'fencing'; use expect, nofence, fenced, unexplained, stuck, starved"),
    ('[default]\nexpect = "safe"\n[redis.none.x]\nexpect = "safe"\n', r"tables nest only as \[backend.nemesis\]"),
    ('[redis.none\nfenced = "safe"\n', r"is not valid TOML \(.*line 1"),
    ('expect = "safe"\n', r"e.toml:1 expect: top-level keys must be tables"),
    ('[default]\nunexplained = "none"\n', r"e.toml:2 \[default\] unexplained: unexplained is how many UNEXPLAINED"),
    ('[redis]\nunexplained = -1\n', r"unexplained is how many UNEXPLAINED violations \(harness/checker/causes.py\) a run may have"),
])
def test_malformed_expectations_name_the_line(tmp_path, text, message):
    p = tmp_path / "e.toml"
    p.write_text(text)
    with pytest.raises(BadArgument, match=message):
        Expectations.load(p)


@pytest.mark.parametrize("valids, expected, observed, matched", [
    (["true", "true"], "safe", "safe", True),
    (["true", "false"], "safe", "unsafe", False),
    (["true", "false"], "unsafe", "unsafe", True),  # one proven violation is enough
    (["true", "true"], "unsafe", "safe", False),
    (["false", "unknown"], "unsafe", "unsafe", False),
    (["unknown"], "either", "unknown", True),
    (["true", "crash"], "either", "crash", False),  # a crash never matches
    (["unsupported"], "either", "unsupported", False),
    (["unsupported"], "unsupported", "unsupported", True),
    (["true"], "unsupported", "safe", False),
])
def test_judging_a_cell(valids, expected, observed, matched):
    assert judge_cell(valids, expected) == (observed, matched)


def test_an_unexplained_violation_fails_even_a_cell_expected_unsafe(tmp_path):
    from harness.commands.matrix.judge import rejudge

    p = tmp_path / "e.toml"
    p.write_text('[default]\nunexplained = 0\n[redis]\npause-holder.nofence = "unsafe"\n[etcd]\nunexplained = 2\n')
    e = Expectations.load(p)
    assert e.unexplained("redis", "pause-holder") == 0 and e.unexplained("etcd", "none") == 2
    assert Expectations.load(None).unexplained("redis", "none") is None
    rows = [{"backend": "redis", "nemesis": "pause-holder", "fencing": "off", "seed": s, "valid": "false",
             "unexplained": u} for s, u in ((1, "0"), (2, "1"))]
    (cell,) = rejudge(rows, e)
    assert cell["observed"] == "unsafe" and cell["matched"] is False and "UNEXPLAINED" in cell["unexplained_over"]
    assert [r["matched"] for r in rows] == [True, False]
    rows[1]["unexplained"] = ""  # an older matrix.csv without the column
    assert rejudge(rows, e)[0]["matched"] is True


@pytest.mark.parametrize("args, message", [
    (["--backends", "redlok"], "chaos: unknown backend 'redlok'; choose one of: "),
    (["--backends", "redlock", "--nemeses", "partitoin"], "chaos: unknown nemesis 'partitoin'; choose one of: "),
    (["--backends", "redlock", "--fencing", "on"], "nothing to run: every backend asked for lacks fencing tokens"),
    (["--backends", "redlock", "--seeds", "0"], "--seeds"),
])
def test_bad_arguments_exit_254_with_one_sentence(args, message, tmp_path):
    r = chaos("matrix", *args, "--store", str(tmp_path), timeout=60)
    assert r.returncode == 254, r.stdout + r.stderr
    assert message in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "matrix").exists()


def test_malformed_expectations_exit_254(tmp_path):
    p = tmp_path / "e.toml"
    p.write_text('[redis.none]\nfenced = "save"\n')
    r = chaos("matrix", "--backends", "redis", "--expectations", str(p), "--store", str(tmp_path), timeout=60)
    assert r.returncode == 254 and f"{p}:2 [redis.none] fenced: 'save' is not a verdict" in r.stderr, r.stderr


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("matrix")
    exp = tmp / "expectations.toml"
    shutil.copy(ROOT / "expectations.toml", exp)
    t0 = time.monotonic()
    r = chaos("matrix", "--backends", ",".join(BACKENDS), "--nemeses", ",".join(NEMESES), "--fencing", "both",
              "--seeds", "1", "--time-limit", "10", "--parallel", "2", "--expectations", str(exp), "--store", str(tmp / "store"),
              "--junit", str(tmp / "junit.xml"), "--json", timeout=1800)
    wall = time.monotonic() - t0
    print(f"\nchaos matrix wall time: {wall:.0f} s for {BACKENDS} x {NEMESES} x fencing both x 1 seed")
    return tmp, exp, r, _json(r), wall


@pytest.mark.integration
def test_exit_code_follows_the_expectations(ran):
    tmp, exp, r, out, _ = ran
    assert r.returncode == (0 if out["ok"] else 1), r.stderr[-3000:]
    assert not [c for c in out["cells"] if c["observed"] == "crash"], r.stderr[-3000:]
    assert r.returncode == 0, f"cells differ from expectations.toml: {out['mismatches']}\n{r.stderr[-3000:]}"
    combos = {(b, n, f) for b in BACKENDS for n in NEMESES for f in (False, True)}
    seen = {(c["backend"], c["nemesis"], c["fencing"]) for c in out["cells"]}
    skipped = {(s["backend"], s["nemesis"], True) for s in out["skipped"]}
    assert seen | skipped == combos and not seen & skipped
    rows = (Path(out["matrix_dir"]) / "matrix.csv").read_text().splitlines()
    assert len(rows) == 1 + len(seen)
    cases = ET.parse(tmp / "junit.xml").getroot().iter("testcase")
    assert len(list(cases)) == len(seen)


@pytest.mark.integration
def test_recheck_names_a_flipped_cell(ran):
    tmp, exp, r, out, _ = ran
    mdir = out["matrix_dir"]
    same = chaos("matrix", "--recheck", mdir, "--expectations", str(exp))
    assert same.returncode == r.returncode, same.stdout + same.stderr
    cell = next(c for c in out["cells"] if c["observed"] in ("safe", "unsafe"))
    flipped = {"safe": "unsafe", "unsafe": "safe"}[cell["observed"]]
    doc = tomllib.loads(exp.read_text())
    doc.setdefault(cell["backend"], {}).setdefault(cell["nemesis"], {})["fenced" if cell["fencing"] else "nofence"] = flipped
    other = tmp / "flipped.toml"
    other.write_text(dump_toml(doc))
    t0 = time.monotonic()
    r2 = chaos("matrix", "--recheck", mdir, "--expectations", str(other))
    assert time.monotonic() - t0 < 30, "--recheck must not run anything"
    assert r2.returncode == 1, r2.stdout + r2.stderr
    where = f"MISMATCH {cell['backend']} {cell['nemesis']} fencing {'on' if cell['fencing'] else 'off'}: " \
            f"expected {flipped}, observed {cell['observed']}"
    assert where in r2.stdout
    assert r2.stdout.count("MISMATCH ") == 2  # the table row and the explanation, of that one cell only


@pytest.mark.integration
def test_html_has_one_cell_per_combination(ran, tmp_path):
    _, _, _, out, _ = ran
    page = Path(out["matrix_dir"]) / "matrix.html"
    text = page.read_text()
    n = len(BACKENDS) * len(NEMESES) * 2
    assert len(re.findall(r"<td class='cell", text)) == n
    for href in re.findall(r"href='([^']+)'", text):
        assert (page.parent / href).resolve().is_file(), href
    installed(Path(CHROMIUM).exists(), f"{CHROMIUM} (apt package chromium)")
    dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                          "--disable-component-update", "--disable-sync", "--no-first-run",
                          f"--user-data-dir={tmp_path / 'chromium'}", "--dump-dom", page.resolve().as_uri()],
                         capture_output=True, text=True, timeout=120).stdout
    cells = re.findall(r'<td class="cell[^"]*" data-backend="([^"]+)" data-nemesis="([^"]+)" data-fencing="(on|off)"', dom)
    assert len(cells) == n, dom[:2000]
    assert {(b, m, f == "on") for b, m, f in cells} == {(b, m, f) for b in BACKENDS for m in NEMESES for f in (False, True)}
