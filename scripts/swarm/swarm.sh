#!/usr/bin/env bash
# A real multi-engine Docker Swarm on this one machine, for `--cluster swarm` and its tests.
#
#   scripts/swarm/swarm.sh up [N]   N engines (default 3), joined into one swarm; images loaded
#   scripts/swarm/swarm.sh down     every engine, namespace, bridge and file `up` made, and no more
#   scripts/swarm/swarm.sh status   the engines and the swarm's nodes, one line each
#   scripts/swarm/swarm.sh nodes    the engines, one per line: name, engine URL, address (the file
#                                   /run/chaoslock-swarm/nodes, which --cluster swarm reads by default)
#
# Each engine is Debian's dockerd (the one `make compose` installs) in a network namespace of
# its own, `chswarm-eI`, with the address 198.19.249.(10+I) on the bridge `chswarm0`
# (198.19.249.1/24) in the host's namespace; it is started with `nsenter --net` (`ip netns exec`
# remounts /sys, which dockerd then misreads), with its own data root, exec root, socket
# (/run/chaoslock-swarm/eI.sock), cgroup parent and address pools, all inside 198.18.0.0/15:
# its docker0 198.19.24I.1/24, its local networks (docker_gwbridge) from 198.19.23I.0/24, the
# swarm's overlay networks (ingress too) from 198.19.192.0/20. Engine e1 initialises the swarm
# and is its manager; the others join as workers. Each node carries the label chaoslock.node=eI:
# the swarm provider places servers by it (the engines share one host name).
# Images: every image the host's engine has for the project (servers and harness) is loaded
# into each engine, engine to engine (docker save | docker load): no registry is involved.
# Engines started here outlive the script, as `make compose`'s dockerd does; `down` stops them.
set -euo pipefail
cd "$(dirname "$0")/../.."

BASE=/run/chaoslock-swarm          # sockets, pid files, configs, exec roots
DATA=/var/lib/chaoslock-swarm      # data roots (images); `down` keeps them as a cache unless PURGE=1
LOG=/var/log/chaoslock-swarm
BRIDGE=chswarm0
NET=198.19.249
MANIFEST=$BASE/engines             # one line per engine this script started: name pid
NODES=$BASE/nodes                  # --cluster swarm's default engines file: name engine-url address

sock() { echo "unix://$BASE/$1.sock"; }
d() { local e=$1; shift; docker -H "$(sock "$e")" "$@"; }
engine_up() { d "$1" info >/dev/null 2>&1; }

images() {  # the project's images on the host's engine
  docker images --format '{{.Repository}}:{{.Tag}}' 2>/dev/null | grep -E '^chaoslock-' | grep -v '<none>' || true
}

down() {
  if [ -f "$MANIFEST" ]; then
    while read -r e pid; do
      [ -n "$e" ] || continue
      d "$e" swarm leave --force >/dev/null 2>&1 || true
      if kill -0 "$pid" 2>/dev/null && grep -q dockerd "/proc/$pid/comm" 2>/dev/null; then
        kill "$pid"
        for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
      fi
      # the engine's own containerd and shims, if its end left them
      pkill -f -- "--state $BASE/$e/" 2>/dev/null || true
      pkill -f -- "$BASE/$e/containerd" 2>/dev/null || true
      for m in $(awk -v p="$BASE/$e" -v q="$DATA/$e" '$2 ~ "^"p || $2 ~ "^"q {print $2}' /proc/mounts | sort -r); do
        umount -l "$m" 2>/dev/null || true
      done
      ip netns del "chswarm-$e" 2>/dev/null || true
      rm -rf "${BASE:?}/$e" "$BASE/$e.sock" "$BASE/$e.pid" "$BASE/$e.json"
      [ "${PURGE:-0}" = 1 ] && rm -rf "${DATA:?}/$e"
      # cgroups the engine's containers left (cgroup v1: one dir per controller)
      for c in /sys/fs/cgroup/*/chaoslock-swarm-"$e"; do [ -d "$c" ] && find "$c" -depth -type d -exec rmdir {} + 2>/dev/null; done
      true
    done < "$MANIFEST"
    rm -f "$MANIFEST" "$NODES"
  fi
  ip link del "$BRIDGE" 2>/dev/null || true
  rmdir "$BASE" 2>/dev/null || true
}

# load_images N: every project image of the host's engine into engines e1..eN where it is missing
# or differs (its id: a rebuilt image keeps its tag); prints the images.
load_images() {
  local n=$1 imgs img want
  imgs=$(images)
  for img in $imgs; do
    want=$(docker image inspect -f '{{.Id}}' "$img")
    for i in $(seq "$n"); do
      [ "$(d "e$i" image inspect -f '{{.Id}}' "$img" 2>/dev/null)" = "$want" ] || docker save "$img" | d "e$i" load -q >/dev/null
    done
  done
  echo "$imgs"
}

up() {
  local n=${1:-3}
  case "$n" in [2-9]) ;; *) echo "swarm: N must be 2 to 9 engines; got $n" >&2; exit 254 ;; esac
  command -v dockerd >/dev/null || { echo "swarm: dockerd is not installed; run \`make compose\` first" >&2; exit 254; }
  if [ -f "$MANIFEST" ]; then  # up already: fine if every engine answers (make swarm is safe to run again)
    local dead=0
    while read -r e _; do engine_up "$e" || dead=1; done < "$MANIFEST"
    if [ "$dead" = 0 ]; then
      load_images "$(wc -l < "$MANIFEST")" >/dev/null  # an image rebuilt since (make compose-harness) goes to every engine
      echo "swarm: up already ($(wc -l < "$MANIFEST") engines; \`$0 status\` lists them)"
      return 0
    fi
    echo "swarm: a swarm made here is recorded in $MANIFEST but an engine does not answer; \`$0 down\` then up again" >&2
    exit 254
  fi
  mkdir -p "$BASE" "$DATA" "$LOG"
  : > "$MANIFEST"
  trap 'echo "swarm: up failed; taking down what it made" >&2; down' ERR INT TERM
  ip link add "$BRIDGE" type bridge
  ip addr add "$NET.1/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  # traffic between the engines crosses this bridge: let it through the host's FORWARD chain
  # (Docker's own engine sets that chain's policy to DROP)
  iptables -C FORWARD -i "$BRIDGE" -o "$BRIDGE" -j ACCEPT -m comment --comment chaoslock-swarm 2>/dev/null ||
    iptables -I FORWARD -i "$BRIDGE" -o "$BRIDGE" -j ACCEPT -m comment --comment chaoslock-swarm
  for i in $(seq "$n"); do
    local e=e$i ns=chswarm-e$i addr=$NET.$((10 + i))
    ip netns add "$ns"
    ip link add "chsw$i" type veth peer name eth0 netns "$ns"
    ip link set "chsw$i" master "$BRIDGE" up
    ip -n "$ns" addr add "$addr/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    ip -n "$ns" route add default via "$NET.1"
    mkdir -p "$BASE/$e" "$DATA/$e"
    printf '{"bip": "198.19.24%s.1/24", "default-address-pools": [{"base": "198.19.23%s.0/24", "size": 26}],\n "hosts": ["%s"], "data-root": "%s", "exec-root": "%s", "pidfile": "%s",\n "cgroup-parent": "/chaoslock-swarm-%s", "log-level": "warn"}\n' \
      "$i" "$i" "$(sock "$e")" "$DATA/$e" "$BASE/$e" "$BASE/$e.pid" "$e" > "$BASE/$e.json"
    (
      for fd in $(ls /proc/$BASHPID/fd); do if [ "$fd" -gt 2 ]; then eval "exec $fd>&-"; fi; done
      # A swarm task's image is pulled before every start unless this is set, even when the
      # engine has it: with no registry reachable, each start then waits out the pull (10-20 s).
      export DOCKER_SERVICE_PREFER_OFFLINE_IMAGE=1
      exec setsid nsenter --net="/run/netns/$ns" dockerd --config-file "$BASE/$e.json" >>"$LOG/$e.log" 2>&1 </dev/null
    ) &
    echo "$e $!" >> "$MANIFEST"
  done
  for i in $(seq "$n"); do
    for _ in $(seq 300); do engine_up "e$i" && break; sleep 0.1; done
    engine_up "e$i" || { echo "swarm: engine e$i did not answer within 30 s; see $LOG/e$i.log" >&2; false; }
  done
  d e1 swarm init --advertise-addr "$NET.11" --listen-addr "$NET.11:2377" \
    --default-addr-pool 198.19.192.0/20 --default-addr-pool-mask-length 24 >/dev/null
  local token
  token=$(d e1 swarm join-token -q worker)
  for i in $(seq 2 "$n"); do
    d "e$i" swarm join --token "$token" --advertise-addr "$NET.$((10 + i))" --listen-addr "$NET.$((10 + i)):2377" "$NET.11:2377" >/dev/null
  done
  for i in $(seq "$n"); do
    d e1 node update --label-add "chaoslock.node=e$i" "$(d "e$i" info --format '{{.Swarm.NodeID}}')" >/dev/null
  done
  local imgs
  imgs=$(load_images "$n")
  for i in $(seq "$n"); do echo "e$i $(sock "e$i") $NET.$((10 + i))"; done > "$NODES"
  trap - ERR INT TERM
  echo "swarm: $n engines up ($(sock e1) manager; addresses $NET.11-$NET.$((10 + n))); images: ${imgs:-none (run make compose)}" | tr '\n' ' '
  echo
}

status() {
  [ -f "$MANIFEST" ] || { echo "swarm: not up"; return 0; }
  while read -r e pid; do
    if engine_up "$e"; then echo "$e $(sock "$e") up (dockerd pid $pid)"; else echo "$e $(sock "$e") DOWN"; fi
  done < "$MANIFEST"
  d e1 node ls --format '{{.Hostname}} {{.ManagerStatus}} {{.Status}} {{.ID}}' 2>/dev/null || true
}

nodes() {
  [ -f "$NODES" ] || { echo "swarm: not up; \`$0 up\` first" >&2; exit 2; }
  cat "$NODES"
}

case "${1:-}" in
  up) up "${2:-3}" ;;
  down) down; iptables -D FORWARD -i "$BRIDGE" -o "$BRIDGE" -j ACCEPT -m comment --comment chaoslock-swarm 2>/dev/null || true ;;
  status) status ;;
  nodes) nodes ;;
  *) echo "usage: $0 up [N] | down | status | nodes" >&2; exit 254 ;;
esac
