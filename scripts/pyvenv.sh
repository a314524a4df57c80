# Sourced by scripts/clients/py-*.sh: make_venv DIR makes DIR/.venv with `python3 -m venv` and
# pip-installs DIR/requirements.txt into it (exact pins), unless that venv already has them.
# The venv has no system site packages: the client imports only what its requirements pin.
# About 5 s per client from PyPI. When pip cannot install (no index reachable), it says so and
# leaves no venv, and `make install` goes on without that client (its campaign test says so).
make_venv() {
  local dir=$1 py=${PYTHON:-python3}
  local stamp="$dir/.venv/.requirements"
  if [ -x "$dir/.venv/bin/python" ] && cmp -s "$dir/requirements.txt" "$stamp"; then
    return 0
  fi
  echo "install: venv $dir/.venv: pip install -r $dir/requirements.txt"
  "$py" -m venv --clear "$dir/.venv"
  if ! "$dir/.venv/bin/python" -m pip install -q --disable-pip-version-check -r "$dir/requirements.txt" \
       > "$dir/.venv/pip.log" 2>&1; then
    grep -vE '^WARNING: Location' "$dir/.venv/pip.log" | tail -5 >&2
    echo "install: pip could not install $dir/requirements.txt; that client is not installed" >&2
    rm -rf "$dir/.venv"
    return 0
  fi
  cp "$dir/requirements.txt" "$stamp"
}
