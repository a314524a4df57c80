"""JUnit XML for CI: one <testcase> per verdict, so a pipeline shows what a run found.

A case is {"name", "classname", "valid", "message", "time_s"}, and optionally "skipped": the
reason it was not tested (a <skipped>, neither a pass nor a failure; `chaos audit`'s NOT TESTED). `valid` is read by
parse_valid (harness/core/contracts/checker.py): true passes; false becomes a <failure> (a violation
was found); "unknown", and anything that is not a verdict ("False", "maybe", "", 1, None),
becomes an <error>, because what could not be decided has not passed (a verdict is never
rounded up to True). The XML is built with ElementTree, which escapes markup, and
characters XML 1.0 cannot hold at all (NUL, most C0 controls, lone surrogates) are
replaced first, so a server's error text cannot make the file unreadable.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Sequence

from harness.core.contracts.checker import parse_valid
from harness.core.safefile import atomic_open

_NOT_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _clean(value: Any) -> str:
    return _NOT_XML.sub("\ufffd", "" if value is None else str(value))


def _seconds(v: Any) -> str:
    try:
        return f"{max(float(v), 0.0):.3f}"
    except (TypeError, ValueError):
        return "0.000"


def write_junit(path: str | os.PathLike, cases: Sequence[dict], *, suite: str = "chaoslock") -> Path:
    """Write `cases` as a JUnit XML file (<testsuites><testsuite>...); return its path."""
    read = [parse_valid(c.get("valid")) for c in cases]
    skips = [c.get("skipped") is not None for c in cases]
    failures = sum(1 for v, skip in zip(read, skips) if v is False and not skip)
    errors = sum(1 for v, skip in zip(read, skips) if not isinstance(v, bool) and not skip)
    total = sum(float(_seconds(c.get("time_s"))) for c in cases)
    root = ET.Element("testsuites", name=_clean(suite), tests=str(len(cases)), failures=str(failures),
                      errors=str(errors), time=f"{total:.3f}")
    ts = ET.SubElement(root, "testsuite", name=_clean(suite), tests=str(len(cases)), failures=str(failures),
                       errors=str(errors), skipped=str(sum(skips)), time=f"{total:.3f}")
    for c, valid, skip in zip(cases, read, skips):
        tc = ET.SubElement(ts, "testcase", name=_clean(c.get("name", "")), classname=_clean(c.get("classname", suite)),
                           time=_seconds(c.get("time_s")))
        message = _clean(c.get("message") or "")
        first_line = message.splitlines()[0] if message else ""
        if skip:
            ET.SubElement(tc, "skipped", message=_clean(c["skipped"])[:500])
        elif valid is False:
            el = ET.SubElement(tc, "failure", message=first_line[:500] or "invalid", type="invalid")
            el.text = message
        elif valid is not True:
            el = ET.SubElement(tc, "error", message=first_line[:500] or "unknown: could not decide", type="unknown")
            el.text = message
        elif message:
            ET.SubElement(tc, "system-out").text = message
    ET.indent(root)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(out, "wb") as f:  # never through a link, never half written
        ET.ElementTree(root).write(f, encoding="utf-8", xml_declaration=True)
    return out


def cases_from_doc(doc: dict, *, classname: str | None = None, time_s: float | None = None) -> list[dict]:
    """One case per checker of a results.json doc, named after it; classname the test name.

    A convenience for `--junit`: the verdict of each checker, with its error or the headline
    numbers as the message.
    """
    s = doc.get("summary") or {}
    cls = classname or "chaoslock.{}.{}".format(s.get("backend", "run"), "+".join(map(str, s.get("nemesis") or ["none"])))
    cases = []
    for name, r in (doc.get("checkers") or {}).items():
        summ = r.get("summary") or {}
        msg = r.get("error") or ", ".join(f"{k}={v}" for k, v in summ.items() if not isinstance(v, (list, dict)))
        cx = (r.get("details") or {}).get("counterexample")
        if isinstance(cx, dict):
            msg += f"\ncounterexample on key {cx.get('key')!r}: {cx.get('op')}"
        cases.append({"name": name, "classname": cls, "valid": r.get("valid"), "message": msg,
                      "time_s": (summ.get("elapsed_ms") or 0) / 1000 if time_s is None else time_s})
    return cases


def cases_from_runs(summaries: Sequence[dict], *, of: int | None = None) -> list[dict]:
    """One case per run of `chaos run --repeat M` ("run k of M"), its verdict the run's.

    The message names what the run found (its violations by cause, stale writes, stuck and
    starved counts, why it is unknown) and its run dir, so a failing case points at the run
    to open; `of` is M (default: how many runs there are, less when the repeat was cut short).
    """
    total = len(summaries) if of is None else of
    cases = []
    for n, s in enumerate(summaries, 1):
        cls = "chaoslock.{}.{}".format(s.get("backend", "run"), "+".join(map(str, s.get("nemesis") or ["none"])))
        said = [f"{k}={s[k]}" for k in ("violations", "stale_writes_accepted", "lost_updates", "stuck", "starved",
                                           "handover_stalls", "acquires_late", "acquires_early")
                if s.get(k) not in (None, 0)]
        said += [f"{cause}={k}" for cause, k in (s.get("violations_by_cause") or {}).items()]
        if s.get("unknown_reason"):
            said.append(f"unknown: {s['unknown_reason']}")
        valid = s.get("valid")
        if s.get("interrupted") is True:
            said.append("interrupted: the verdict covers only the part that ran")
            if valid is True:
                valid = "unknown"  # a run cut short never passes (what it proved wrong still fails)
        cases.append({"name": f"run {n} of {total} (seed {s.get('seed')})", "classname": cls, "valid": valid,
                      "message": "; ".join(said or ["nothing found"]) + f"\nrun_dir={s.get('run_dir', '')}",
                      "time_s": s.get("duration_s") or 0})
    for n in range(len(summaries) + 1, total + 1):  # the runs an interrupt left undone: never a pass
        cases.append({"name": f"run {n} of {total}", "classname": "chaoslock.repeat", "valid": "unknown",
                      "message": "not run: the repeat was interrupted before it", "time_s": 0})
    return cases
