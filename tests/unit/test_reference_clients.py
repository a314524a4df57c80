"""A reference client's own options (issue 27): declared beside it in workloads/external.py,
off by default, shown by `chaos list`, and passed to the client process as given."""

from harness.core.options import resolve
from tests.conftest import chaos
from workloads.external import REFERENCE_CLIENTS, ExternalClient, reference_client


def test_every_reference_client_option_is_off_by_default():
    for c in REFERENCE_CLIENTS:
        for o in c.options:
            assert o.type is bool and o.default is False, (c.name, o)


def test_go_etcd_declares_its_reread_and_chaos_list_shows_it():
    go = reference_client("go-etcd")
    assert [o.name for o in go.options] == ["reread_after_lock"]
    said = "-o reread_after_lock (true|false, default false): after Lock, Get the lock key"
    assert said in go.what
    out = chaos("list").stdout
    assert said in out.split("  go-etcd ", 1)[1].split("  java-curator ", 1)[0], out


def test_the_reread_reaches_the_client_process_as_given():
    typed, _ = resolve(ExternalClient, [], {"command": "./go-etcd", "servers": "etcd:3", "reread_after_lock": "true"})
    assert ExternalClient(typed).options == {"reread_after_lock": "true"}  # sent in init's options
