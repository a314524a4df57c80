#!/usr/bin/env bash
# The Docker engine and the Compose v2 CLI for `--cluster compose`, on Debian 12 as root.
# Safe to run again: installs only what is missing, starts dockerd only if none answers.
#
# - Engine: Debian's docker.io (20.10.24). Before its first start it gets
#   /etc/docker/daemon.json with its bridge and address pools inside 198.18.0.0/15 (the
#   default 172.17.0.0/16 is forbidden on this project's hosts). A daemon.json that exists
#   already is left alone: if it does not keep Docker inside 198.18.0.0/15 this script says
#   so and stops, rather than rewrite someone else's configuration.
# - dockerd is started in the background (no systemd on these hosts) and left running, as
#   the Debian package would leave it under systemd; its log is /var/log/chaoslock-dockerd.log.
#   `scripts/compose/engine.sh stop` stops a dockerd this script started, and only that one.
# - Compose v2: Debian bookworm has only docker-compose 1.29 (v1), which rejects the file.
#   The plugin comes from Debian's own build of Compose v2 (trixie's docker-compose
#   2.26.1-4, a static Go binary needing only libc6 >= 2.34), fetched from Debian's mirror
#   and checked against the SHA256 that trixie's signed Packages index gives for it.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/debs.sh

DAEMON_JSON=/etc/docker/daemon.json
PIDFILE=/run/chaoslock-dockerd.pid
LOG=/var/log/chaoslock-dockerd.log
COMPOSE_DEB=docker-compose_2.26.1-4_amd64.deb
COMPOSE_SHA256=47681197cb2b1ab88206b42a1a92fc75f50d9530a6322d03494a473eed0408ea
COMPOSE_URL=http://deb.debian.org/debian/pool/main/d/docker-compose/$COMPOSE_DEB
BIP=198.18.254.1/24
POOL=198.19.128.0/17

engine_up() { docker info >/dev/null 2>&1; }

if [ "${1:-}" = stop ]; then
  if [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
    kill "$(cat "$PIDFILE")"
    for _ in $(seq 100); do kill -0 "$(cat "$PIDFILE")" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -f "$PIDFILE"
  exit 0
fi

need_debs compose docker.io curl procps

if [ -e "$DAEMON_JSON" ]; then
  if ! python3 - "$DAEMON_JSON" <<'EOF'
import ipaddress, json, sys
conf = json.load(open(sys.argv[1]))
ok = ipaddress.ip_network("198.18.0.0/15")
nets = [ipaddress.ip_interface(conf["bip"]).network] if "bip" in conf else []
nets += [ipaddress.ip_network(p["base"]) for p in conf.get("default-address-pools", [])]
sys.exit(0 if "bip" in conf and conf.get("default-address-pools") and all(n.subnet_of(ok) for n in nets) else 1)
EOF
  then
    echo "compose: $DAEMON_JSON exists and does not keep Docker's bridge and address pools inside 198.18.0.0/15;" \
         "this script does not rewrite it. Set \"bip\": \"$BIP\" and \"default-address-pools\":" \
         "[{\"base\": \"$POOL\", \"size\": 24}] there yourself (and restart dockerd), then run this again." >&2
    exit 254
  fi
else
  mkdir -p /etc/docker
  printf '{\n  "bip": "%s",\n  "default-address-pools": [{"base": "%s", "size": 24}]\n}\n' "$BIP" "$POOL" > "$DAEMON_JSON"
  echo "compose: wrote $DAEMON_JSON (bridge $BIP, address pools $POOL)"
fi

if ! engine_up; then
  if pgrep -x dockerd >/dev/null; then
    echo "compose: a dockerd runs but does not answer \`docker info\`; look at it (or stop it) and run this again" >&2
    exit 254
  fi
  # A containerd pid file left by a dockerd of an earlier boot (a /run that outlived its
  # processes) may name a pid that is now another process: dockerd then waits for that
  # "containerd" and gives up. Remove it unless it names a live containerd.
  CPID=/run/docker/containerd/containerd.pid
  if [ -f "$CPID" ] && [ "$(cat "/proc/$(cat "$CPID")/comm" 2>/dev/null)" != containerd ]; then
    rm -f "$CPID"
  fi
  echo "compose: starting dockerd (log: $LOG)"
  # dockerd outlives this script: it must not keep what its caller opened (a flock's lock, a pipe
  # someone reads to its end), so every descriptor above 2 is closed before it starts.
  (
    for fd in $(ls /proc/$BASHPID/fd); do if [ "$fd" -gt 2 ]; then eval "exec $fd>&-"; fi; done
    exec setsid nohup dockerd --config-file "$DAEMON_JSON" >>"$LOG" 2>&1 < /dev/null
  ) &
  echo $! > "$PIDFILE"
  for _ in $(seq 300); do engine_up && break; sleep 0.1; done
  engine_up || { echo "compose: dockerd did not answer within 30 s; see $LOG" >&2; exit 255; }
fi

if ! docker compose version 2>/dev/null | grep -qE ' v?2\.'; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  echo "compose: installing Debian's Compose v2 ($COMPOSE_DEB)"
  curl -fsS --retry 3 -o "$tmp/$COMPOSE_DEB" "$COMPOSE_URL"
  echo "$COMPOSE_SHA256  $tmp/$COMPOSE_DEB" | sha256sum -c --quiet
  DEBIAN_FRONTEND=noninteractive dpkg -i "$tmp/$COMPOSE_DEB" >/dev/null
  # Debian installs the plugin where its own docker.io CLI looks; the docker CLI of the PATH may be another.
  plugin=$(dpkg -L docker-compose | grep '/cli-plugins/docker-compose$' | head -1)
  if ! docker compose version >/dev/null 2>&1; then
    mkdir -p /usr/local/lib/docker/cli-plugins
    ln -sf "$plugin" /usr/local/lib/docker/cli-plugins/docker-compose
  fi
  docker compose version | grep -qE ' v?2\.' || { echo "compose: \`docker compose version\` does not answer v2 after the install" >&2; exit 255; }
fi
