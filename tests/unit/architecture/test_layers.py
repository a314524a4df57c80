"""The layers hold (DESIGN.md, "Layers"; the data is tests/layers.toml): every import, at
module level or inside a function, goes to the importer's own layer or one below, and never
across a "never" pair of plug-in families.

Imports are read with `ast` by tests/unit/architecture/test_import_cycles.py's walk (nothing is imported).
One import statement names a module and, on the way, the packages around it (`from
harness.cluster.local import X` also executes harness/cluster's package); only the module
the statement is for counts here, since a package's own imports are checked as its own.
The never pairs read the family of the package a module lives in: the contracts
(harness/core/contracts/) are layer 1 and no plug-in family, so every family may import them.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from tests.unit.architecture.test_import_cycles import PACKAGES, ROOT, edges_of, modules, tree

DATA = ROOT / "tests" / "layers.toml"


@dataclass(frozen=True)
class Place:
    family: str
    level: int
    layer: str


@dataclass(frozen=True)
class Layers:
    entries: dict[str, Place]  # dotted prefix -> where it sits
    never: frozenset[tuple[str, str]]

    def place(self, module: str) -> Place | None:
        """Its own entry, else the nearest package entry ("pkg.*") around it."""
        if module in self.entries:
            return self.entries[module]
        parts = module.split(".")
        for i in range(len(parts), 0, -1):
            p = self.entries.get(".".join(parts[:i]) + ".*")
            if p is not None:
                return p
        return None

    def home(self, module: str) -> str | None:
        """The family of the package a module lives in ("pkg.*"), else its own: the never pairs
        read this, so a contract that lives in nemesis/ is still nemesis code to a checker."""
        parts = module.split(".")
        for i in range(len(parts), 0, -1):
            p = self.entries.get(".".join(parts[:i]) + ".*")
            if p is not None:
                return p.family
        p = self.place(module)
        return p.family if p else None


def load(path: Path = DATA) -> Layers:
    doc = tomllib.loads(path.read_text(encoding="utf-8"))
    entries: dict[str, Place] = {}
    for layer in doc["layer"]:
        for family, names in layer.items():
            if family in ("level", "name"):
                continue
            for n in names:
                assert n not in entries, f"{path.name}: {n} is placed twice"
                entries[n] = Place(family=family, level=layer["level"], layer=layer["name"])
    return Layers(entries=entries, never=frozenset(tuple(p) for p in doc.get("never", ())))


def violations(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES, layers: Layers | None = None) -> list[str]:
    layers = layers or load()
    known = modules(root, packages)
    found = []
    for name, path in sorted(known.items()):
        src = layers.place(name)
        if src is None:
            found.append(f"{path.relative_to(root)}: module {name} is in no layer of {DATA.name}; place it there")
            continue
        by_statement: dict[str, list[str]] = {}
        for e in edges_of(name, path, known, root):
            by_statement.setdefault(e.where, []).append(e.target)
        for where, targets in by_statement.items():
            for t in targets:
                if any(o != t and o.startswith(t + ".") for o in targets):
                    continue  # a package on the way to the module the statement imports
                dst = layers.place(t)
                if dst is None:
                    continue  # reported as its own module
                if dst.level > src.level:
                    found.append(f"{where}: {name} ({src.family}, layer {src.level} {src.layer}) imports {t} "
                                 f"({dst.family}, layer {dst.level} {dst.layer}): an import runs up a layer")
                elif (layers.home(name), layers.home(t)) in layers.never:
                    a, b = layers.home(name), layers.home(t)
                    found.append(f"{where}: {name} imports {t}: a {a} module never imports {b} code "
                                 f"(the never pair {a} -> {b})")
    return found


# ---------------------------------------------------------------- the check

def test_every_import_keeps_to_the_layers():
    found = violations()
    assert not found, f"{len(found)} import(s) break the layers of {DATA.relative_to(ROOT)}:\n  " + "\n  ".join(found)


# ---------------------------------------------------------------- the check checks

LAYERS = """
never = [["checker", "nemesis"]]
[[layer]]
level = 1
name = "data"
data = ["p", "p.data", "p.nemesis.base"]
[[layer]]
level = 2
name = "plug-ins"
checker = ["p.checker.*"]
nemesis = ["p.nemesis.*"]
[[layer]]
level = 3
name = "commands"
commands = ["p.cli"]
"""


def test_an_import_up_a_layer_and_a_never_pair_are_named_with_file_and_line(tmp_path):
    root = tree(tmp_path, {
        "p/__init__.py": "", "p/data.py": "def f():\n    from p.cli import main\n",
        "p/checker/__init__.py": "", "p/checker/mutex.py": "import p.data\nfrom p.nemesis.kill import HEALS\n",
        "p/nemesis/__init__.py": "", "p/nemesis/kill.py": "from p import data\n",
        "p/nemesis/base.py": "", "p/checker/causes.py": "def f():\n    from p.nemesis.base import HEALS\n",
        "p/cli.py": "from p.checker import mutex\nfrom p.nemesis import kill\n", "p/stray.py": "",
    })
    (tmp_path / "layers.toml").write_text(LAYERS)
    found = violations(root, ("p",), load(tmp_path / "layers.toml"))
    assert found == [
        "p/checker/causes.py:2 (in f): p.checker.causes imports p.nemesis.base: a checker module never imports "
        "nemesis code (the never pair checker -> nemesis)",
        "p/checker/mutex.py:2: p.checker.mutex imports p.nemesis.kill: a checker module never imports nemesis "
        "code (the never pair checker -> nemesis)",
        "p/data.py:2 (in f): p.data (data, layer 1 data) imports p.cli (commands, layer 3 commands): an import "
        "runs up a layer",
        "p/stray.py: module p.stray is in no layer of layers.toml; place it there",
    ]


def test_the_real_layers_place_every_module():
    layers = load()
    assert layers.place("harness.cluster.local").family == "cluster"
    assert layers.place("harness.core.contracts.cluster").family == "contracts"
    assert layers.place("harness.commands.report").level == 4 and layers.place("results.csv").level == 2
    assert layers.home("nemesis.base") == "nemesis" and layers.home("harness.core.spec") == "data"
