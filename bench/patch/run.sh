#!/usr/bin/env bash
# RDF Patch text vs Jelly-Patch benchmark (see README.md). Generates the two workloads
# deterministically (if missing), then measures sizes and throughput for jellyfish
# (patch_bench) and Apache Jena's RDF Patch text writer/parser (bench/jvm peer).
# Output: bench/patch/out/results.jsonl (one JSON object per line) and a Markdown summary
# on stdout (bench/patch/report.py).
#   SECONDS_OURS=3 SECONDS_JENA=5 RUNS=2 bench/patch/run.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
secs_ours="${SECONDS_OURS:-3}"
secs_jena="${SECONDS_JENA:-5}"
runs="${RUNS:-2}"

cd "$root"
cargo build -q --release -p jelly-bench --bin patch_bench
bin="$root/target/release/patch_bench"
jar="$(bench/jvm/build.sh)"

mkdir -p "$here/data" "$here/out"
[[ -f "$here/data/cdc.rdfp" ]] || "$bin" gen-cdc "$here/data/cdc.rdfp"
[[ -f "$here/data/iot.rdfp" ]] || "$bin" gen-iot "$here/data/iot.rdfp"

out="$here/out/results.jsonl"
{
  printf '{"kind":"machine","date":"%s","nproc":%s,"cpu":"%s","java":"%s","rustc":"%s"}\n' \
    "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$(nproc)" \
    "$(lscpu | sed -n 's/^Model name: *//p' | head -1)" \
    "$(java -version 2>&1 | head -1 | tr -d '"')" "$(rustc --version)"
  for w in cdc iot; do
    f="$here/data/$w.rdfp"
    "$bin" measure "$f" --seconds "$secs_ours" --runs "$runs"
    for op in bench-rdfpatch-write bench-rdfpatch-read; do
      for ((i = 0; i < runs; i++)); do
        java -jar "$jar" "$op" "$f" --seconds "$secs_jena" --warmup 3 2>/dev/null
      done
    done
  done
} | tee "$out" >&2
python3 "$here/report.py" "$out"
