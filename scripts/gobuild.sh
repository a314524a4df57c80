# Sourced by the scripts that build the Go programs under clients/: go_build NAME builds
# clients/NAME/main.go into clients/NAME/bin/NAME, installing Go and etcd's Go source from Debian
# if missing. Offline: GOPATH mode against /usr/share/gocode (no Go module proxy). Builds only when
# the source is newer than the binary.
. scripts/debs.sh

go_build() {
  local name=$1 dir=clients/$1
  need_debs "$name" golang-go golang-etcd-server-dev
  if [ -x "$dir/bin/$name" ] && [ "$dir/bin/$name" -nt "$dir/main.go" ]; then
    return 0  # up to date
  fi
  echo "$name: go build $dir/bin/$name"
  mkdir -p "$dir/bin/gopath"
  [ -n "${HOME:-}" ] || export GOCACHE="$PWD/$dir/bin/cache"
  (cd "$dir" && GO111MODULE=off GOPATH="$PWD/bin/gopath:/usr/share/gocode" GOPROXY=off GOFLAGS= \
    go build -o "bin/$name.tmp" . && mv "bin/$name.tmp" "bin/$name")
}
