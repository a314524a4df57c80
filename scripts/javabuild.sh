# Sourced by the scripts that build the Java programs on ZooKeeper's own client under clients/
# (zk-yardstick, zk-load-driver), from Debian packages only. `java_build NAME MAIN XMX` compiles
# clients/NAME/*.java when a source is newer than build/MAIN.class, and writes the launcher
# clients/NAME/bin/NAME (java -XmxXMX ... MAIN "$@").
. scripts/debs.sh

java_build() {
  local name=$1 main=$2 xmx=$3 dir=clients/$1 stale= src
  local J=/usr/share/java
  local cp="$J/zookeeper.jar:$J/slf4j-api.jar"
  need_debs "$name" zookeeper libslf4j-java openjdk-17-jdk-headless
  for src in "$dir"/*.java; do
    [ "$dir/build/$main.class" -nt "$src" ] || stale=1
  done
  if [ -n "$stale" ]; then
    echo "$name: javac $dir/*.java"
    mkdir -p "$dir/build"
    javac -nowarn -d "$dir/build" -cp "$cp" "$dir"/*.java
    touch "$dir/build/$main.class"
  fi
  mkdir -p "$dir/bin"
  cat > "$dir/bin/$name.tmp" <<LAUNCHER
#!/bin/sh
# Written by scripts/clients/$name.sh (scripts/javabuild.sh).
here=\$(cd "\$(dirname "\$0")/.." && pwd)
exec java -Xmx$xmx -XX:+UseSerialGC -cp "\$here/build:$cp:$J/slf4j-nop.jar" $main "\$@"
LAUNCHER
  chmod +x "$dir/bin/$name.tmp"
  mv "$dir/bin/$name.tmp" "$dir/bin/$name"
}
