# Sourced by the install scripts: `need_debs WHO PKG...` installs the Debian packages that are
# missing (as root; otherwise one sentence naming them and exit 254). apt waits for a lock
# another install holds instead of failing.
need_debs() {
  local who=$1 need=() pkg
  shift
  for pkg in "$@"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
  done
  [ ${#need[@]} -eq 0 ] && return 0
  if [ "$(id -u)" != 0 ]; then
    echo "$who: missing Debian packages: ${need[*]}; run as root (or: sudo apt-get install ${need[*]})" >&2
    exit 254
  fi
  echo "$who: apt-get install ${need[*]}"
  apt-get -o DPkg::Lock::Timeout=600 update -qq
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends \
    "${need[@]}" >/dev/null
}
