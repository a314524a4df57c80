#!/usr/bin/env bash
# Builds the Go reference client (clients/go-etcd: etcd's clientv3/concurrency Mutex) into
# clients/go-etcd/bin/go-etcd, installing Go and etcd's Go source from Debian if missing.
# Offline: GOPATH mode against /usr/share/gocode (no Go module proxy). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/../.."

need=()
for pkg in golang-go golang-etcd-server-dev; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "go-etcd: missing Debian packages: ${need[*]}; run as root (or: sudo apt-get install ${need[*]})" >&2
    exit 254
  fi
  echo "go-etcd: apt-get install ${need[*]}"
  apt-get -o DPkg::Lock::Timeout=600 update -qq
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

dir=clients/go-etcd
if [ -x "$dir/bin/go-etcd" ] && [ "$dir/bin/go-etcd" -nt "$dir/main.go" ]; then
  exit 0  # up to date
fi
echo "go-etcd: go build $dir/bin/go-etcd"
mkdir -p "$dir/bin/gopath"
[ -n "${HOME:-}" ] || export GOCACHE="$PWD/$dir/bin/cache"
(cd "$dir" && GO111MODULE=off GOPATH="$PWD/bin/gopath:/usr/share/gocode" GOPROXY=off GOFLAGS= \
  go build -o bin/go-etcd.tmp . && mv bin/go-etcd.tmp bin/go-etcd)
