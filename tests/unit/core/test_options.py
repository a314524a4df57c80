"""Every built-in backend's and nemesis's options: an unknown name and each bad value are
refused by name before anything starts (issue 14, item 4)."""

import pytest

from harness.core import plugins
from harness.core.errors import BadArgument
from harness.core.options import CLUSTER_OPTIONS, Option, declared, every_option, read
from harness.core.spec import TestSpec

BACKENDS = sorted(plugins.BACKENDS)
NEMESES = sorted(n for n in plugins.NEMESES if n != "none")


def bad_values(o: Option) -> list[str]:
    if o.type is bool:
        return ["maybe", "2", ""]
    if o.type in (int, float):
        out = ["abc", "nan", "inf"]
        if o.min is not None:
            out.append(str(o.min - 1))
        if o.above is not None:
            out.append(str(o.above))
        if o.max is not None:
            out.append(str(o.max * 10 + 1))
        if o.type is int:
            out.append("1.5")
        return out
    return ["no-such-choice"] if o.choices else []


def spec_for(component: str, options: dict) -> TestSpec:
    if component in plugins.BACKENDS:
        return TestSpec(backend=component, options=options)
    return TestSpec(backend="redis", nemesis=(component,), options=options)


@pytest.mark.parametrize("component", [b for b in BACKENDS if b != "external"] + NEMESES)
def test_unknown_names_are_refused_naming_the_components(component):
    with pytest.raises(BadArgument, match="unknown option 'no_such_option' for backend"):
        spec_for(component, {"no_such_option": "1"}).validate()


CASES = [(c, o.name, v) for c in BACKENDS + NEMESES
         for o in (declared(plugins.backend_class(c) if c in plugins.BACKENDS else plugins.nemesis_class(c)) or ())
         for v in bad_values(o)]


@pytest.mark.parametrize("component, name, value", CASES)
def test_every_bad_value_names_its_option(component, name, value):
    with pytest.raises(BadArgument) as e:
        spec_for(component, {name: value}).validate()
    assert f"-o {name}={value}" in str(e.value) and "\n" not in str(e.value)


def test_every_built_in_declares_its_options_with_help():
    for c in BACKENDS:
        assert declared(plugins.backend_class(c)) is not None, c
    for o in every_option().values():
        assert o.help and o.type in (bool, int, float, str)
        if o.default is not None and o.type is not str:
            assert read({}, o) == o.default and o.parse(o.default) == o.default


def test_declared_defaults_are_what_the_readers_use():
    assert read({}, CLUSTER_OPTIONS[0]) is False
    assert len(CASES) > 80


def test_an_external_client_gets_every_option_it_is_given():
    """Its own names are its business (they reach it in init); known names are still typed."""
    spec = TestSpec(backend="external", options={"command": "./mylock", "servers": "etcd:3", "my_flag": "x",
                                                 "session_timeout_ms": "2000"}).validate()
    assert spec.options["my_flag"] == "x" and spec.options["session_timeout_ms"] == 2000.0
    assert spec.notes() == []
    with pytest.raises(BadArgument, match="session_timeout_ms"):
        TestSpec(backend="external", options={"command": "./c", "servers": "etcd:3", "session_timeout_ms": "-1"}).validate()
