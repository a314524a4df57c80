#!/usr/bin/env bash
# pottery's Redlock over the client protocol (clients/py-pottery): a venv with its pinned release.
# Safe to run again: installs only when requirements.txt changed.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/pyvenv.sh
make_venv clients/py-pottery
