#!/usr/bin/env bash
# Builds the ZooKeeper yardstick (clients/zk-yardstick: the ZooKeeper design's create
# EPHEMERAL_SEQUENTIAL + delete cycle on ZooKeeper's own Java client, many threads;
# harness/commands/compare/yardstick.py runs it) from Debian packages only, and writes its
# launcher clients/zk-yardstick/bin/zk-yardstick. Safe to run again: compiles only when the
# source is newer than the class file.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=clients/zk-yardstick

. scripts/debs.sh
need_debs zk-yardstick zookeeper libslf4j-java openjdk-17-jdk-headless

J=/usr/share/java
cp="$J/zookeeper.jar:$J/slf4j-api.jar"
if [ ! "$dir/build/ZkYardstick.class" -nt "$dir/ZkYardstick.java" ]; then
  echo "zk-yardstick: javac $dir/ZkYardstick.java"
  mkdir -p "$dir/build"
  javac -nowarn -d "$dir/build" -cp "$cp" "$dir/ZkYardstick.java"
  touch "$dir/build/ZkYardstick.class"
fi

mkdir -p "$dir/bin"
cat > "$dir/bin/zk-yardstick.tmp" <<LAUNCHER
#!/bin/sh
# Written by scripts/clients/zk-yardstick.sh.
here=\$(cd "\$(dirname "\$0")/.." && pwd)
exec java -Xmx256m -XX:+UseSerialGC -cp "\$here/build:$cp:$J/slf4j-nop.jar" ZkYardstick "\$@"
LAUNCHER
chmod +x "$dir/bin/zk-yardstick.tmp"
mv "$dir/bin/zk-yardstick.tmp" "$dir/bin/zk-yardstick"
