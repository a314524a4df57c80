"""store/index.html lists `chaos audit` cards (store/audit/<timestamp>/audit.json) above the
runs: client, FAIL count and the failed promises, linked to audit.html; an unreadable or
linked-out card says so; a store without audits shows no audits table."""

import json
import os

from results.index import audits, render_index


def card(store, stamp, rows, client="python3 client.py", **extra):
    d = store / "audit" / stamp
    d.mkdir(parents=True)
    (d / "audit.json").write_text(json.dumps({"client": client, "rows": rows, "runs": [{}, {}], **extra}))
    (d / "audit.html").write_text("<html></html>")
    return d


def row(title, status):
    return {"title": title, "status": status}


def test_audits_are_listed_newest_first_with_their_failed_promises(tmp_path):
    card(tmp_path, "20261206T080000", [row("no two holders", "PASS"), row("timeouts honoured", "NOT TESTED")])
    card(tmp_path, "20261206T090000", [row("no two holders", "FAIL"), row("expiry <after> death", "FAIL")],
         client="node <x>.js", interrupted="Ctrl-C")
    found = audits(tmp_path)
    assert [a["run"] for a in found] == ["20261206T090000", "20261206T080000"]
    page = render_index(tmp_path)
    assert "<h2>Audits" in page and "2 FAIL · INTERRUPTED" in page and "expiry &lt;after&gt; death" in page
    assert "node &lt;x&gt;.js" in page and 'href="audit/20261206T090000/audit.html"' in page
    assert ">PASS<" in page and "1 pass · 1 not tested · 2 runs" in page
    assert page.index("<h2>Audits") < page.index("<h2>Runs")


def test_an_unreadable_or_linked_out_card_is_a_row_that_says_so(tmp_path):
    card(tmp_path, "20261206T080000", [])
    (tmp_path / "audit" / "20261206T080000" / "audit.json").write_text("{not json")
    d = tmp_path / "audit" / "20261206T090000"
    d.mkdir()
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"client": "SECRET", "rows": []}))
    os.symlink(secret, d / "audit.json")
    page = render_index(tmp_path)
    assert page.count("audit.json unreadable") == 2 and "SECRET" not in page


def test_a_store_without_audits_has_no_audits_table(tmp_path):
    assert audits(tmp_path) == [] and "<h2>Audits" not in render_index(tmp_path)
