"""`chaos cluster up|status|down`: clusters that outlive one command, and the cleanup of runs."""

from __future__ import annotations

import click


def say_reaped() -> None:
    """Before starting anything: remove what runs that died left behind, in one line."""
    import sys

    from harness.cluster.reaper import reap_dead

    gone = reap_dead()
    if gone:
        print(f"note: removed the leftovers of {len(gone)} run(s) whose chaos process had died: {', '.join(gone)}",
              file=sys.stderr)


@click.group()
def cluster() -> None:
    """Start, inspect and remove clusters (also leftovers of killed runs)."""


@cluster.command()
@click.option("--backend", "-b", default="redlock", show_default=True, help="start the cluster this backend uses")
@click.option("--netns/--no-netns", default=None, help="require / refuse network namespaces")
def up(backend, netns):
    """Start a cluster and leave it running; prints endpoints and how to reach them."""
    from harness.core import plugins
    from harness.cluster.assemble import make_cluster
    from harness.core.spec import TestSpec
    from results.store import new_run_id

    spec = TestSpec(backend=backend, netns=netns, concurrency=1).validate()
    plugins.backend_class(backend)
    run_id = new_run_id()
    from harness.cluster.provider import state_root
    from harness.cluster.reaper import KEPT

    say_reaped()
    c = make_cluster(spec, run_id, state_root() / run_id / "logs", [])
    c.up()
    # Leave the processes running: forget them so nothing stops them when we exit, and
    # mark the cluster kept, so a later run does not take it for a dead run's leftovers.
    c._state.clear()
    (state_root() / run_id / KEPT).touch()
    print(f"cluster {run_id} is up ({backend})")
    for n in c.nodes:
        where = f"  (netns {n.netns}: ip netns exec {n.netns} ...)" if n.netns else ""
        print(f"  {n.name:6} {n.kind:9} {n.role:5} {n.endpoint}{where}")
    print(f"logs: {c.log_dir}\nstop it with: chaos cluster down {run_id}")
    return 0


@cluster.command()
def status():
    """List clusters that are up (or left behind) and whether each node is alive."""
    from harness.cluster.reaper import runs

    found = runs()
    if not found:
        print("no chaoslock clusters are running")
    for r in found:
        alive = r.get("alive", {})
        print(f"{r['run_id']}: {sum(alive.values())}/{len(alive)} nodes alive")
        for n in r.get("nodes", []):
            print(f"  {n['name']:6} {n['kind']:9} {n['host']}:{n['port']}  {'up' if alive.get(n['name']) else 'down'}")
    return 0


@cluster.command()
@click.argument("run_id", required=False)
@click.option("--all", "all_", is_flag=True, help="remove everything left by any run, also killed ones")
def down(run_id, all_):
    """Stop one cluster, or with --all every leftover (processes, namespaces, bridge, rules, dirs)."""
    from harness.cluster.reaper import down_all, kill_run, runs
    from harness.core.errors import BadArgument

    if all_:
        removed = down_all()
    elif run_id is not None:  # "" is a bad id, not "no id": it must never pick a cluster for you
        removed = kill_run(run_id)
        if not removed:  # asked to stop something that is not there
            raise BadArgument(f"no cluster and no leftovers of run {run_id}: nothing was removed; "
                              f"`chaos cluster status` lists the clusters that are up")
    else:
        ids = [r["run_id"] for r in runs()]
        if len(ids) != 1:
            raise BadArgument(f"name the cluster to stop ({', '.join(ids) or 'none is running'}) or use --all")
        removed = kill_run(ids[0])
    print("\n".join(removed) if removed else "nothing to remove")
    return 0
