"""Grudges: which hosts must not hear from which, the shape of a network partition.

A grudge maps a host to the set of hosts it must not hear from: {"n1": {"n2"}, ...}. Hosts
not named hear everyone. `Network.partition` applies each entry as a cut in both directions
(DROP in and out, inside the hater's namespace), so a one-sided grudge still cuts the pair
both ways; that is why every builder here returns a symmetric grudge, one whose views
(who a host can still reach) are exactly what the hosts will see.

These are pure functions of their arguments (and of a seeded `random.Random` where named):
same seed, same shape. They never touch the network. Shapes follow Jepsen's
`nemesis.clj`: isolate, halves, random halves, majorities ring, bridge, complete grudge.
"""

from __future__ import annotations

import math
import random
import re
from typing import Iterable, Mapping, Sequence

from harness.core.errors import BadArgument

Grudge = dict[str, frozenset[str]]


def _check(nodes: Sequence[str]) -> list[str]:
    nodes = list(nodes)
    dup = sorted({n for n in nodes if nodes.count(n) > 1})
    if dup:
        raise BadArgument(f"node {dup[0]!r} is listed twice; give each node once")
    return nodes


def complete_grudge(components: Sequence[Sequence[str]]) -> Grudge:
    """Every node hates every node not in its own component: the components are islands.

    [["n1"], ["n2", "n3"]] -> {"n1": {"n2", "n3"}, "n2": {"n1"}, "n3": {"n1"}}.
    A node must not appear in two components.
    """
    everyone = _check([n for c in components for n in c])
    return {n: frozenset(everyone) - frozenset(c) for c in components for n in c}


def isolate(nodes: Sequence[str], victim: str) -> Grudge:
    """`victim` alone on one side, every other node together on the other."""
    nodes = _check(nodes)
    if victim not in nodes:
        raise BadArgument(f"cannot isolate {victim!r}: not one of {', '.join(nodes)}")
    return complete_grudge([[victim], [n for n in nodes if n != victim]])


def halves(nodes: Sequence[str]) -> Grudge:
    """The first ceil(n/2) nodes (in the given order) vs the remaining floor(n/2).

    With an odd count the first half is the majority. Fewer than 2 nodes: no cut ({}).
    """
    nodes = _check(nodes)
    if len(nodes) < 2:
        return {}
    k = math.ceil(len(nodes) / 2)
    return complete_grudge([nodes[:k], nodes[k:]])


def random_halves(nodes: Sequence[str], rng: random.Random) -> Grudge:
    """`halves` of a shuffled copy: a random majority vs the random rest."""
    nodes = _check(nodes)
    rng.shuffle(nodes)
    return halves(nodes)


def majorities_ring(nodes: Sequence[str], rng: random.Random) -> Grudge:
    """Every node sees a majority (itself included), and no two nodes see the same majority.

    Nodes are shuffled into a ring; each node keeps its d nearest neighbours on both sides,
    the smallest d with 2d+1 >= majority, and hates the rest. Unlike Jepsen's window version
    (where a node may see a neighbour that does not see it back) this is symmetric, because
    our cuts are two-way: with a one-sided grudge some nodes would lose their majority.

    Degenerate sizes: 1 or 2 nodes give {} (any cut leaves a node without a majority).
    3 nodes give a line a - b - c: the middle node sees all three, each end sees itself and
    the middle (2 of 3), the ends cannot reach each other. Views are distinct majorities, so
    the contract holds, but the shape is the same as `bridge` on 3 nodes.
    """
    nodes = _check(nodes)
    n = len(nodes)
    if n < 3:
        return {}
    rng.shuffle(nodes)
    if n == 3:
        return {nodes[0]: frozenset([nodes[2]]), nodes[2]: frozenset([nodes[0]]),
                nodes[1]: frozenset()}
    d = math.ceil((n // 2) / 2)  # smallest d with 2d+1 >= n//2 + 1; then 2d+1 < n for n >= 4
    grudge = {}
    for i, node in enumerate(nodes):
        near = {nodes[(i + j) % n] for j in range(-d, d + 1)}
        grudge[node] = frozenset(nodes) - near
    return grudge


def bridge(nodes: Sequence[str], rng: random.Random) -> Grudge:
    """Two halves that cannot reach each other, and one bridge node both halves can reach.

    Nodes are shuffled; the first floor(n/2) form one side, the node after them is the
    bridge, the rest the other side (Jepsen's `bridge`). Needs at least 3 nodes.
    """
    nodes = _check(nodes)
    if len(nodes) < 3:
        raise BadArgument(f"a bridge partition needs at least 3 nodes, got {len(nodes)}; "
                          f"use isolate or halves")
    rng.shuffle(nodes)
    k = len(nodes) // 2
    left, middle, right = nodes[:k], nodes[k], nodes[k + 1:]
    grudge = complete_grudge([left, right])
    grudge[middle] = frozenset()
    return grudge


def cut_client(client: str, servers: Sequence[str], cut: Iterable[str], *, island: bool = False) -> Grudge:
    """The client cannot hear the servers in `cut` and they cannot hear it. Without `island`
    the servers still reach each other; with it, the cut servers and the kept ones cannot
    hear each other either (a minority island). Other clients are untouched."""
    servers = _check(servers)
    if client in servers:
        raise BadArgument(f"client {client!r} is also listed as a server; pass it once, as client")
    cut = sorted(set(cut))
    unknown = [s for s in cut if s not in servers]
    if unknown:
        raise BadArgument(f"cannot cut client {client!r} from {unknown[0]!r}: not one of {', '.join(servers)}")
    if not cut:
        return {}
    kept = [s for s in servers if s not in cut]
    grudge = {client: frozenset(cut)}
    for s in cut:
        grudge[s] = frozenset([client, *(kept if island else ())])
    if island:
        for s in kept:
            grudge[s] = frozenset(cut)
    return grudge


def _natural(name: str) -> list:
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


def describe(grudge: Mapping[str, Iterable[str]], nodes: Iterable[str] = ()) -> str:
    """A one-line summary for logs: "n1 | n2 n3" when the views split nodes into islands.

    A view is the set of nodes a node can reach (both directions, as partitions apply).
    If the views are not islands (ring, bridge) it lists them: "n1 sees n1 n2 n5; ...".
    `nodes` adds nodes the grudge does not mention; an empty cut is "fully connected".
    """
    hates = {a: set(b) for a, b in grudge.items()}
    everyone = set(nodes) | set(hates) | {b for bs in hates.values() for b in bs}
    cut = {a: hates.get(a, set()) | {b for b, bs in hates.items() if a in bs} for a in everyone}
    if not any(cut.values()):
        return "fully connected"
    views = {a: frozenset(everyone - cut[a]) for a in everyone}
    order = sorted(everyone, key=_natural)

    def names(group) -> str:
        return " ".join(sorted(group, key=_natural))

    # Cuts are two-way, so views are symmetric; they are islands when neighbours agree.
    if all(views[a] == views[b] for a in everyone for b in views[a]):
        groups = sorted(set(views.values()), key=lambda g: _natural(min(g, key=_natural)))
        return " | ".join(names(g) for g in groups)
    return "; ".join(f"{a} sees {names(views[a])}" for a in order)
