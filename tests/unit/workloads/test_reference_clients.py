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


def test_java_curator_declares_its_recheck_and_chaos_list_shows_it():
    java = reference_client("java-curator")
    assert [o.name for o in java.options] == ["recheck_node_after_acquire"]
    said = "-o recheck_node_after_acquire (true|false, default false): after acquire(), read the lock node"
    assert said in java.what
    out = chaos("list").stdout
    assert said in out.split("  java-curator ", 1)[1].split("  node-redlock ", 1)[0], out


def test_chaos_list_options_shows_each_reference_client_option_with_its_type_default_and_help():
    out = chaos("list", "--options").stdout.split("options (-o NAME=VALUE):", 1)[1]
    for c in REFERENCE_CLIENTS:
        for o in c.options:
            assert f"  {o.name} (true|false, default False; client {c.name}): {o.help}\n" in out, (o.name, out)
