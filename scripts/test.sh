#!/usr/bin/env bash
# Installs whatever the test suite needs and is missing, then runs all of it:
# formatting, lints, unit and integration tests, the official conformance suite,
# the interop tests against pyjelly and Jelly-JVM, and a repeatable run of the fuzz targets.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\n== %s\n' "$*" >&2; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
apt_updated=""
apt_install() {
  if [ -z "$apt_updated" ]; then as_root apt-get update -qq; apt_updated=1; fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

say "toolchains"
if ! command -v cargo >/dev/null; then
  echo "cargo not found: install Rust 1.88 or newer (rustup) and run this again" >&2
  exit 2
fi
for c in rustfmt clippy; do
  if ! cargo "${c/rustfmt/fmt}" --version >/dev/null 2>&1; then
    rustup component add "$c"
  fi
done
command -v java >/dev/null && command -v mvn >/dev/null || apt_install default-jdk-headless maven
command -v python3 >/dev/null || apt_install python3 python3-venv
python3 -c 'import venv' 2>/dev/null || apt_install python3-venv
# Independent decoders for the compressed-stream tests (crates/jelly-server/tests/compress_blocks.rs).
for t in gzip zstd brotli; do command -v "$t" >/dev/null || apt_install "$t"; done
cargo --version; java -version 2>&1 | head -1; python3 --version

say "peers: pyjelly and grpcio (PyPI), Jelly-JVM (Maven Central)"
JELLY_PYTHON="$(bench/py/setup.sh)"
JELLY_JVM_JAR="$(bench/jvm/build.sh)"
JELLY_JVM_GRPC_JAR="$(bench/jvm-grpc/build.sh)"
export JELLY_PYTHON JELLY_JVM_JAR JELLY_JVM_GRPC_JAR
echo "pyjelly python: $JELLY_PYTHON"
echo "Jelly-JVM jar:  $JELLY_JVM_JAR"
echo "Jelly-JVM gRPC client jar: $JELLY_JVM_GRPC_JAR"

# A one-shot build: incremental caches would only take disk (2 GB) and time.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

say "cargo fmt --check"
cargo fmt --all -- --check

say "cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings

say "cargo fmt and clippy of the fuzz targets (fuzz/ is outside the workspace)"
# Every target, the server's too (--features server): about 1.5 min on 2 cores. Before
# this step, lint findings in fuzz/ were only found by running it by hand.
(cd fuzz && cargo fmt -- --check && cargo clippy --locked --bins --features server -- -D warnings)

say "cargo doc (rustdoc warnings are errors)"
# Broken intra-doc links and stray HTML in doc comments (clap help texts among them).
# About 40 s on 2 cores after clippy, plus about 50 s re-checking dependencies whose
# features differ without the dev-dependencies.
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps

say "cargo test"
cargo test --workspace

say "fuzz targets: built and run on stable, repeatable (fuzz/stable.sh)"
# Each target from its seeds, 50,000 inputs from a fixed seed: the same code gives the
# same inputs, so a red run here is a bug, not luck. Longer searches: fuzz/README.md.
fuzz/stable.sh --runs 50000 --seed 1
# The server's targets (publish bodies through ingest, subscribe query strings through
# the filters) build the instrumented server, about four minutes on two cores.
fuzz/stable.sh --runs 20000 --seed 1 ingest filter_query
