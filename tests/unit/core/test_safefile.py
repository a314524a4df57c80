"""harness/core/safefile.py: reads stay inside their dir, writes replace a name instead of
writing through a link (issue 25)."""

from __future__ import annotations

import os
import threading

import pytest

from harness.core.errors import BadArgument
from harness.core.safefile import atomic_open, inside, is_inside, open_inside, read_inside, write_atomic


@pytest.fixture
def dirs(tmp_path):
    root, out = tmp_path / "run", tmp_path / "outside"
    root.mkdir()
    out.mkdir()
    (out / "victim").write_text("precious")
    return root, out


def test_inside_accepts_files_and_links_that_stay_inside(dirs):
    root, _ = dirs
    (root / "a").mkdir()
    (root / "a" / "f").write_text("x")
    (root / "latest").symlink_to("a")  # like store/latest
    assert inside(root, root / "latest" / "f") == (root / "a" / "f").resolve()
    assert inside(root, root) == root.resolve()
    assert inside(root, root / "not-yet") == (root / "not-yet").resolve()  # need not exist
    assert is_inside(root, root / "a" / ".." / "a" / "f")


@pytest.mark.parametrize("make", [
    lambda root, out: (root / "link").symlink_to(out / "victim"),
    lambda root, out: (root / "link").symlink_to("/"),
    lambda root, out: (root / "link").symlink_to("../outside/victim"),
])
def test_inside_refuses_a_link_out_naming_the_file_and_the_fix(dirs, make):
    root, out = dirs
    make(root, out)
    with pytest.raises(BadArgument, match=r"resolves to .*outside .*replace the link"):
        inside(root, root / "link")
    assert not is_inside(root, root / "link")
    assert not is_inside(root, root / ".." / "outside" / "victim")


def test_a_sibling_with_a_common_prefix_is_outside(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run2").mkdir()
    assert not is_inside(tmp_path / "run", tmp_path / "run2" / "f")


def test_read_inside_reads_a_regular_file(dirs):
    root, _ = dirs
    (root / "f").write_bytes(b"\x00bytes")
    assert read_inside(root, root / "f") == b"\x00bytes"
    with open_inside(root, root / "f") as f:
        assert f.read() == b"\x00bytes"
    with pytest.raises(FileNotFoundError):
        read_inside(root, root / "missing")


def test_read_inside_refuses_a_link_out(dirs):
    root, out = dirs
    (root / "nodes").symlink_to(out)  # a directory link out: every file under it is outside
    with pytest.raises(BadArgument, match="outside"):
        read_inside(root, root / "nodes" / "victim")


def test_read_refuses_a_fifo_without_blocking(dirs):
    root, _ = dirs
    os.mkfifo(root / "fifo")
    result = []

    def read():
        try:
            read_inside(root, root / "fifo")
        except BadArgument as e:
            result.append(e)

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(5)
    assert not t.is_alive(), "reading a FIFO blocked"
    assert result and "not a regular file" in str(result[0])
    with pytest.raises(BadArgument, match="not a regular file"):
        open_inside(None, root)  # a directory is not a regular file either


def test_open_inside_without_root_only_checks_the_kind(dirs):
    _, out = dirs
    with open_inside(None, out / "victim") as f:  # a file the user named directly
        assert f.read() == b"precious"


@pytest.mark.parametrize("data", ["text ✓", b"\x00bytes"])
def test_write_atomic_replaces_a_link_instead_of_writing_through_it(dirs, data):
    root, out = dirs
    (root / "ops.csv").symlink_to(out / "victim")
    write_atomic(root / "ops.csv", data, root=root)
    assert (out / "victim").read_text() == "precious"
    assert not (root / "ops.csv").is_symlink()
    got = (root / "ops.csv").read_bytes()
    assert got == (data.encode() if isinstance(data, str) else data)
    assert sorted(p.name for p in root.iterdir()) == ["ops.csv"]  # no temp file left


def test_write_atomic_ignores_links_planted_at_temp_names(dirs):
    root, out = dirs
    for name in ("report.html.tmp", ".report.html.tmp", "report.tmp"):
        (root / name).symlink_to(out / "victim")
    write_atomic(root / "report.html", "<html>")
    assert (out / "victim").read_text() == "precious"
    assert (root / "report.html").read_text() == "<html>"


def test_write_atomic_refuses_a_parent_that_leads_out(dirs):
    root, out = dirs
    (root / "nodes").symlink_to(out)
    with pytest.raises(BadArgument, match="outside"):
        write_atomic(root / "nodes" / "victim", "x", root=root)
    assert (out / "victim").read_text() == "precious"
    assert sorted(p.name for p in out.iterdir()) == ["victim"]


def test_write_atomic_onto_a_directory_is_one_sentence(dirs):
    root, _ = dirs
    (root / "report.html").mkdir()
    with pytest.raises(BadArgument, match=r"report\.html is a directory; remove it"):
        write_atomic(root / "report.html", "x")
    assert sorted(p.name for p in root.iterdir()) == ["report.html"]


def test_atomic_open_streams_and_keeps_the_old_file_on_error(dirs):
    root, _ = dirs
    with atomic_open(root / "m.csv", "w", root=root, newline="") as f:
        f.write("a,b\r\n1,2\r\n")
    assert (root / "m.csv").read_bytes() == b"a,b\r\n1,2\r\n"
    with pytest.raises(RuntimeError):
        with atomic_open(root / "m.csv", "w") as f:
            f.write("half")
            raise RuntimeError("writer failed")
    assert (root / "m.csv").read_bytes() == b"a,b\r\n1,2\r\n"
    assert sorted(p.name for p in root.iterdir()) == ["m.csv"]


def test_written_files_get_the_usual_permissions(dirs):
    root, _ = dirs
    old = os.umask(0o022)
    try:
        write_atomic(root / "report.html", "x")
    finally:
        os.umask(old)
    assert (root / "report.html").stat().st_mode & 0o777 == 0o644  # readable as before, not mkstemp's 0600
