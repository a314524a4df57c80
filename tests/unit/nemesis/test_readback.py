"""The pure part of nemesis/readback.py: what two reads of a lock key say the servers did."""

from __future__ import annotations

from types import SimpleNamespace

from nemesis.readback import acted, outcome, readable, words


def st(t, **nodes):
    return {**nodes, "t": t}


def test_a_release_acted_on_leaves_the_key_gone_and_one_not_acted_on_leaves_it():
    before = st(0.0, n1={"value": "v", "pttl_ms": 900})
    assert acted("release", "v", before, st(0.1, n1=None)) is True
    assert acted("release", "v", before, st(0.1, n1={"value": "v", "pttl_ms": 800})) is False
    assert acted("release", "v", before, st(0.1, n1={"value": "w", "pttl_ms": 2000})) is True  # gone, taken by another


def test_a_key_that_may_have_expired_or_was_not_the_holders_cannot_tell():
    assert acted("release", "v", st(0.0, n1={"value": "v", "pttl_ms": 50}), st(0.1, n1=None)) is None
    assert acted("release", "v", st(0.0, n1=None), st(0.1, n1=None)) is None
    assert acted("release", "v", st(0.0, n1={"value": "x", "pttl_ms": 900}), st(0.1, n1=None)) is None
    assert acted("release", "v", st(0.0, n1={"value": "v", "pttl_ms": 900}), st(0.1, n1="error: TimeoutError")) is None


def test_a_renew_acted_on_moves_the_expiry_later():
    before = st(0.0, n1={"value": "v", "pttl_ms": 500})
    assert acted("renew", "v", before, st(0.2, n1={"value": "v", "pttl_ms": 1990})) is True
    assert acted("renew", "v", before, st(0.2, n1={"value": "v", "pttl_ms": 300})) is False
    assert acted("renew", "v", before, st(0.2, n1=None)) is None


def test_several_nodes_agree_or_cannot_tell():
    before = st(0.0, n1={"value": "v", "pttl_ms": 900}, n2={"value": "v", "pttl_ms": 900})
    assert acted("release", "v", before, st(0.1, n1=None, n2=None)) is True
    assert acted("release", "v", before, st(0.1, n1=None, n2={"value": "v", "pttl_ms": 800})) is None


def test_words_and_outcomes():
    assert words(st(1.0, n2=None, n1={"value": "v", "pttl_ms": -1})) == "n1: key present (no expiry), n2: key absent"
    assert outcome("release", False) == "not released (key present)" and outcome("renew", True).startswith("renewed")
    assert outcome("renew", None) == "cannot tell"


def test_only_valkey_is_read_back():
    assert readable([SimpleNamespace(kind="valkey")]) is None
    assert readable([SimpleNamespace(kind="etcd")]) == "not verified: no read-back for etcd yet (valkey only)"
