"""Where backends and nemeses come from: the built-ins, and entry points of other packages
(tests/plugin_demo is one, as a user would install it). No servers: only names and imports."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness.core import plugins
from harness.core.errors import BadArgument
from tests.paths import TESTS

DEMO = TESTS / "plugin_demo"


@pytest.fixture
def on_path(monkeypatch):
    """Put a directory holding *.dist-info on sys.path, as pip would; forget it afterwards."""
    def put(path: Path) -> None:
        monkeypatch.syspath_prepend(str(path))
    yield put
    for name in ("demo_lock", "chaos_test_plugin"):
        sys.modules.pop(name, None)


def dist_info(root: Path, group: str, line: str, module: str, source: str) -> Path:
    """A minimal installed distribution in `root`: one module and one entry point."""
    info = root / f"{module}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{group}]\n{line}\n")
    (root / f"{module}.py").write_text(source)
    return root


def test_every_built_in_is_listed_and_loads_under_its_own_name():
    assert set(plugins.BACKENDS) <= set(plugins.backend_names())
    assert set(plugins.NEMESES) <= set(plugins.nemesis_names())
    assert plugins.backend_names() == sorted(plugins.backend_names())
    for name in plugins.BACKENDS:
        assert plugins.backend_class(name).name == name
    for name in plugins.NEMESES:
        assert plugins.nemesis_class(name).name == name


@pytest.mark.parametrize("lookup, kind, typo", [(plugins.backend_class, "backend", "redlok"),
                                                 (plugins.nemesis_class, "nemesis", "clock-skw")])
def test_an_unknown_name_is_one_sentence_listing_every_choice(lookup, kind, typo):
    with pytest.raises(BadArgument) as e:
        lookup(typo)
    names = plugins.backend_names() if kind == "backend" else plugins.nemesis_names()
    assert str(e.value) == f"unknown {kind} {typo!r}; choose one of: {', '.join(names)}"


def test_a_backend_is_found_through_its_entry_point(on_path):
    assert "demo-lock" not in plugins.backend_names()
    on_path(DEMO)
    assert "demo-lock" in plugins.backend_names()
    cls = plugins.backend_class("demo-lock")
    assert cls.__module__ == "demo_lock" and cls.__name__ == "DemoLock" and cls.servers == ("valkey", 1)
    with pytest.raises(BadArgument, match="demo-lock"):  # and it is among the choices offered
        plugins.backend_class("demo-lok")


def test_a_nemesis_is_found_through_its_entry_point(on_path, tmp_path):
    on_path(dist_info(tmp_path, "chaoslock.nemeses", "slow-net = chaos_test_plugin:SlowNet", "chaos_test_plugin",
                      'class SlowNet:\n    name = "slow-net"\n    fs = frozenset({"slow", "fast"})\n'))
    assert "slow-net" in plugins.nemesis_names()
    assert plugins.nemesis_class("slow-net").fs == {"slow", "fast"}


def test_an_entry_point_cannot_replace_a_built_in(on_path, tmp_path):
    on_path(dist_info(tmp_path, "chaoslock.backends", "redis = chaos_test_plugin:Impostor", "chaos_test_plugin",
                      "class Impostor:\n    name = 'redis'\n"))
    assert plugins.backend_names().count("redis") == 1
    assert plugins.backend_class("redis").__module__ == "workloads.redis_single"


def test_every_provider_is_one_module_with_the_four_functions():
    """A provider is a module implementing contracts.Provider, named by one line in PROVIDERS."""
    from harness.core.contracts import Provider

    for name in plugins.provider_names():
        assert isinstance(plugins.provider(name), Provider), name
    with pytest.raises(BadArgument, match="unknown cluster provider 'k8s'; choose one of: local, compose, ssh"):
        plugins.provider("k8s")
