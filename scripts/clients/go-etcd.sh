#!/usr/bin/env bash
# Builds the Go reference client (clients/go-etcd: etcd's clientv3/concurrency Mutex)
# into clients/go-etcd/bin/go-etcd, offline (scripts/gobuild.sh). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/gobuild.sh
go_build go-etcd
