#!/usr/bin/env bash
# The Node client clients/node-redis-semaphore: its pinned npm packages. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/../../clients/node-redis-semaphore"
if ! command -v npm >/dev/null 2>&1; then
  echo "install: npm is missing; clients/node-redis-semaphore is not installed" >&2
  exit 0
fi
if [ ! -d node_modules/redis-semaphore ] || [ ! -d node_modules/ioredis ]; then
  echo "install: npm ci (redis-semaphore 5.8.0, ioredis 5.11.1) in clients/node-redis-semaphore"
  npm ci --silent --no-audit --no-fund >/dev/null  # package-lock.json pins the transitive packages
fi
