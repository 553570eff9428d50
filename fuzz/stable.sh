#!/usr/bin/env bash
# Coverage-guided fuzzing on a stable toolchain: builds the targets with libFuzzer's
# SanitizerCoverage instrumentation (stable codegen flags; only AddressSanitizer needs
# nightly, and the codec has no unsafe code for it to watch), seeds each target's corpus,
# and runs every target.
#
#   fuzz/stable.sh [--runs N] [--seed S] [--time SECONDS] [TARGET...]
#
# --runs N (default 20000) with --seed S (default 1) makes a run repeatable: the same
# code gives the same inputs, so CI is not red by chance. --time SECONDS instead runs
# each target for that long from a random seed, for a longer local search. A crash
# exits non-zero and leaves the input in $JELLY_FUZZ_OUT/artifacts/<target>/ (printed).
set -euo pipefail
cd "$(dirname "$0")"

runs=20000
seed=1
secs=""
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    --time) secs="$2"; shift 2 ;;
    -*) echo "fuzz/stable.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=(decode roundtrip patch_decode rdf_patch_text rebase)

shared="${JELLY_SHARED:-$(cd .. && pwd)/../shared}"
conformance="$shared/jelly-conformance"
[ -d "$conformance" ] || { echo "fuzz/stable.sh: no conformance suite at $conformance" >&2; exit 2; }

host="$(rustc -vV | sed -n 's/^host: //p')"
# --target keeps the instrumentation off build scripts and proc macros.
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$(pwd)/target}"
cargo build --release --locked --target "$host" --bins
bin="$CARGO_TARGET_DIR/$host/release"

out="${JELLY_FUZZ_OUT:-$(mktemp -d)}"
keep_out="${JELLY_FUZZ_OUT:+1}"
cleanup() { [ -n "$keep_out" ] || [ -n "${failed:-}" ] || rm -rf "$out"; }
trap cleanup EXIT

# Seeds: the conformance suite's streams for the byte-level targets (the rebase target
# reads a target-options byte first); a few RDF Patch rows for the text parser.
seed_corpus() {
  local t="$1" dir="$out/corpus/$t" n=0
  mkdir -p "$dir"
  case "$t" in
    decode|patch_decode)
      while IFS= read -r f; do n=$((n+1)); cp "$f" "$dir/conf_$n"; done \
        < <(find "$conformance" -name '*.jelly' | sort) ;;
    rebase)
      while IFS= read -r f; do n=$((n+1))
        { printf "\\x$(printf %02x $(( (n * 7) % 64 )))"; cat "$f"; } > "$dir/conf_$n"
      done < <(find "$conformance" -name '*.jelly' | sort) ;;
    rdf_patch_text)
      printf 'H id <urn:uuid:1> .\nTX .\nPA "ex" <http://example.org/> .\nA <http://e/s> <http://e/p> "o"@en .\nD _:b <http://e/p> "1"^^<http://www.w3.org/2001/XMLSchema#integer> <http://e/g> .\nTC .\n' > "$dir/rows"
      printf 'TX .\nA <http://e/s> <http://e/p> << <http://e/a> <http://e/b> "c" >> .\nTA .\n' > "$dir/star" ;;
    roundtrip) ;;
  esac
}

status=0
for t in "${targets[@]}"; do
  seed_corpus "$t"
  mkdir -p "$out/artifacts/$t"
  if [ -n "$secs" ]; then budget=(-max_total_time="$secs"); else budget=(-runs="$runs" -seed="$seed"); fi
  echo "== fuzz $t (${budget[*]})" >&2
  if ! "$bin/$t" "${budget[@]}" -timeout=10 -malloc_limit_mb=512 -rss_limit_mb=2048 \
      -artifact_prefix="$out/artifacts/$t/" -print_final_stats=1 "$out/corpus/$t" \
      > "$out/$t.log" 2>&1; then
    status=1; failed=1
    tail -40 "$out/$t.log" >&2
    echo "fuzz/stable.sh: $t failed; the input is in $out/artifacts/$t/" >&2
  else
    grep -E '^(stat::number_of_executed_units|Done)' "$out/$t.log" | tail -1 >&2 || true
  fi
done
exit $status
