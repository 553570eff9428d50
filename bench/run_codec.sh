#!/usr/bin/env bash
# Codec benchmark, side by side in one run: jellyfish (this repo), Jelly-JVM 3.7.1 with
# Jena, pyjelly, and oxttl's N-Triples/N-Quads as the text baseline. Each tool loads
# the data into memory first, warms up, then loops for a fixed time (see each tool's
# bench mode). Writes one JSON line per measurement to bench/out/codec.jsonl and a
# Markdown table to bench/out/codec.md.
#
# Usage: [ROUNDS=N] [ONLY=dataset] bench/run_codec.sh [SECONDS]   (default 6 s per measurement)
set -euo pipefail
cd "$(dirname "$0")/.."
SECS="${1:-6}"
D=../shared/datasets
OUT=bench/out
mkdir -p "$OUT/data"
: > "$OUT/codec.jsonl"

cargo build -q --release -p jelly-bench
B=target/release/jelly-bench
J="$(bench/jvm/build.sh)"
PY="$(bench/py/setup.sh)"

source bench/codec_cases.sh

ONLY="${ONLY:-}"   # e.g. ONLY=iot-weather for a quick run
ROUNDS="${ROUNDS:-1}" # rounds of the compared jellyfish / Jelly-JVM pairs
for c in "${CASES[@]}"; do
  IFS='|' read -r name file kind <<<"$c"
  if [ -n "$ONLY" ] && [ "$name" != "$ONLY" ]; then continue; fi
  [ -f "$file" ] || { echo "missing $file" >&2; exit 1; }
  # Every tool reads the same plain file (the JVM peer does not read gzip).
  file="$(plain_file "$file")"
  meta="{\"dataset\":\"$name\",\"kind\":\"$kind\"}"
  g_rust=""; g_jvm=""; g_py=""
  if [ "$kind" = grouped ]; then g_rust="--grouped"; g_jvm="--grouped-per-graph"; g_py="--grouped-per-graph"; fi
  jelly="$OUT/data/$name-$kind.jelly"
  echo "== $name ($kind)" >&2
  # The pairs compared (jellyfish and Jelly-JVM, same op) run back to back, and with
  # ROUNDS > 1 the pairs repeat, so that both tools see the same phases of a shared
  # host. The report averages the rounds.
  for round in $(seq "$ROUNDS"); do
    # Owned statements (a string per term occurrence) against Jelly-JVM given the same
    # kind of input: Jena triples with a node and string object per occurrence.
    $B encode "$file" --preset big --rows-per-frame 512 $g_rust --seconds "$SECS" --out "$jelly" | tag "$meta" >> "$OUT/codec.jsonl"
    java -Xmx8g -jar "$J" bench-encode "$file" --preset big --rows-per-frame 512 $g_jvm --unshared --seconds "$SECS" 2>/dev/null | tail -1 | tag "$meta" >> "$OUT/codec.jsonl"
    settle
    java -Xmx8g -jar "$J" bench-encode "$file" --preset big --rows-per-frame 512 $g_jvm --seconds "$SECS" 2>/dev/null | tail -1 | tag "$meta" >> "$OUT/codec.jsonl"
    settle
    # Interned input through a shared-input session: one copy of each distinct string,
    # known by address, as Jelly-JVM's input shares Jena node objects.
    $B encode-shared "$file" --preset big --rows-per-frame 512 $g_rust --seconds "$SECS" | tag "$meta" >> "$OUT/codec.jsonl"
    $B decode "$jelly" --seconds "$SECS" | tag "$meta" >> "$OUT/codec.jsonl"
    java -Xmx8g -jar "$J" bench-decode "$jelly" --seconds "$SECS" 2>/dev/null | tail -1 | tag "$meta" >> "$OUT/codec.jsonl"
    settle
  done
  $B encode-interned "$file" --preset big --rows-per-frame 512 $g_rust --seconds "$SECS" | tag "$meta" >> "$OUT/codec.jsonl"
  $B decode-owned "$jelly" --seconds "$SECS" | tag "$meta" >> "$OUT/codec.jsonl"
  "$PY" bench/py/pyjelly_peer.py bench-encode "$file" --preset big --rows-per-frame 512 $g_py --seconds "$SECS" | tail -1 | tag "$meta" >> "$OUT/codec.jsonl"
  "$PY" bench/py/pyjelly_peer.py bench-decode "$jelly" --seconds "$SECS" | tail -1 | tag "$meta" >> "$OUT/codec.jsonl"
  if [ "$kind" = flat ]; then
    $B oxttl-parse "$file" --seconds "$SECS" | tag "$meta" >> "$OUT/codec.jsonl"
    $B oxttl-write "$file" --seconds "$SECS" | tag "$meta" >> "$OUT/codec.jsonl"
  fi
done

python3 bench/report_codec.py "$OUT/codec.jsonl" > "$OUT/codec.md"
cat "$OUT/codec.md"
