"""Grudge builders: shapes, symmetry, determinism. Pure: no network is touched."""

import random

import pytest

from harness.cluster import grudge as g
from harness.core.errors import BadArgument

NODES5 = ["n1", "n2", "n3", "n4", "n5"]


def views(grudge, nodes):
    """What each node can reach once every grudge entry is applied as a two-way cut."""
    cut = {a: set(grudge.get(a, ())) | {b for b, bs in grudge.items() if a in bs} for a in nodes}
    return {a: frozenset(set(nodes) - cut[a]) for a in nodes}


def assert_symmetric(grudge):
    for a, bs in grudge.items():
        assert a not in bs, f"{a} hates itself"
        for b in bs:
            assert a in grudge.get(b, ()), f"{a} hates {b} but not the other way round"


def test_complete_grudge_islands():
    gr = g.complete_grudge([["n1"], ["n2", "n3"], ["n4"]])
    assert gr == {"n1": {"n2", "n3", "n4"}, "n2": {"n1", "n4"}, "n3": {"n1", "n4"},
                  "n4": {"n1", "n2", "n3"}}
    assert all(isinstance(v, frozenset) for v in gr.values())
    assert g.describe(gr) == "n1 | n2 n3 | n4"


def test_complete_grudge_rejects_a_node_in_two_components():
    with pytest.raises(BadArgument, match="'n2' is listed twice"):
        g.complete_grudge([["n1", "n2"], ["n2", "n3"]])


def test_isolate():
    gr = g.isolate(NODES5, "n3")
    assert_symmetric(gr)
    assert gr["n3"] == {"n1", "n2", "n4", "n5"}
    assert gr["n1"] == {"n3"}
    assert g.describe(gr) == "n1 n2 n4 n5 | n3"
    with pytest.raises(BadArgument, match="not one of"):
        g.isolate(NODES5, "n9")


@pytest.mark.parametrize("n,first", [(2, 1), (3, 2), (4, 2), (5, 3), (6, 3)])
def test_halves_first_is_ceil(n, first):
    nodes = [f"n{i}" for i in range(1, n + 1)]
    gr = g.halves(nodes)
    assert_symmetric(gr)
    v = views(gr, nodes)
    assert v["n1"] == frozenset(nodes[:first])
    assert v[nodes[-1]] == frozenset(nodes[first:])


def test_halves_of_one_node_is_no_cut():
    assert g.halves(["n1"]) == {}
    assert g.describe({}, ["n1"]) == "fully connected"


def test_random_halves_is_seeded_and_leaves_input_alone():
    nodes = list(NODES5)
    a = g.random_halves(nodes, random.Random(7))
    b = g.random_halves(nodes, random.Random(7))
    assert a == b and nodes == NODES5
    assert_symmetric(a)
    sizes = sorted(len(s) for s in set(views(a, NODES5).values()))
    assert sizes == [2, 3]
    shapes = {g.describe(g.random_halves(NODES5, random.Random(s))) for s in range(50)}
    assert len(shapes) > 3  # the seed really changes the shape


@pytest.mark.parametrize("n", [4, 5, 6, 7, 8, 9])
def test_majorities_ring_every_node_sees_a_distinct_majority(n):
    nodes = [f"n{i}" for i in range(1, n + 1)]
    for seed in range(20):
        gr = g.majorities_ring(nodes, random.Random(seed))
        assert_symmetric(gr)
        v = views(gr, nodes)
        assert all(len(view) >= n // 2 + 1 for view in v.values()), v
        assert all(node in view for node, view in v.items())
        assert len(set(v.values())) == n, "two nodes see the same majority"
        assert any(gr.values()), "no cut at all"


def test_majorities_ring_five_nodes_views_are_three_of_five():
    gr = g.majorities_ring(NODES5, random.Random(1))
    v = views(gr, NODES5)
    assert sorted(len(x) for x in v.values()) == [3] * 5
    assert len(set(v.values())) == 5
    assert " sees " in g.describe(gr)  # not islands


def test_majorities_ring_three_nodes_is_a_line():
    nodes = ["n1", "n2", "n3"]
    gr = g.majorities_ring(nodes, random.Random(3))
    assert_symmetric(gr)
    v = views(gr, nodes)
    assert sorted(len(x) for x in v.values()) == [2, 2, 3]
    assert len(set(v.values())) == 3
    assert g.majorities_ring(["n1", "n2"], random.Random(0)) == {}


def test_bridge():
    for seed in range(20):
        gr = g.bridge(NODES5, random.Random(seed))
        assert_symmetric(gr)
        v = views(gr, NODES5)
        middle = [n for n, view in v.items() if len(view) == 5]
        assert len(middle) == 1, v
        sides = {view - {middle[0]} for n, view in v.items() if n != middle[0]}
        assert sorted(len(s) for s in sides) == [2, 2]
    with pytest.raises(BadArgument, match="at least 3 nodes"):
        g.bridge(["n1", "n2"], random.Random(0))


def test_cut_client():
    gr = g.cut_client("c1", NODES5, ["n2", "n4"])
    assert_symmetric(gr)
    assert gr["c1"] == {"n2", "n4"}
    v = views(gr, NODES5 + ["c1"])
    assert len(v["c1"]) == 4  # itself and the 3 servers still reachable
    for s in NODES5:
        assert set(NODES5) <= v[s], "servers must still reach each other"
    assert g.cut_client("c1", NODES5, []) == {}
    assert g.cut_client("c1", NODES5, NODES5)["c1"] == set(NODES5)
    with pytest.raises(BadArgument, match="not one of"):
        g.cut_client("c1", NODES5, ["n9"])
    with pytest.raises(BadArgument, match="also listed as a server"):
        g.cut_client("n1", NODES5, ["n2"])


def test_cut_client_island():
    gr = g.cut_client("c1", NODES5, ["n1", "n2", "n3"], island=True)
    assert_symmetric(gr)
    v = views(gr, NODES5 + ["c1"])
    assert v["c1"] == {"c1", "n4", "n5"} and v["n4"] == {"c1", "n4", "n5"}
    assert v["n1"] == {"n1", "n2", "n3"}, "the cut servers are an island of their own"


def test_describe_sorts_naturally_and_adds_unmentioned_nodes():
    gr = g.complete_grudge([["n10", "n2"], ["n1"]])
    assert g.describe(gr) == "n1 | n2 n10"
    # n3 is in no grudge, so it hears both sides: not islands any more.
    assert g.describe(g.isolate(["n1", "n2"], "n1"), ["n1", "n2", "n3"]) == \
        "n1 sees n1 n3; n2 sees n2 n3; n3 sees n1 n2 n3"
