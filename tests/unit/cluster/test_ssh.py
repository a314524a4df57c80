"""The ssh provider's pure parts: host names, flags, quoting, the helper's path rule."""

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from harness.commands.cliargs import ssh_settings
from harness.cluster import ssh as S
from harness.cluster import ssh_helper as H
from harness.core.errors import BadArgument
from tests.conftest import chaos


def test_hosts_take_a_user_and_a_port_each_or_the_defaults(tmp_path):
    key = tmp_path / "k"
    key.write_text("x")
    hosts = S.parse_hosts({"hosts": ["198.18.7.11", "ops@198.18.7.12:2222", "[fd00::1]:23"], "user": "admin",
                           "port": 2200, "key": str(key)})
    assert [(h.name, h.user, h.address, h.port) for h in hosts] == [
        ("h1", "admin", "198.18.7.11", 2200), ("h2", "ops", "198.18.7.12", 2222), ("h3", "admin", "fd00::1", 23)]
    assert all(h.key == str(key) for h in hosts)


@pytest.mark.parametrize("ssh, words", [
    ({"hosts": []}, "needs --hosts"),
    ({"hosts": ["a b"]}, "is not [user@]address[:port]"),
    ({"hosts": ["h:70000"]}, "is not [user@]address[:port]"),
    ({"hosts": ["h;rm -rf /"]}, "is not [user@]address[:port]"),
    ({"hosts": ["h1", "h1"]}, "named twice"),
    ({"hosts": ["h1"], "port": 0}, "--ssh-port must be"),
    ({"hosts": ["h1"], "key": "/nonexistent/key"}, "--ssh-key /nonexistent/key is not a file"),
])
def test_bad_hosts_are_one_sentence(ssh, words):
    with pytest.raises(BadArgument, match=words.replace("[", r"\[").replace("]", r"\]")):
        S.parse_hosts(ssh)


def test_hosts_file_skips_comments_and_blank_lines(tmp_path):
    f = tmp_path / "hosts"
    f.write_text("# the lab\n198.18.7.11\n\n  root@198.18.7.12   # second\n")
    assert ssh_settings("ssh", f"@{f}", None, None, None, None)["hosts"] == ["198.18.7.11", "root@198.18.7.12"]


def test_ssh_flags_go_with_cluster_ssh_only():
    assert ssh_settings("local", None, None, None, None, None) == {}
    with pytest.raises(BadArgument, match="--ssh-user goes with --cluster ssh"):
        ssh_settings("local", None, "ops", None, None, None)
    with pytest.raises(BadArgument, match="needs --hosts"):
        ssh_settings("ssh", None, None, None, None, None)


def test_cli_refuses_ssh_flags_without_the_provider():
    r = chaos("run", "--backend", "redis", "--hosts", "198.18.7.11", "--time-limit", "1")
    assert r.returncode == 254 and "--hosts goes with --cluster ssh" in r.stderr and "Traceback" not in r.stderr
    r = chaos("run", "--backend", "redis", "--cluster", "ssh", "--hosts", "198.18.7.11", "--nemesis", "partition-client",
              "--time-limit", "1")
    assert r.returncode == 254 and "partition-client" in r.stderr and "Traceback" not in r.stderr


def test_a_remote_command_is_quoted_for_the_hosts_shell(tmp_path, monkeypatch):
    seen = {}

    def fake_run(argv, **kw):  # records the argv; no ssh is started
        seen["argv"] = argv
        return subprocess.CompletedProcess(argv, 0, b"", b"")

    monkeypatch.setattr(S.subprocess, "run", fake_run)
    host = S.Host(name="h1", address="198.18.7.11", user="ops", port=2222)
    S.Ssh(host, tmp_path, "abc123").run(["sh", "-c", "echo 'x'; $(id)"])
    argv = seen["argv"]
    assert argv[0] == "ssh" and "ops@198.18.7.11" in argv and argv[argv.index("-p") + 1] == "2222"
    assert shlex.split(argv[-1]) == ["sudo", "-n", "--", "sh", "-c", "echo 'x'; $(id)"]  # not root: sudo, one argv
    assert f"ControlPath={tmp_path}/%C" in argv and "BatchMode=yes" in argv


def test_the_helper_stays_inside_its_runs_directory():
    assert H.inside("abc123", "n1/zoo.cfg") == f"{H.BASE}/{H.HOST}/abc123/n1/zoo.cfg"
    for bad in ("../abc124/x", "/etc/passwd", "n1/../../x"):
        with pytest.raises(H.Refused):
            H.inside("abc123", bad)


def test_the_helper_refuses_what_is_not_a_run_id():
    for where in ("../x", "abc123", "abc123/../h1", "abc123/x1"):
        r = subprocess.run([sys.executable, str(S.HELPER), where, "down"], capture_output=True, text=True)
        assert r.returncode == 2 and "usage" in r.stderr, where


def test_the_shipped_timewarp_needs_nothing_of_chaoslock():
    src = S.timewarp_source().decode()
    assert "from harness" not in src and "import harness" not in src
    compile(src, "timewarp.py", "exec")
    assert Path(S.HELPER).read_text().count("import harness") == 0
