# Sourced by scripts/clients/py-*.sh: make_venv DIR makes DIR/.venv with `python3 -m venv` and
# pip-installs DIR/requirements.txt into it (exact pins), unless that venv already has them.
# The venv has no system site packages: the client imports only what its requirements pin.
make_venv() {
  local dir=$1 py=${PYTHON:-python3}
  local stamp="$dir/.venv/.requirements"
  if [ -x "$dir/.venv/bin/python" ] && cmp -s "$dir/requirements.txt" "$stamp"; then
    return 0
  fi
  echo "install: venv $dir/.venv: pip install -r $dir/requirements.txt"
  "$py" -m venv --clear "$dir/.venv"
  # set -o pipefail (the callers set it): a failed pip fails the script, its warnings filtered
  "$dir/.venv/bin/python" -m pip install -q --disable-pip-version-check -r "$dir/requirements.txt" 2>&1 \
    | { grep -vE "^WARNING: Location" >&2 || true; }
  cp "$dir/requirements.txt" "$stamp"
}
