#!/usr/bin/env bash
# Sets up both interop peers once and prints `export` lines for the interop tests:
#   eval "$(bench/interop_env.sh)" && cargo test -p jelly-cli --test interop
# JELLY_PYTHON: pyjelly venv python (bench/py/setup.sh); JELLY_JVM_JAR: Jelly-JVM peer jar
# (bench/jvm/build.sh). Setup output goes to stderr; exits non-zero if a peer cannot be set up.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
py="$("$here/py/setup.sh" | tail -n 1)"
jar="$("$here/jvm/build.sh" | tail -n 1)"
printf 'export JELLY_PYTHON=%q\n' "$py"
printf 'export JELLY_JVM_JAR=%q\n' "$jar"
