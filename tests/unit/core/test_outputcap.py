"""What a child writes is kept up to a cap: its first bytes and its last, with a note."""

import os

from harness.core.outputcap import CappedLog, cap_file, pump


def test_a_flood_keeps_its_head_and_its_tail_and_says_how_much_was_dropped(tmp_path):
    log = CappedLog(str(tmp_path / "err"), head=1000, tail=500)
    for i in range(10_000):
        log.write(f"{i:09d}\n")
    log.close()
    data = (tmp_path / "err").read_bytes()
    assert data.startswith(b"000000000\n") and data.endswith(b"000009999\n")
    assert b"bytes of this output were dropped here" in data
    assert len(data) < 1000 + 500 + 200
    dropped = int(data.split(b"[chaoslock: ")[1].split(b" bytes")[0].replace(b",", b""))
    assert dropped + 1000 + 500 == 100_000


def test_output_within_the_cap_is_kept_whole_with_no_note(tmp_path):
    log = CappedLog(str(tmp_path / "err"), head=1000, tail=500)
    log.write(b"a" * 1200)
    log.write("b" * 100)
    log.close()
    assert (tmp_path / "err").read_bytes() == b"a" * 1200 + b"b" * 100
    log.write("after close is ignored")


def test_a_pipe_is_read_to_its_end_whatever_is_kept(tmp_path):
    r, w = os.pipe()
    t = pump(r, CappedLog(str(tmp_path / "out"), head=10, tail=10), name="test")
    os.write(w, b"0123456789" * 1000)  # more than a pipe holds: the pump must keep reading
    os.close(w)
    t.join(5)
    assert not t.is_alive()
    data = (tmp_path / "out").read_bytes()
    assert data.startswith(b"0123456789") and data.endswith(b"0123456789") and b"dropped" in data


def test_a_finished_log_is_cut_in_place_and_a_link_is_left_alone(tmp_path):
    big = tmp_path / "n1.log"
    big.write_bytes(b"H" * 100 + b"M" * 10_000 + b"T" * 100)
    assert cap_file(big, head=100, tail=100) == 10_000
    data = big.read_bytes()
    assert data.startswith(b"H" * 100) and data.endswith(b"T" * 100) and b"M" not in data
    victim = tmp_path / "victim"
    victim.write_bytes(b"V" * 5000)
    (tmp_path / "link.log").symlink_to(victim)
    assert cap_file(tmp_path / "link.log", head=10, tail=10) == 0 and victim.read_bytes() == b"V" * 5000


def test_a_copied_log_is_capped_and_never_read_through_a_link(tmp_path):
    from harness.core.outputcap import copy_capped

    src = tmp_path / "server.log"
    src.write_bytes(b"S" * 100 + b"M" * 5000 + b"E" * 100)
    assert copy_capped(src, tmp_path / "copy.log", head=100, tail=100)
    data = (tmp_path / "copy.log").read_bytes()
    assert data.startswith(b"S" * 100) and data.endswith(b"E" * 100) and b"M" not in data
    secret = tmp_path / "secret"
    secret.write_text("root:x:0:0")
    src.unlink()
    src.symlink_to(secret)  # what a container can do to its bind-mounted log
    assert not copy_capped(src, tmp_path / "leak.log")
    assert not (tmp_path / "leak.log").exists()
