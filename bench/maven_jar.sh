# Sourced by the peer tools' build.sh scripts: builds the fat jar of a Maven project and
# prints its absolute path on stdout.
# Usage: build_maven_jar PROJECT_DIR JAR_NAME OFFLINE_VAR
# Idempotent: skips Maven when the jar is newer than pom.xml and every source file
# (FORCE=1 builds anyway). Works offline once ~/.m2 holds the dependencies: Maven is run
# with -o first, and online only when that fails; OFFLINE_VAR=1 forces -o.
build_maven_jar() {
  local here="$1" jar="$1/target/$2" offline="${!3:-0}"
  local needs_build=1
  if [[ -f "$jar" ]]; then
    local newer
    newer="$(find "$here/pom.xml" "$here/src" -type f -newer "$jar" -print -quit)"
    [[ -z "$newer" ]] && needs_build=0
  fi
  if [[ "${FORCE:-0}" == 1 ]]; then needs_build=1; fi
  if [[ "$needs_build" == 1 ]]; then
    command -v mvn >/dev/null || { echo "build.sh: mvn not found (apt-get install maven)" >&2; return 1; }
    if [[ "$offline" == 1 ]]; then
      (cd "$here" && mvn -o -q -B -Dstyle.color=never -DskipTests package >&2)
    elif ! (cd "$here" && mvn -o -q -B -Dstyle.color=never -DskipTests package >/dev/null 2>&1); then
      # Offline build failed (first run, or missing artifacts): build online.
      (cd "$here" && mvn -q -B -Dstyle.color=never -DskipTests package >&2)
    fi
    [[ -f "$jar" ]] || { echo "build.sh: build did not produce $jar" >&2; return 1; }
    touch "$jar"
  fi
  echo "$jar"
}
