"""What a replay takes from a run dir (harness/engine/replay_input.py): the workload and its
faults, never a command, a store, a provider or hosts; faults checked against the cluster
the replay brings up. No servers: every refusal here comes before anything starts."""

import dataclasses
import math

import pytest

from harness.core.errors import BadArgument
from harness.core.spec import TestSpec
from harness.engine.replay import Recorded
from harness.engine.replay_input import HERE, WORKLOAD, Here, asked_faults, check_faults, spec_for

HOSTILE = TestSpec(backend="external", nemesis=("kill", "pause-holder"), time_limit=12, recovery=2, concurrency=3,
                   seed=41, ttl_ms=1500, fencing=True,
                   options={"command": "sh -c 'touch /tmp/chaoslock-marker'", "servers": "valkey:3"},
                   store="/var/www/html", cluster="ssh", ssh={"hosts": ["root@203.0.113.9"], "key": "/root/.ssh/id_rsa"},
                   netns=False, base_port=6379, command="rm -rf /", facts={"replay": {"of": "/etc"}})


def test_every_spec_field_is_taken_from_the_run_dir_or_from_the_command_line_never_both():
    fields = {f.name for f in dataclasses.fields(TestSpec)}
    assert set(WORKLOAD) | set(HERE) == fields and not set(WORKLOAD) & set(HERE)


def test_an_external_clients_command_is_never_taken_from_a_run_dir():
    with pytest.raises(BadArgument, match=r"was run with an external client.*give it with --client CMD$"):
        spec_for(HOSTILE, "RUN", Here())


def test_the_workload_comes_from_the_run_dir_and_where_and_how_from_the_command_line():
    spec = spec_for(HOSTILE, "RUN", Here(client="python3 mine.py"), command="chaos run --replay RUN")
    assert (spec.backend, spec.nemesis, spec.seed, spec.time_limit, spec.concurrency, spec.ttl_ms, spec.fencing) == \
        ("external", ("kill", "pause-holder"), 41, 12, 3, 1500, True)
    assert spec.options["command"] == "python3 mine.py" and spec.options["servers"] == "valkey:3"
    assert (spec.store, spec.cluster, dict(spec.ssh), spec.netns, spec.base_port) == ("store", "local", {}, None, None)
    assert spec.command == "chaos run --replay RUN" and dict(spec.facts) == {}
    mine = Here(store="/tmp/mine", netns=True, client="python3 mine.py")
    assert spec_for(HOSTILE, "RUN", mine, time_limit=5).store == "/tmp/mine"
    assert spec_for(HOSTILE, "RUN", mine, time_limit=5).time_limit == 5


def test_client_without_an_external_run_and_an_empty_client_are_refused():
    built_in = dataclasses.replace(HOSTILE, backend="redis", options={})
    with pytest.raises(BadArgument, match="ran backend redis; drop --client"):
        spec_for(built_in, "RUN", Here(client="python3 mine.py"))
    with pytest.raises(BadArgument, match="--client needs the client's command"):
        spec_for(HOSTILE, "RUN", Here(client="  "))


def test_an_option_given_by_a_flag_is_dropped_from_a_built_in_backends_options_too():
    """`command` means nothing to redis, but a run dir must not carry it into a replay."""
    spec = spec_for(dataclasses.replace(HOSTILE, backend="redis", options={"command": "sh -c 'touch x'"}), "RUN", Here())
    assert "command" not in spec.options


def test_where_the_clients_ran_and_their_image_are_never_taken_from_a_run_dir():
    """-o clients_on / client_image (the swarm's clients in containers) say where and in what a
    program runs: a replay runs its clients on this machine, never in an image a run dir names."""
    swarm = dataclasses.replace(HOSTILE, cluster="swarm", options={**HOSTILE.options, "clients_on": "spread",
                                                                    "client_image": "evil/image:1"})
    spec = spec_for(swarm, "RUN", Here(client="python3 mine.py"))
    assert "clients_on" not in spec.options and "client_image" not in spec.options


def fault(f, value=None, heal="", heal_value=None, at=1.0, duration=1.0):
    return Recorded(f=f, at=at, duration=duration, value=value, heal=heal, heal_value=heal_value)


REPLAY = dataclasses.replace(HOSTILE, nemesis=("kill", "clock-skew", "partition", "partition-client", "pause-holder"),
                             options={"command": "python3 mine.py", "servers": "valkey:3"}, store="store",
                             cluster="local", ssh={}, netns=None, base_port=None).validate()


def test_faults_aimed_at_the_replays_lock_nodes_pass_and_take_their_installed_heal():
    ok = [fault("kill", ["n1", "n3"], heal="whatever"), fault("kill", ["@leader"]),
          fault("clock-bump", {"n1": 5.0, "n2": -5.0}, heal_value=["n1", "n2"]),
          fault("clock-bump", {"c3": 2.0}),  # clock_target=clients moves the workers' clocks
          fault("clock-strobe", {"nodes": ["n2"], "delta": 3, "period_s": 0.2}),
          fault("clock-drift", {"nodes": ["n1"], "rate": 1.5}),
          fault("partition", {"shape": "one", "grudge": {"n1": ["n2", "n3"], "n2": ["n1"]}}),
          fault("partition-client", {"client": "@holder", "servers": ["n1", "n2"], "fallback": 2}),
          fault("pause-holder", {"worker": 99, "anything": "store"})]  # reactive: aimed at the holder then
    got = check_faults(REPLAY, ok, "RUN")
    assert [r.heal for r in got] == ["restart", "restart", "clock-reset", "clock-reset", "clock-reset", "clock-reset",
                                     "heal", "heal-client", "resume-holder"]


@pytest.mark.parametrize("bad, words", [
    (fault("kill", ["store"]), "aims kill at the store server, which holds the counter"),
    (fault("kill", ["n1", "store"]), "aims kill at the store server"),
    (fault("clock-bump", {"store": 5.0}), "aims clock-bump at the store server"),
    (fault("clock-bump", {"n1": 5.0}, heal_value=["store"]), "aims clock-reset at the store server"),
    (fault("partition", {"grudge": {"n1": ["store"]}}), "aims partition at the store server"),
    (fault("partition-client", {"servers": ["store"], "fallback": 0}), "aims partition-client at the store server"),
    (fault("kill", ["n4"]), "aims kill at 'n4', which the cluster a replay of it brings up does not have "
                            "(its lock nodes are n1, n2, n3)"),
    (fault("kill", ["@holder"]), "aims kill at '@holder'"),
    (fault("partition", {"grudge": {"c1": ["n1"]}}), "aims partition at 'c1'"),
    (fault("kill", "n1"), "its targets must be a list of node names"),
    (fault("clock-bump", {"n1": 1e300}), "an offset must be a finite number"),
    (fault("clock-strobe", {"nodes": ["n1"], "delta": 1, "period_s": 0}), "period_s must be"),
    (fault("clock-drift", {"nodes": ["n1"], "rate": -1}), "rate must be"),
    (fault("partition-client", {"servers": ["n1"], "fallback": 3}), "fallback must be a worker 0-2"),
    (fault("pause"), "asks for a 'pause' fault, which none of its nemeses"),
    (fault("kill", ["n1"], at=-1.0), "starts at -1.0 s"),
    (fault("kill", ["n1"], duration=math.inf), "lasts inf s"),
    (fault("pause-holder", at=math.nan), "starts at nan s"),
])
def test_a_fault_a_replay_must_not_apply_is_refused_in_one_sentence(bad, words):
    with pytest.raises(BadArgument) as e:
        check_faults(REPLAY, [fault("kill", ["n1"]), bad], "RUN")
    assert words in str(e.value) and "\n" not in str(e.value)


def test_a_recorded_replays_schedule_is_read_as_faults_or_refused():
    asked = {"f": "kill", "at": 1, "duration": 2, "value": ["store"]}
    spec = dataclasses.replace(REPLAY, facts={"replay": {"of": "/etc", "faults": [asked]}})
    (r,) = asked_faults(spec, "RUN")
    with pytest.raises(BadArgument, match="store server"):  # then checked like any recorded fault
        check_faults(REPLAY, [r], "RUN")
    assert asked_faults(REPLAY, "RUN") is None
    for junk in ([{"at": 1}], ["kill"], [{"f": "kill", "at": "soon", "duration": 1}]):
        with pytest.raises(BadArgument, match="not a list of faults"):
            asked_faults(dataclasses.replace(REPLAY, facts={"replay": {"faults": junk}}), "RUN")
