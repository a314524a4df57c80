#!/usr/bin/env bash
# Builds the etcd yardstick (clients/etcd-yardstick: the etcd design's lock cycle on etcd's own
# Go client, many goroutines; harness/commands/compare/yardstick.py runs it) into
# clients/etcd-yardstick/bin/etcd-yardstick, offline like clients/go-etcd. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/../.."

. scripts/debs.sh
need_debs etcd-yardstick golang-go golang-etcd-server-dev

dir=clients/etcd-yardstick
if [ -x "$dir/bin/etcd-yardstick" ] && [ "$dir/bin/etcd-yardstick" -nt "$dir/main.go" ]; then
  exit 0  # up to date
fi
echo "etcd-yardstick: go build $dir/bin/etcd-yardstick"
mkdir -p "$dir/bin/gopath"
[ -n "${HOME:-}" ] || export GOCACHE="$PWD/$dir/bin/cache"
(cd "$dir" && GO111MODULE=off GOPATH="$PWD/bin/gopath:/usr/share/gocode" GOPROXY=off GOFLAGS= \
  go build -o bin/etcd-yardstick.tmp . && mv bin/etcd-yardstick.tmp bin/etcd-yardstick)
