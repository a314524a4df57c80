#!/usr/bin/env bash
# Builds the images of compose/docker-compose.yml, on a host with a running Docker engine
# (scripts/compose/engine.sh). Safe to run again: an image is rebuilt only when its build
# context (Dockerfile, copied files, base) changed, which a label on the image records.
#
# Every Dockerfile takes its base as the build ARG BASE, whose default is a pinned public
# image. Where that image cannot be pulled (no registry reachable), a local base is made
# from Debian's own mirror: `debootstrap --variant=minbase bookworm`, `docker import`ed as
# chaoslock-base:bookworm. Set CHAOSLOCK_BASE_IMAGE to use another base. Image names are
# those of harness/cluster/compose_file.py, each overridable by CHAOSLOCK_IMAGE_<KIND>.
#
# Nothing here needs https inside a build: the valkey binary and the harness's Python
# wheels are taken on the host (with the host's own trust store) into a temporary build
# context; the containers fetch only Debian packages, from Debian's plain-http mirror.
#   images.sh [valkey etcd zookeeper harness]   (default: every kind of harness/cluster/kinds.py)
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/debs.sh

PUBLIC_BASE=debian:bookworm-20241202-slim
LOCAL_BASE=chaoslock-base:bookworm
MIRROR=http://deb.debian.org/debian
export DOCKER_BUILDKIT=0  # the classic builder: no buildx plugin needed, same result
PY=${PYTHON:-python3}
WORK=$(mktemp -d /var/tmp/chaoslock-images.XXXXXX)  # every build context and log; gone on any exit
trap 'rm -rf "$WORK"' EXIT

image_name() { "$PY" -c "import sys; from harness.cluster.compose_file import image; print(image(sys.argv[1]))" "$1"; }
server_kinds() { "$PY" -c "from harness.cluster.kinds import KINDS; print(*KINDS)"; }
# shipped KIND: "PATH NAME" of the binary a kind with no Debian package brings (ShipsBinary), or nothing
shipped() {
  "$PY" -c "import sys; from harness.cluster.kinds import server_kind; from harness.core.contracts import ShipsBinary
k = server_kind(sys.argv[1])
if isinstance(k, ShipsBinary): print(k.local_binary(), k.binary)" "$1"
}

base_image() {
  if [ -n "${CHAOSLOCK_BASE_IMAGE:-}" ]; then echo "$CHAOSLOCK_BASE_IMAGE"; return; fi
  if docker image inspect "$PUBLIC_BASE" >/dev/null 2>&1 || timeout 120 docker pull -q "$PUBLIC_BASE" >/dev/null 2>&1; then
    echo "$PUBLIC_BASE"; return
  fi
  if ! docker image inspect "$LOCAL_BASE" >/dev/null 2>&1; then
    need_debs compose debootstrap >&2
    local root=$WORK/base
    echo "images: $PUBLIC_BASE cannot be pulled; making $LOCAL_BASE with debootstrap from $MIRROR" >&2
    local t0=$SECONDS
    if ! debootstrap --variant=minbase bookworm "$root" "$MIRROR" >"$root.log" 2>&1; then
      echo "images: debootstrap failed:" >&2
      tail -20 "$root.log" >&2
      exit 255
    fi
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    tar -C "$root" -c . | docker import - "$LOCAL_BASE" >/dev/null
    rm -rf "$root"
    echo "images: $LOCAL_BASE made in $((SECONDS - t0)) s" >&2
  fi
  echo "$LOCAL_BASE"
}

# build KIND: assemble the context in a temp dir, hash it, build unless an image with that hash exists.
build() {
  local kind=$1 name ctx sum have t0=$SECONDS
  name=$(image_name "$kind")
  ctx=$WORK/$kind
  mkdir "$ctx"
  cp "compose/Dockerfile.$kind" "$ctx/Dockerfile"
  case $kind in
    harness)
      git ls-files -z -- pyproject.toml README.md expectations.toml harness workloads nemesis results compose clients docs \
        | tar --null -T - -c | tar -C "$ctx" -x --one-top-level=src
      # async-timeout: redis needs it on Python < 3.11.3, and Debian's is 3.11.2
      if ! "$PY" -m pip wheel -q --disable-pip-version-check -w "$ctx/wheels" "$ctx/src[test]" setuptools wheel \
           async-timeout >"$ctx.pip" 2>&1; then
        echo "images: pip wheel failed:" >&2; tail -20 "$ctx.pip" >&2; exit 255
      fi
      rm -f "$ctx"/wheels/chaoslock-*.whl
      cp "$(command -v docker)" "$ctx/docker"
      cp "$(docker info --format '{{range .ClientInfo.Plugins}}{{if eq .Name "compose"}}{{.Path}}{{end}}{{end}}')" "$ctx/docker-compose"
      ;;
    *)
      local bin
      bin=$(shipped "$kind")
      if [ -n "$bin" ]; then cp "${bin% *}" "$ctx/${bin##* }"; fi
      ;;
  esac
  # Wheels count by name (version), not bytes: a wheel built from an sdist differs in its timestamps every time.
  sum=$( (echo "$BASE"; cd "$ctx" && find . -type f ! -path './wheels/*' -print0 | sort -z | xargs -0 sha256sum
          if [ -d wheels ]; then ls wheels; fi) | sha256sum | cut -c1-16)
  have=$(docker image inspect -f '{{index .Config.Labels "chaoslock.context"}}' "$name" 2>/dev/null || true)
  if [ "$have" = "$sum" ]; then
    echo "images: $name is up to date"
    return
  fi
  echo "images: building $name from $BASE"
  if ! docker build -q --force-rm --network host --build-arg "BASE=$BASE" --label "chaoslock.context=$sum" -t "$name" "$ctx" >"$ctx.log" 2>&1; then
    echo "images: building $name failed:" >&2
    tail -20 "$ctx.log" >&2
    exit 255
  fi
  echo "images: $name built in $((SECONDS - t0)) s"
}

BASE=$(base_image)
for kind in "${@:-$(server_kinds)}"; do
  for k in $kind; do build "$k"; done
done
# Dangling layers of images this script replaced.
docker image prune -f --filter label=chaoslock.context >/dev/null
