#!/usr/bin/env bash
# The Node client clients/node-redlock5: its pinned npm packages. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/../../clients/node-redlock5"
if ! command -v npm >/dev/null 2>&1; then
  echo "install: npm is missing; clients/node-redlock5 is not installed" >&2
  exit 0
fi
if [ ! -d node_modules/redlock ] || [ ! -d node_modules/ioredis ]; then
  echo "install: npm ci (redlock 5.0.0-beta.2, ioredis 5.11.1) in clients/node-redlock5"
  npm ci --silent --no-audit --no-fund >/dev/null  # package-lock.json pins the transitive packages
fi
