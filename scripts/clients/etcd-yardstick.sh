#!/usr/bin/env bash
# Builds the etcd yardstick (clients/etcd-yardstick: the etcd design's lock cycle on etcd's own Go client, many goroutines; harness/commands/compare/yardstick.py runs it)
# into clients/etcd-yardstick/bin/etcd-yardstick, offline (scripts/gobuild.sh). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/gobuild.sh
go_build etcd-yardstick
