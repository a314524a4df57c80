#!/usr/bin/env bash
# The Node reference client (clients/node-redlock): its pinned npm packages. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/../../clients/node-redlock"
if ! command -v npm >/dev/null 2>&1; then
  echo "install: npm is missing; the Node reference client is not installed" >&2
  exit 0
fi
if [ ! -d node_modules/redlock ] || [ ! -d node_modules/ioredis ]; then
  echo "install: npm install (redlock 4.2.0, ioredis 4.28.5) in clients/node-redlock"
  npm install --silent --no-audit --no-fund >/dev/null  # package-lock.json pins the transitive packages
fi
