#!/usr/bin/env bash
# Builds the Go reference client (clients/go-etcd: etcd's clientv3/concurrency Mutex) into
# clients/go-etcd/bin/go-etcd, installing Go and etcd's Go source from Debian if missing.
# Offline: GOPATH mode against /usr/share/gocode (no Go module proxy). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/../.."

. scripts/debs.sh
need_debs go-etcd golang-go golang-etcd-server-dev

dir=clients/go-etcd
if [ -x "$dir/bin/go-etcd" ] && [ "$dir/bin/go-etcd" -nt "$dir/main.go" ]; then
  exit 0  # up to date
fi
echo "go-etcd: go build $dir/bin/go-etcd"
mkdir -p "$dir/bin/gopath"
[ -n "${HOME:-}" ] || export GOCACHE="$PWD/$dir/bin/cache"
(cd "$dir" && GO111MODULE=off GOPATH="$PWD/bin/gopath:/usr/share/gocode" GOPROXY=off GOFLAGS= \
  go build -o bin/go-etcd.tmp . && mv bin/go-etcd.tmp bin/go-etcd)
