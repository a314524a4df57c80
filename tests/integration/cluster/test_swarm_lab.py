"""The multi-engine Docker Swarm that `make swarm` (scripts/swarm/swarm.sh) makes on this one
machine: three dockerd, each in a network namespace of its own, joined into one swarm, with the
project's images loaded engine to engine (no registry), and what networking works across them
measured: an overlay network with dnsrr endpoints, and ports published in host mode, reached from
the host at each engine's address. `down` leaves nothing: no engine, namespace, bridge, rule,
mount or file. (The swarm provider, `--cluster swarm`, is issue 40's next step; not built yet.)

Campaign: the first `up` loads about 2 GB of images into each engine (2 min here); the engines'
data roots stay as a cache under /var/lib/chaoslock-swarm."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = [pytest.mark.integration, pytest.mark.campaign]

SWARM = [str(ROOT / "scripts" / "swarm" / "swarm.sh")]
ENGINES = ("e1", "e2", "e3")
ADDR = {e: f"198.19.249.{10 + i}" for i, e in enumerate(ENGINES, 1)}


def sh(*argv: str, timeout: float = 120, check: bool = True) -> str:
    r = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout)
    assert not check or r.returncode == 0, f"{' '.join(argv)}: {r.returncode}\n{r.stdout[-1500:]}\n{r.stderr[-1500:]}"
    return r.stdout


def d(engine: str, *args: str, **kw) -> str:
    return sh("docker", "-H", f"unix:///run/chaoslock-swarm/{engine}.sock", *args, **kw)


def leftovers() -> list[str]:
    ns = [l.split()[0] for l in sh("ip", "netns", "list").splitlines() if l.startswith("chswarm-")]
    links = [l for l in sh("ip", "-o", "link", "show").splitlines() if "chswarm0" in l or ": chsw" in l]
    procs = [l for l in sh("pgrep", "-af", "chaoslock-swarm", check=False).splitlines() if "pytest" not in l]
    rules = [l for l in sh("iptables", "-S").splitlines() if "chaoslock-swarm" in l]
    mounts = [l for l in Path("/proc/mounts").read_text().splitlines() if "/run/chaoslock-swarm" in l]
    files = [str(p) for p in Path("/run/chaoslock-swarm").glob("*")] if Path("/run/chaoslock-swarm").exists() else []
    return ns + links + procs + rules + mounts + files


@pytest.fixture(scope="module")
def swarm():
    import shutil

    if shutil.which("dockerd") is None:  # the nightly's swarm-lab job installs it (make compose-harness)
        pytest.skip("no Docker engine is installed here; `make compose-harness` installs it, `make swarm` uses it")
    if Path("/run/chaoslock-swarm/engines").exists():
        pytest.skip("a swarm made by scripts/swarm/swarm.sh is up already; this test makes and removes its own")
    before = leftovers()
    assert before == [], before
    started = time.monotonic()
    try:
        sh("bash", *SWARM, "up", "3", timeout=900)
        yield time.monotonic() - started
    finally:
        sh("bash", *SWARM, "down", timeout=300)
        assert leftovers() == []  # no engine, namespace, bridge, rule, mount or file (an error at teardown)


def test_three_engines_form_one_swarm_with_the_images_and_working_overlay_and_host_ports(swarm):
    nodes = d("e1", "node", "ls", "--format", "{{.ID}} {{.Status}} {{.ManagerStatus}}").split("\n")
    nodes = [n.split() for n in nodes if n.strip()]
    assert len(nodes) == 3 and all(n[1] == "Ready" for n in nodes), nodes
    labels = {d("e1", "node", "inspect", "--format", '{{index .Spec.Labels "chaoslock.node"}}', n[0]).strip() for n in nodes}
    assert labels == set(ENGINES), labels
    wanted = [l for l in sh("docker", "images", "--format", "{{.Repository}}:{{.Tag}}").split() if l.startswith("chaoslock-")]
    for e in ENGINES:
        assert d(e, "info", "--format", "{{.Swarm.LocalNodeState}}").strip() == "active"
        have = set(d(e, "images", "--format", "{{.Repository}}:{{.Tag}}").split())
        assert set(wanted) <= have, (e, set(wanted) - have)
    image = "chaoslock-valkey:9.1.2"
    d("e1", "network", "create", "-d", "overlay", "--attachable", "chaoslock-probe")
    try:
        d("e1", "service", "create", "-q", "--name", "chaoslock-probe", "--mode", "global", "--network", "chaoslock-probe",
          "--endpoint-mode", "dnsrr", "--publish", "mode=host,target=6379,published=16379", "--restart-condition", "none",
          image, "valkey-server", "--protected-mode", "no", timeout=180)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            states = d("e1", "service", "ps", "chaoslock-probe", "--format", "{{.CurrentState}}").split("\n")
            if len([s for s in states if s.startswith("Running")]) == 3:
                break
            time.sleep(1)
        else:
            pytest.fail(f"the probe's tasks did not all run: {states}")
        for e, addr in ADDR.items():  # host mode: the host reaches each engine's own port
            out = sh("timeout", "5", "bash", "-c", f"exec 3<>/dev/tcp/{addr}/16379 && printf 'PING\\r\\n' >&3 && head -c 5 <&3",
                     check=False)
            assert out == "+PONG", (e, out)
        across = d("e1", "run", "--rm", "--network", "chaoslock-probe", image, "bash", "-c",
                   'for ip in $(getent hosts tasks.chaoslock-probe | cut -d" " -f1); do '
                   'r=$(timeout 5 bash -c "exec 3<>/dev/tcp/$ip/6379 && printf \\"PING\\r\\n\\" >&3 && head -c 5 <&3"); '
                   'echo "$ip $r"; done', timeout=120)
        lines = [l.split() for l in across.splitlines() if l.strip()]
        assert len(lines) == 3 and all(len(l) == 2 and l[1] == "+PONG" for l in lines), across  # the overlay, node to node
    finally:
        d("e1", "service", "rm", "chaoslock-probe", check=False)
        for _ in range(60):
            if d("e1", "network", "rm", "chaoslock-probe", check=False).strip():
                break
            time.sleep(1)

