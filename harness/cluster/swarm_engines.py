"""The engines of a swarm run (harness/cluster/swarm.py): the nodes file that names them, a
client of each (Docker SDK), and what `chaos cluster down` does on them after a run, found by
the run label `chaoslock.run` and the run's iptables comment only."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from harness.core.contracts.cluster import check_run_id
from harness.cluster.compose_file import HARNESS_IMAGE, RUN_LABEL
from harness.core.errors import BadArgument, MissingDependency

NODES_FILE = "/run/chaoslock-swarm/nodes"
SETUP = "run `make swarm` (scripts/swarm/swarm.sh up) for a 3-engine swarm on this machine, or name yours with --swarm-nodes FILE"


@dataclass(frozen=True, slots=True)
class SwarmNode:
    name: str  # the node label chaoslock.node
    url: str  # unix:///... or tcp://host:port
    addr: str  # where its host-network services are reached


def read_nodes(path: str) -> list[SwarmNode]:
    """The engines of a nodes file, the manager first; one sentence for a bad file."""
    from harness.core.pathcheck import FILE, check_path

    check_path(path, flag="--swarm-nodes", want=FILE, hint=SETUP)
    out = []
    for i, line in enumerate(Path(path).read_text(errors="replace").splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if len(words) != 3 or not words[1].startswith(("unix://", "tcp://", "ssh://")):
            raise BadArgument(f"{path} line {i}: want `NAME ENGINE-URL ADDRESS` (like `e1 unix:///run/chaoslock-swarm/e1.sock "
                              f"198.19.249.11`), got {line.strip()[:80]!r}")
        out.append(SwarmNode(*words))
    if len(out) < 2:
        raise BadArgument(f"{path} names {len(out)} engine(s); a swarm run needs two or more ({SETUP})")
    return out


def engine_client(url: str, timeout: float = 60):
    """The Docker SDK's low-level client of one engine; one sentence if it does not answer."""
    try:
        import docker
    except ImportError:
        raise MissingDependency("the Docker SDK for Python is not installed (`pip install -e .` installs it)") from None
    try:
        api = docker.APIClient(base_url=url, timeout=timeout, version="auto")
        api.ping()
        return api
    except Exception as e:  # the SDK wraps requests' and the OS's errors
        raise MissingDependency(f"no Docker engine answers at {url} ({' '.join(str(e).split())[:200]}); {SETUP}") from None


def start_helper(api: Any, run_id: str, command: list[str], *, name: str | None = None) -> str:
    """A container of the run on an engine's host network with NET_ADMIN (the harness image),
    started: what runs iptables in the engine's host namespace."""
    hc = api.create_host_config(network_mode="host", cap_add=["NET_ADMIN", "NET_RAW"])
    c = api.create_container(HARNESS_IMAGE, command=command, labels={RUN_LABEL: run_id}, name=name, host_config=hc)
    api.start(c["Id"])
    return c["Id"]


def engines_of(state: Mapping[str, Any] | None) -> list[SwarmNode]:
    if state is not None and state.get("provider") == "swarm":
        try:
            return [SwarmNode(*map(str, e)) for e in state.get("engines") or [] if len(e) == 3]
        except TypeError:
            return []
    return read_nodes(NODES_FILE) if os.path.isfile(NODES_FILE) else []


SWEEP = ("iptables-save -t filter | grep -e \"--comment $1 \" -e \"--comment $1$\" | sed 's/^-A /-D /' "
         "| while read -r rule; do eval iptables -w $rule && echo \"$rule\"; done")


def _sweep_rules(api: Any, run_id: str) -> list[str]:
    """Delete the run's iptables rules (by their comment) from an engine's host namespace,
    through a short-lived helper container of the run; the rules it deleted."""
    cid = start_helper(api, run_id, ["sh", "-c", SWEEP, "sh", f"chaoslock-{run_id}"])
    try:
        api.wait(cid, timeout=30)
        return [l for l in api.logs(cid).decode(errors="replace").splitlines() if l.strip()]
    finally:
        api.remove_container(cid, force=True)


def remove_run(run_id: str, state: Mapping[str, Any] | None) -> list[str]:
    """The run's services on the manager, its containers and its iptables rules on every
    engine (the state's engines, else those of the default nodes file). Selects by the run
    label and the rules' comment only. Without a state, rules are swept only on engines that
    still held something of the run."""
    check_run_id(run_id)
    if state is not None and state.get("provider") not in (None, "swarm"):
        return []
    done: list[str] = []
    flt = {"label": f"{RUN_LABEL}={run_id}"}
    try:
        engines = engines_of(state)
    except BadArgument as err:  # a default nodes file someone broke: nothing of ours can be found through it
        return [f"the swarm's engines were not asked: {err}"] if state is not None else []
    for i, e in enumerate(engines):
        try:
            api = engine_client(e.url, timeout=30)
        except MissingDependency as err:
            done.append(f"engine {e.name} did not answer ({err}); run `chaos cluster down --all` again once it does")
            continue
        try:
            held = state is not None and state.get("provider") == "swarm"
            if i == 0:
                for s in api.services(filters=flt) or []:
                    if (s.get("Spec", {}).get("Labels") or {}).get(RUN_LABEL) == run_id:
                        api.remove_service(s["ID"])
                        done.append(f"service {s['Spec'].get('Name')} on {e.name} (run {run_id})")
            deadline = time.monotonic() + 20
            while True:
                rows = [c for c in api.containers(all=True, filters=flt) if (c.get("Labels") or {}).get(RUN_LABEL) == run_id]
                held = held or bool(rows)
                for c in rows:
                    try:
                        api.remove_container(c["Id"], v=True, force=True)
                        done.append(f"container {c['Id'][:12]} on {e.name} (run {run_id})")
                    except Exception:
                        pass  # the swarm is removing it too
                if not rows or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
            if held:
                done += [f"iptables rule on {e.name}: {r}" for r in _sweep_rules(api, run_id)]
        except Exception as err:
            done.append(f"engine {e.name}: {' '.join(str(err).split())[:200]}")
        finally:
            api.close()
    return done


def leftover_runs() -> set[str]:
    """Run ids that label a service or container on the default nodes file's engines."""
    from harness.core.contracts.cluster import RUN_ID

    found: set[str] = set()
    try:
        engines = engines_of(None)
    except BadArgument:
        return found
    for i, e in enumerate(engines):
        try:
            api = engine_client(e.url, timeout=20)
        except MissingDependency:
            continue
        try:
            rows = api.containers(all=True, filters={"label": RUN_LABEL})
            if i == 0:
                rows += [{"Labels": s.get("Spec", {}).get("Labels")} for s in api.services(filters={"label": RUN_LABEL}) or []]
            found |= {rid for c in rows if isinstance(rid := (c.get("Labels") or {}).get(RUN_LABEL), str) and RUN_ID.fullmatch(rid)}
        except Exception:
            pass
        finally:
            api.close()
    return found

