#!/usr/bin/env bash
# The Node client clients/node-etcd3: its pinned npm packages. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/../../clients/node-etcd3"
if ! command -v npm >/dev/null 2>&1; then
  echo "install: npm is missing; clients/node-etcd3 is not installed" >&2
  exit 0
fi
if [ ! -d node_modules/etcd3 ] || [ ! -d node_modules/@grpc/grpc-js ]; then
  echo "install: npm ci (etcd3 1.1.2) in clients/node-etcd3"
  npm ci --silent --no-audit --no-fund >/dev/null  # package-lock.json pins the transitive packages
fi
