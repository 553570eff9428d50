#!/usr/bin/env bash
# Codec benchmark in paired slices: jellyfish and Jelly-JVM 3.7.1 (with Jena) alternate
# in slices of SLICE_MS milliseconds within one run (`jelly-bench paired`), the JVM peer
# staying loaded and warm between its slices. A slow phase of the shared host then
# falls on both tools alike, where in `run_codec.sh` it falls on whichever tool's
# 6-second loop it meets. Three comparisons per dataset:
#   encode-shared  jellyfish's shared-input session on interned input / Jelly-JVM on Jena's parsed input
#   encode         jellyfish on owned statements / Jelly-JVM on --unshared input
#   decode         both decoders on the file jellyfish writes
# Writes one JSON line per comparison to bench/out/codec_paired.jsonl and a Markdown
# table to bench/out/codec_paired.md.
#
# Usage: [ROUNDS=N] [ONLY=dataset] [SLICES=24] [SLICE_MS=250] bench/run_codec_paired.sh
set -euo pipefail
cd "$(dirname "$0")/.."
D=../shared/datasets
OUT=bench/out
mkdir -p "$OUT/data"
: > "$OUT/codec_paired.jsonl"

cargo build -q --release -p jelly-bench
B=target/release/jelly-bench
J="$(bench/jvm/build.sh)"

source bench/codec_cases.sh

ONLY="${ONLY:-}"
ROUNDS="${ROUNDS:-1}"
SL=(--slices "${SLICES:-24}" --slice-ms "${SLICE_MS:-250}")
for c in "${CASES[@]}"; do
  IFS='|' read -r name file kind <<<"$c"
  if [ -n "$ONLY" ] && [ "$name" != "$ONLY" ]; then continue; fi
  [ -f "$file" ] || { echo "missing $file" >&2; exit 1; }
  file="$(plain_file "$file")"
  g=""; [ "$kind" = grouped ] && g="--grouped"
  jelly="$OUT/data/$name-$kind.jelly"
  echo "== $name ($kind)" >&2
  # The file both decoders read: jellyfish's output at the same options.
  $B encode "$file" --preset big --rows-per-frame 512 $g --seconds 0.2 --out "$jelly" > /dev/null
  for round in $(seq "$ROUNDS"); do
    for op in encode-shared encode; do
      $B paired "$file" --op "$op" --jvm "$J" --preset big --rows-per-frame 512 $g "${SL[@]}" \
        | tag "{\"dataset\":\"$name\",\"kind\":\"$kind\",\"round\":$round}" >> "$OUT/codec_paired.jsonl"
      settle
    done
    $B paired "$jelly" --op decode --jvm "$J" "${SL[@]}" \
      | tag "{\"dataset\":\"$name\",\"kind\":\"$kind\",\"round\":$round}" >> "$OUT/codec_paired.jsonl"
    settle
  done
done

python3 bench/report_codec_paired.py "$OUT/codec_paired.jsonl" > "$OUT/codec_paired.md"
cat "$OUT/codec_paired.md"
