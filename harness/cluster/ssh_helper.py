"""The small program the ssh provider ships to each host and runs there, as root (Python 3,
standard library only: it must not import chaoslock, which the host does not have).

    python3 ssh_helper.py RUN_ID/HOST COMMAND [ARGS...]

Every command touches only what run RUN_ID made on this host (HOST: its name in the run,
h1, h2, ...): its directory DIR = BASE/HOST/RUN_ID (one per host, even where hosts share
a filesystem), processes whose environment carries CHAOSLOCK_RUN=RUN_ID, and the iptables
chain named after the run (hooked into INPUT and OUTPUT by two rules that carry the
chain's name). Output is one JSON value on stdout; a failure is one sentence on stderr
and exit status 3.

    start NAME CWD ENV_JSON ARGV_JSON   start a server in a session of its own, log in DIR/NAME.log; prints its pid
    signal PID SIG                      SIGSTOP/SIGCONT/SIGKILL/SIGTERM its process group (ours only)
    alive PID                           whether it still runs (not a zombie)
    put PATH MODE                       write stdin to PATH (inside DIR), atomically
    mkdir NAME                          the data dir DIR/NAME (0700), if missing
    wipe NAME                           empty the data dir DIR/NAME
    read PATH OFFSET                    the bytes of PATH (inside DIR) from OFFSET, as text
    size PATH                           its size (0 if missing)
    cut ADDR,...                        drop traffic to and from these addresses (replaces the cut)
    heal                                remove the cut
    probe HOST PORT                     whether a TCP connection to HOST:PORT opens (300 ms)
    clock PID OFFSET                    shift the wall clock of PID (timewarp, shipped beside this file)
    down                                stop our processes, remove our chain, our files and DIR
    batch                               the commands of a JSON list on stdin, in one round trip
    runs                                run ids with a directory on this host
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

BASE = "/dev/shm/chaoslock-ssh" if os.path.isdir("/dev/shm") else "/var/tmp/chaoslock-ssh"
RUN_ENV = "CHAOSLOCK_RUN"
RUN_ID = re.compile(r"[0-9a-f]{6}")
WHERE = re.compile(r"(?P<run>[0-9a-f]{6})/(?P<host>h[0-9]{1,3})")
HOST = "h1"  # set by main from RUN_ID/HOST


class Refused(Exception):
    pass


def chain(run: str) -> str:
    return f"chaoslock-{run}"


def run_dir(run: str) -> str:
    return os.path.join(BASE, HOST, run)


def inside(run: str, path: str) -> str:
    full = os.path.realpath(os.path.join(run_dir(run), path))
    if not full.startswith(run_dir(run) + os.sep):
        raise Refused(f"{path} is outside this run's directory")
    return full


def ours(run: str, pid: int) -> bool:
    """Started for this run: CHAOSLOCK_RUN in its environment, or (valkey, which overwrites
    its environment with its process title) chaos-run=RUN_ID in its title."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            if f"{RUN_ENV}={run}".encode() in f.read().split(b"\0"):
                return True
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f"chaos-run={run}".encode() in f.read()
    except OSError:
        return False


def state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def our_pids(run: str) -> list[int]:
    return [int(d) for d in os.listdir("/proc") if d.isdigit() and int(d) != os.getpid() and ours(run, int(d))]


def iptables(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run(["iptables", "-w", "5", *args], capture_output=True, text=True)
    if check and r.returncode:
        raise Refused(f"iptables {' '.join(args)} failed: {r.stderr.strip()}")
    return r


def hooks(run: str) -> list[tuple[str, ...]]:
    c = chain(run)
    return [("INPUT", "-m", "comment", "--comment", c, "-j", c), ("OUTPUT", "-m", "comment", "--comment", c, "-j", c)]


def cmd_start(run: str, name: str, cwd: str, env_json: str, argv_json: str) -> int:
    if not re.fullmatch(r"[a-z0-9-]{1,32}", name):
        raise Refused(f"{name!r} is not a node name")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ETCD_", "FAKETIME", "LD_PRELOAD", "SUDO_"))}
    env.update(json.loads(env_json))
    env[RUN_ENV] = run
    log = open(os.path.join(run_dir(run), f"{name}.log"), "ab")
    p = subprocess.Popen(json.loads(argv_json), env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                         start_new_session=True, cwd=inside(run, cwd) if cwd else run_dir(run))
    with open(os.path.join(run_dir(run), f"{name}.pid"), "w") as f:
        f.write(f"{p.pid}\n")
    return p.pid


def cmd_signal(run: str, pid: str, sig: str) -> bool:
    n = int(pid)
    if not ours(run, n):
        return False
    try:
        os.killpg(n, getattr(signal, sig))
    except ProcessLookupError:
        return False
    if sig == "SIGKILL":
        deadline = time.monotonic() + 5
        while state(n) not in (None, "Z") and time.monotonic() < deadline:
            time.sleep(0.02)
    return True


def cmd_put(run: str, path: str, mode: str, data: bytes | None = None) -> int:
    full = inside(run, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    if data is None:
        data = sys.stdin.buffer.read()
    tmp = full + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.chmod(tmp, int(mode, 8))
    os.replace(tmp, full)
    return len(data)


def cmd_mkdir(run: str, name: str) -> bool:
    """A node's data dir, private (etcd wants 0700), if it is not there yet."""
    os.makedirs(inside(run, name), mode=0o700, exist_ok=True)
    return True


def cmd_wipe(run: str, name: str) -> bool:
    """Empty a node's data dir (a restart without its data)."""
    full = inside(run, name)
    shutil.rmtree(full, ignore_errors=True)
    os.makedirs(full, mode=0o700)
    return True


def cmd_read(run: str, path: str, offset: str) -> str:
    try:
        with open(inside(run, path), "rb") as f:
            f.seek(int(offset))
            return f.read().decode(errors="replace")
    except FileNotFoundError:
        return ""


def cmd_size(run: str, path: str) -> int:
    try:
        return os.path.getsize(inside(run, path))
    except FileNotFoundError:
        return 0


def cmd_cut(run: str, addrs: str) -> int:
    c = chain(run)
    if iptables("-n", "-L", c, check=False).returncode:
        iptables("-N", c)
    for hook in hooks(run):
        if iptables("-C", *hook, check=False).returncode:
            iptables("-I", *hook)
    iptables("-F", c)
    cut = [a for a in addrs.split(",") if a]
    for a in cut:
        iptables("-A", c, "-s", a, "-j", "DROP")
        iptables("-A", c, "-d", a, "-j", "DROP")
    return len(cut)


def cmd_heal(run: str) -> bool:
    return iptables("-F", chain(run), check=False).returncode == 0


def cmd_probe(run: str, host: str, port: str) -> bool:
    try:
        socket.create_connection((host, int(port)), timeout=0.3).close()
        return True
    except OSError:
        return False


def cmd_clock(run: str, pid: str, offset: str) -> bool:
    n = int(pid)
    if not ours(run, n):
        raise Refused(f"process {n} is not one of this run's servers")
    sys.path.insert(0, run_dir(run))
    import timewarp  # shipped beside this file by the provider

    timewarp.set_offset(n, float(offset))
    return True


def remove_chain(run: str) -> list[str]:
    c = chain(run)
    done = []
    for hook in hooks(run):
        while iptables("-D", *hook, check=False).returncode == 0:
            done.append(f"rule {' '.join(hook)}")
    if iptables("-n", "-L", c, check=False).returncode == 0:
        iptables("-F", c, check=False)
        iptables("-X", c, check=False)
        done.append(f"chain {c}")
    return done


def cmd_down(run: str) -> list[str]:
    done = []
    pids = our_pids(run)
    for n in pids:
        for sig in (signal.SIGCONT, signal.SIGTERM):
            try:
                os.kill(n, sig)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(state(n) not in (None, "Z") for n in pids):
        time.sleep(0.05)
    for n in pids:
        if state(n) not in (None, "Z"):
            try:
                os.kill(n, signal.SIGKILL)
            except ProcessLookupError:
                pass
        done.append(f"process {n}")
        for f in (f"/dev/shm/faketime_shm_{n}", f"/dev/shm/sem.faketime_sem_{n}"):  # libfaketime leaves these
            try:
                os.unlink(f)
                done.append(f"file {f}")
            except OSError:
                pass
    if shutil.which("iptables"):
        done += remove_chain(run)
    if os.path.isdir(run_dir(run)):
        shutil.rmtree(run_dir(run), ignore_errors=True)
        done.append(f"dir {run_dir(run)}")
    for d in (os.path.join(BASE, HOST), BASE):
        try:
            os.rmdir(d)
        except OSError:
            pass
    return done


def cmd_batch(run: str) -> list:
    """Several commands in one round trip: stdin is a JSON list of [COMMAND, ARG...] (a put's
    data as a last item {"b64": ...}); the answers, in order. The first failure stops it."""
    import base64

    out = []
    for item in json.loads(sys.stdin.buffer.read()):
        command, *args = item
        if command not in COMMANDS or command in ("batch", "down"):
            raise Refused(f"{command!r} cannot be batched")
        if command == "put" and args and isinstance(args[-1], dict):
            args[-1] = base64.b64decode(args[-1]["b64"])
        if command in ("start", "put", "mkdir"):
            os.makedirs(run_dir(run), mode=0o700, exist_ok=True)
        out.append(COMMANDS[command](run, *args))
    return out


def cmd_runs(run: str) -> list[str]:
    try:
        return sorted(d for d in os.listdir(os.path.join(BASE, HOST)) if RUN_ID.fullmatch(d))
    except FileNotFoundError:
        return []


COMMANDS = {"start": cmd_start, "signal": cmd_signal, "alive": lambda run, pid: state(int(pid)) not in (None, "Z"),
            "put": cmd_put, "mkdir": cmd_mkdir, "wipe": cmd_wipe, "read": cmd_read, "size": cmd_size, "cut": cmd_cut, "heal": cmd_heal,
            "probe": cmd_probe, "clock": cmd_clock, "down": cmd_down, "runs": cmd_runs, "batch": cmd_batch}


def main(argv: list[str]) -> int:
    global HOST
    where = WHERE.fullmatch(argv[0]) if argv else None
    if len(argv) < 2 or argv[1] not in COMMANDS or where is None:
        print("usage: ssh_helper.py RUN_ID/HOST COMMAND [ARGS...] (see its docstring)", file=sys.stderr)
        return 2
    run, command, HOST = where.group("run"), argv[1], where.group("host")
    try:
        if command in ("start", "put", "mkdir"):
            os.makedirs(run_dir(run), mode=0o700, exist_ok=True)
        out = COMMANDS[command](run, *argv[2:])
    except (Refused, OSError, ValueError, TypeError) as e:
        print(f"{command}: {e}", file=sys.stderr)
        return 3
    except Exception as e:  # timewarp's own error, one sentence
        print(f"{command}: {e}", file=sys.stderr)
        return 3
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
