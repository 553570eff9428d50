#!/usr/bin/env bash
# Builds the Jelly-JVM gRPC interop client (fat jar) and prints its absolute path on stdout.
# See bench/maven_jar.sh for when Maven runs; JVM_GRPC_OFFLINE=1 forces an offline build.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../maven_jar.sh"
build_maven_jar "$here" jelly-jvm-grpc-client.jar JVM_GRPC_OFFLINE
