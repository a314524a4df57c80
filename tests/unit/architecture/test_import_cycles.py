"""No import cycle among harness/, workloads/, nemesis/ and results/ (issue 14: one home per
concept), function-level imports included: a cycle hidden inside a function is still two
modules that need each other.

Every .py file is read with `ast` (nothing is imported). An edge A -> B is any import
statement in A, at module level or inside a function or class, that executes B:
`import p.q.r` executes p, p.q and p.q.r (each package's __init__); `from p.q import r`
executes p, p.q and, when r is a submodule, p.q.r; relative imports resolve against A's
package. Two kinds of import are not edges: A's own packages (they are initialised before
A runs, so importing them again only looks them up), and imports under
`if TYPE_CHECKING:` (they never run). Names looked up at run time from strings (the
plugin registry in harness/core/plugins.py) are not imports either.
"""

from __future__ import annotations

import ast
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from tests.paths import ROOT

PACKAGES = ("harness", "workloads", "nemesis", "results")


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    where: str  # path:line, and the function it sits in


def modules(root: Path, packages: tuple[str, ...]) -> dict[str, Path]:
    """Dotted name -> file of every module in the packages (a package is its __init__)."""
    found = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _prefixes(dotted: str) -> list[str]:
    parts = dotted.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def edges_of(name: str, path: Path, known: dict[str, Path], root: Path) -> list[Edge]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    ancestors = set(_prefixes(name))  # itself and its packages
    found: list[Edge] = []

    def add(targets: list[str], node: ast.stmt, scope: list[str]) -> None:
        where = f"{path.relative_to(root)}:{node.lineno}" + (f" (in {'.'.join(scope)})" if scope else "")
        for t in targets:
            if t in known and t not in ancestors:
                found.append(Edge(name, t, where))

    def visit(node: ast.AST, scope: list[str]) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child, scope)
            return
        if isinstance(node, ast.Import):
            add([p for alias in node.names for p in _prefixes(alias.name)], node, scope)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                base = ".".join(up + ([node.module] if node.module else []))
            add(_prefixes(base) + [f"{base}.{alias.name}" for alias in node.names], node, scope)
        inner = scope + [node.name] if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else scope
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)), [])
    return found


def import_graph(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> dict[str, dict[str, Edge]]:
    """source -> {target: the first import statement that makes the edge}."""
    known = modules(root, packages)
    graph: dict[str, dict[str, Edge]] = {m: {} for m in known}
    for name, path in known.items():
        for e in edges_of(name, path, known, root):
            graph[name].setdefault(e.target, e)
    return graph


def strongly_connected(graph: dict[str, dict[str, Edge]]) -> list[list[str]]:
    """Tarjan's algorithm: the components of more than one module (each one a knot of cycles)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return sorted(out)


def shortest_cycle(graph: dict[str, dict[str, Edge]], start: str, within: set[str]) -> list[str]:
    """The shortest path start -> ... -> start inside one component (breadth first)."""
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        v = queue.popleft()
        for w in sorted(graph[v]):
            if w not in within:
                continue
            if w == start:
                path = [v]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return [start, *reversed(path[:-1]), start] if v != start else [start, start]
            if w not in came_from:
                came_from[w] = v
                queue.append(w)
    raise AssertionError(f"{start} is in a component but on no cycle")


def cycles(graph: dict[str, dict[str, Edge]]) -> list[list[str]]:
    """For every component, the shortest cycle through each of its modules, each once
    (rotated to start at its smallest name), in order."""
    found: list[list[str]] = []
    for component in strongly_connected(graph):
        for m in component:
            c = shortest_cycle(graph, m, set(component))[:-1]
            i = c.index(min(c))
            c = c[i:] + c[:i] + [c[i]]
            if c not in found:
                found.append(c)
    return found


def describe(graph: dict[str, dict[str, Edge]], cycle: list[str]) -> str:
    lines = ["  " + " -> ".join(cycle)]
    for a, b in zip(cycle, cycle[1:]):
        lines.append(f"      {a} -> {b}: {graph[a][b].where}")
    return "\n".join(lines)


# ---------------------------------------------------------------- the check

def test_no_import_cycles():
    graph = import_graph()
    found = cycles(graph)
    assert not found, (f"{len(found)} import cycle(s) among {', '.join(p + '/' for p in PACKAGES)} "
                       f"(function-level imports count):\n" + "\n".join(describe(graph, c) for c in found))


# ---------------------------------------------------------------- the check checks

def tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def test_the_walk_sees_every_kind_of_import(tmp_path):
    root = tree(tmp_path, {
        "p/__init__.py": "",
        "p/a.py": "import os\nimport p.sub.deep\n",
        "p/b.py": "def f():\n    from p import a, helper\n    return a\n",
        "p/helper.py": "class C:\n    def m(self):\n        from .sub import deep\n",
        "p/sub/__init__.py": "from . import deep\n",
        "p/sub/deep.py": "from .. import b\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import p.a\n",
        "q/__init__.py": "from p.sub.deep import *\n",
    })
    graph = import_graph(tmp_path, ("p", "q"))
    assert {s: sorted(t) for s, t in graph.items()} == {
        "p": [], "p.a": ["p.sub", "p.sub.deep"], "p.b": ["p.a", "p.helper"],
        "p.helper": ["p.sub", "p.sub.deep"], "p.sub": ["p.sub.deep"], "p.sub.deep": ["p.b"],
        "q": ["p", "p.sub", "p.sub.deep"]}
    assert graph["p.b"]["p.a"].where == "p/b.py:2 (in f)"
    assert graph["p.helper"]["p.sub.deep"].where == "p/helper.py:3 (in C.m)"


def test_a_cycle_hidden_in_a_function_is_found_and_named_in_order(tmp_path):
    tree(tmp_path, {
        "p/__init__.py": "", "p/a.py": "import p.b\n",
        "p/b.py": "def late():\n    from p import c\n", "p/c.py": "from p.a import x\n",
        "p/d.py": "import p.e\n", "p/e.py": "import p.d\n", "p/f.py": "import p.a\n",
    })
    graph = import_graph(tmp_path, ("p",))
    assert strongly_connected(graph) == [["p.a", "p.b", "p.c"], ["p.d", "p.e"]]
    assert cycles(graph) == [["p.a", "p.b", "p.c", "p.a"], ["p.d", "p.e", "p.d"]]
    assert describe(graph, cycles(graph)[0]).splitlines()[2] == "      p.b -> p.c: p/b.py:2 (in late)"


def test_the_real_tree_is_walked():
    graph = import_graph()
    assert {"harness.commands.cli", "harness.core.spec", "nemesis.base", "results.report", "harness.core.contracts.client"} <= set(graph)
    assert "harness.core.spec" in graph["harness.commands.cli"] and "harness.core.history" in graph["nemesis.base"]
