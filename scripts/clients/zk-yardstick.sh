#!/usr/bin/env bash
# Builds the ZooKeeper yardstick (clients/zk-yardstick: the ZooKeeper design's create
# EPHEMERAL_SEQUENTIAL + delete cycle on ZooKeeper's own Java client, many threads;
# harness/commands/compare/yardstick.py runs it) and its launcher clients/zk-yardstick/bin/zk-yardstick,
# from Debian packages only (scripts/javabuild.sh). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/javabuild.sh
java_build zk-yardstick ZkYardstick 256m
