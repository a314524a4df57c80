#!/usr/bin/env bash
# Builds the native load driver (clients/load-driver: the redis and etcd designs' worker cycle as goroutines, every op recorded; harness/engine/native.py runs it)
# into clients/load-driver/bin/load-driver, offline (scripts/gobuild.sh). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/gobuild.sh
go_build load-driver
