#!/usr/bin/env bash
# Builds the ZooKeeper load driver (clients/zk-load-driver: the native load mode of the built-in
# `zookeeper` design on ZooKeeper's own Java client, many threads; harness/engine/native.py runs
# it for -o load_driver=native) and its launcher clients/zk-load-driver/bin/zk-load-driver, from
# Debian packages only (scripts/javabuild.sh). Safe to run again. The heap holds the history
# until the run ends: 3 GB is the default history cap (-o max_history_mb=2048) at ~100 bytes an op.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/javabuild.sh
java_build zk-load-driver ZkLoadDriver 3g
