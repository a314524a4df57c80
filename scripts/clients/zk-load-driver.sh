#!/usr/bin/env bash
# Builds the ZooKeeper load driver (clients/zk-load-driver: the native load mode of the built-in
# `zookeeper` design on ZooKeeper's own Java client, many threads; harness/engine/native.py runs
# it for -o load_driver=native) from Debian packages only, and writes its launcher
# clients/zk-load-driver/bin/zk-load-driver. Safe to run again: compiles only when a source is
# newer than the class file.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=clients/zk-load-driver

. scripts/debs.sh
need_debs zk-load-driver zookeeper libslf4j-java openjdk-17-jdk-headless

J=/usr/share/java
cp="$J/zookeeper.jar:$J/slf4j-api.jar"
stale=
for src in "$dir"/*.java; do
  [ "$dir/build/ZkLoadDriver.class" -nt "$src" ] || stale=1
done
if [ -n "$stale" ]; then
  echo "zk-load-driver: javac $dir/*.java"
  mkdir -p "$dir/build"
  # sun.misc.Signal (SIGTERM ends the run early, as the Go driver's) draws a warning -nowarn keeps
  javac -nowarn -d "$dir/build" -cp "$cp" "$dir"/*.java
  touch "$dir/build/ZkLoadDriver.class"
fi

mkdir -p "$dir/bin"
cat > "$dir/bin/zk-load-driver.tmp" <<LAUNCHER
#!/bin/sh
# Written by scripts/clients/zk-load-driver.sh.
here=\$(cd "\$(dirname "\$0")/.." && pwd)
exec java -Xmx3g -XX:+UseSerialGC -cp "\$here/build:$cp:$J/slf4j-nop.jar" ZkLoadDriver "\$@"
LAUNCHER
chmod +x "$dir/bin/zk-load-driver.tmp"
mv "$dir/bin/zk-load-driver.tmp" "$dir/bin/zk-load-driver"
