#!/usr/bin/env bash
# Builds the Jelly-JVM gRPC interop client (fat jar) and prints its absolute path on stdout.
# Idempotent: skips Maven when the jar is newer than pom.xml and every source file.
# Works offline once ~/.m2 holds the dependencies (Maven is run with -o automatically
# when a plain online build is not needed; set JVM_GRPC_OFFLINE=1 to force -o).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
jar="$here/target/jelly-jvm-grpc-client.jar"

needs_build=1
if [[ -f "$jar" ]]; then
  newer="$(find "$here/pom.xml" "$here/src" -type f -newer "$jar" -print -quit)"
  [[ -z "$newer" ]] && needs_build=0
fi

if [[ "${FORCE:-0}" == 1 ]]; then needs_build=1; fi

if [[ "$needs_build" == 1 ]]; then
  command -v mvn >/dev/null || { echo "build.sh: mvn not found (apt-get install maven)" >&2; exit 1; }
  cd "$here"
  if [[ "${JVM_GRPC_OFFLINE:-0}" == 1 ]]; then
    mvn -o -q -B -Dstyle.color=never -DskipTests package >&2
  elif ! mvn -o -q -B -Dstyle.color=never -DskipTests package >/dev/null 2>&1; then
    # Offline build failed (first run, or missing artifacts): build online.
    mvn -q -B -Dstyle.color=never -DskipTests package >&2
  fi
  [[ -f "$jar" ]] || { echo "build.sh: build did not produce $jar" >&2; exit 1; }
  touch "$jar"
fi
echo "$jar"
