#!/usr/bin/env bash
# Builds the Java Curator reference client (clients/java-curator) from Debian packages only, and
# writes its launcher clients/java-curator/bin/java-curator. Safe to run again: compiles only when
# the source is newer than the class file.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=clients/java-curator

. scripts/debs.sh
need_debs java-curator libcurator-recipes-java libslf4j-java openjdk-17-jdk-headless

# The jars' manifests pull in the rest (curator-framework, -client, zookeeper, guava, jackson-core).
J=/usr/share/java
cp="$J/curator-recipes.jar:$J/jackson-databind.jar"
if [ ! "$dir/build/CuratorClient.class" -nt "$dir/CuratorClient.java" ]; then
  echo "java-curator: javac $dir/CuratorClient.java"
  mkdir -p "$dir/build"
  javac -nowarn -d "$dir/build" -cp "$cp" "$dir/CuratorClient.java"
  touch "$dir/build/CuratorClient.class"
fi

mkdir -p "$dir/bin"
cat > "$dir/bin/java-curator.tmp" <<LAUNCHER
#!/bin/sh
# Written by scripts/clients/java-curator.sh. Small heap, quick start: one JVM per chaos worker.
here=\$(cd "\$(dirname "\$0")/.." && pwd)
exec java -Xmx128m -Xss512k -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto \\
  -cp "\$here/build:$cp:$J/slf4j-nop.jar" CuratorClient "\$@"
LAUNCHER
chmod +x "$dir/bin/java-curator.tmp"
mv "$dir/bin/java-curator.tmp" "$dir/bin/java-curator"
