#!/usr/bin/env bash
# python-redis-lock's Lock over the client protocol (clients/py-redis-lock): a venv with its pinned release.
# Safe to run again: installs only when requirements.txt changed.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/pyvenv.sh
make_venv clients/py-redis-lock
