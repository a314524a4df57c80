#!/usr/bin/env bash
# kazoo's Lock, ReadLock, WriteLock and Semaphore over the client protocol (clients/py-kazoo): a venv with its pinned release.
# Safe to run again: installs only when requirements.txt changed.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/pyvenv.sh
make_venv clients/py-kazoo
