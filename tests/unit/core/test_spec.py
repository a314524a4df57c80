"""TestSpec: every setting checked in one place before anything starts, named by its flag;
the spec survives its trip through spec.json; its name is the folder its runs land in."""

from __future__ import annotations

import dataclasses
import json

import pytest

from harness.core.errors import BadArgument
from harness.core.spec import MAX_JUMP_S, MAX_TIME_S, MIN_INTERVAL_S, TestSpec

# field, the values at both ends of its range (accepted), values just outside (refused),
# the flag the refusal names, and what else the spec needs for the field to be judged alone
RANGES = [
    ("time_limit", [0.001, MAX_TIME_S], [0, -1.0, MAX_TIME_S + 0.5], "--time-limit", {"recovery": 0}),
    ("recovery", [0, 29.999], [-0.001, 30.0, 31], "--recovery", {"time_limit": 30}),
    ("concurrency", [1, 256], [0, -1, 257], "--concurrency", {}),
    ("keys", [1, 100_000], [0, -1, 100_001], "--keys", {}),
    ("seed", [0, 2**63 - 1], [-1, 2**63], "--seed", {}),
    ("ttl_ms", [50, 3_600_000], [49, 3_600_001], "--ttl", {}),
    ("acquire_timeout", [0.001, 3600], [0, -1, 3600.5], "--acquire-timeout", {}),
    ("nemesis_interval", [MIN_INTERVAL_S, MAX_TIME_S], [MIN_INTERVAL_S - 0.01, MAX_TIME_S + 1], "--nemesis-interval", {}),
    ("clock_jump_s", [None, -MAX_JUMP_S, 0.001, MAX_JUMP_S], [0, 0.0, MAX_JUMP_S + 1, -MAX_JUMP_S - 1], "--clock-jump", {}),
    ("hold_max_ms", [None, 0, 1999], [-1, 2000, 5000], "--hold-max", {"ttl_ms": 2000}),
    ("base_port", [None, 1024, 65535 - 32], [1023, 65535 - 31, 0], "--base-port", {}),
    ("key", ["k", "x" * 58, "Az09_.:-"], ["", "x" * 59, "a b", "k\n", "k/../x", "k:counter"], "key", {}),
    ("cluster", ["local", "compose"], ["docker", "", "LOCAL"], "--cluster", {}),
]


@pytest.mark.parametrize("field, ok, bad, flag, base", RANGES, ids=[r[0] for r in RANGES])
def test_each_setting_is_accepted_to_the_ends_of_its_range_and_not_past_them(field, ok, bad, flag, base):
    for value in ok:
        spec = TestSpec(**base, **{field: value}).validate()
        assert getattr(spec, field) == value
    for value in bad:
        with pytest.raises(BadArgument) as e:
            TestSpec(**base, **{field: value}).validate()
        msg = str(e.value)
        assert msg.startswith(flag) and "\n" not in msg, (value, msg)


@pytest.mark.parametrize("field, value, words", [
    ("time_limit", float("nan"), "--time-limit must be a finite number of seconds, not nan"),
    ("recovery", float("inf"), "--recovery must be a finite number"),
    ("acquire_timeout", "2", "--acquire-timeout must be a finite number of seconds, not '2'"),
    ("nemesis_interval", True, "--nemesis-interval must be a finite number"),
    ("clock_jump_s", float("-inf"), "--clock-jump must be a finite number"),
    ("concurrency", True, "--concurrency must be an integer, not True"),  # an int to Python, not to us
    ("concurrency", 2.0, "--concurrency must be an integer, not 2.0"),
    ("seed", "7", "--seed must be an integer"),
    ("ttl_ms", 2000.5, "--ttl must be an integer"),
    ("hold_max_ms", False, "--hold-max must be an integer"),
    ("base_port", "1024", "--base-port must be an integer"),
    ("options", ["a=b"], "options must be a mapping of NAME to VALUE, not list"),
])
def test_a_value_of_the_wrong_type_is_refused_by_name(field, value, words):
    with pytest.raises(BadArgument, match="^" + words.replace("(", r"\(").replace("^", r"\^")):
        TestSpec(**{field: value}).validate()


def test_validate_returns_a_new_spec_with_its_options_typed():
    raw = TestSpec(backend="redis", nemesis=("pause-holder",), options={"pause_multiple": "3"})
    typed = raw.validate()
    assert typed.options["pause_multiple"] == 3.0 and isinstance(typed.options["pause_multiple"], float)
    assert raw.options == {"pause_multiple": "3"}  # the spec it came from is untouched
    assert dataclasses.replace(typed, options=raw.options) == raw


def test_a_spec_is_a_frozen_keyword_only_value():
    spec = TestSpec()
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.seed = 3
    with pytest.raises(TypeError):
        TestSpec("redis")  # positional literals would break on every new field


def test_every_field_survives_spec_json():
    spec = TestSpec(backend="etcd", nemesis=("partition", "kill"), time_limit=12.5, recovery=2, concurrency=3, keys=4,
                    seed=2**62, ttl_ms=750, acquire_timeout=0.5, hold_max_ms=300, fencing=True, renew=True, reenter=True, hold_until_expiry=True,
                    nemesis_interval=1.5, clock_jump_s=-4.0, lock="semaphore:2", key="k:1", options={"partition_shape": "one"},
                    netns=False, base_port=20000, store="/tmp/s", cluster="compose", command="chaos run -b etcd")
    d = spec.to_dict()
    assert set(d) == {f.name for f in dataclasses.fields(TestSpec)}  # spec.json holds every setting
    assert all(getattr(spec, f.name) != f.default for f in dataclasses.fields(TestSpec)
               if f.default is not dataclasses.MISSING), "the round trip must not pass on defaults"
    back = TestSpec.from_dict(json.loads(spec.to_json()))
    assert back == spec and back.nemesis == ("partition", "kill")
    assert TestSpec.from_dict({}) == TestSpec()  # what a spec.json leaves out takes the default


def test_a_field_from_elsewhere_is_refused_naming_it_and_the_known_ones():
    with pytest.raises(BadArgument) as e:
        TestSpec.from_dict({"backend": "redis", "ttl": 2000, "nemeses": []})
    msg = str(e.value)
    assert msg.startswith("unknown spec field(s) nemeses, ttl; known: ")
    assert "ttl_ms" in msg and "nemesis" in msg


@pytest.mark.parametrize("kw, name", [
    ({}, "redlock-none"),
    ({"backend": "redis", "nemesis": ("pause-holder",)}, "redis-pause-holder"),
    ({"backend": "etcd", "nemesis": ("clock-skew", "partition"), "fencing": True}, "etcd-clock-skew+partition-fenced"),
    ({"backend": "zookeeper", "renew": True}, "zookeeper-none-renew"),
    ({"backend": "redis", "fencing": True, "renew": True}, "redis-none-fenced-renew"),
])
def test_the_name_says_backend_faults_and_variants(kw, name):
    assert TestSpec(**kw).name == name


def test_derived_defaults_follow_the_ttl():
    assert TestSpec(ttl_ms=1000).hold_max == 0.6 and TestSpec(ttl_ms=1000, hold_max_ms=250).hold_max == 0.25
    assert TestSpec(ttl_ms=1000).jump_s == 2.5 and TestSpec(ttl_ms=1000, clock_jump_s=-7.0).jump_s == -7.0


def test_hold_until_expiry_names_the_run_and_excludes_renew():
    from harness.core.errors import BadArgument
    from harness.core.spec import TestSpec

    assert TestSpec(backend="redis", hold_until_expiry=True).validate().name == "redis-none-expiry"
    with pytest.raises(BadArgument, match="--renew and --hold-until-expiry both decide"):
        TestSpec(backend="redis", renew=True, hold_until_expiry=True).validate()
