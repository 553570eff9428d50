#!/usr/bin/env bash
# `jelly serve` beside peer servers, each comparison side by side in one run (BENCHMARKS.md §5
# "Peers"):
#   1. gRPC: jellyfish and the grpc-java relay on Jelly-JVM's codec (bench/jvm-grpc,
#      `JellyGrpcRelay`), alternating per cell: the latency grid (5/50/200 statements at
#      10 ms/1 ms/100 µs) and throughput (1M statements, 1,000 per frame), RUNS times.
#   2. HTTP with N-Triples: jellyfish and Ztreamy 0.5 (bench/ztreamy/run.sh), 2 rounds.
# Writes bench/out/peers-grpc.jsonl and bench/out/peers-ztreamy.jsonl.
#
# Usage: bench/run_peers.sh [RUNS]   (throughput runs, default 3)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${1:-3}"
OUT=bench/out
mkdir -p "$OUT"
cargo build -q --release -p jelly-cli -p jelly-bench
bash bench/jvm-grpc/build.sh >/dev/null
B=target/release/serve_bench
IN=../shared/datasets/iot-assist-weather/iot-assist-weather.nt

: > "$OUT/peers-grpc.jsonl"
: > "$OUT/peers-ztreamy.jsonl"
echo "== gRPC latency: jellyfish, jvm-relay" >&2
$B latency --transport grpc --servers jellyfish,jvm-relay --input "$IN" \
  --sizes 5,50,200 --intervals-us 10000,1000,100 >> "$OUT/peers-grpc.jsonl"
echo "== gRPC throughput: jellyfish, jvm-relay" >&2
for _ in $(seq "$RUNS"); do
  $B throughput --transport grpc --servers jellyfish,jvm-relay --input "$IN" \
    --statements 1000000 --frame 1000 >> "$OUT/peers-grpc.jsonl"
done
cat "$OUT/peers-grpc.jsonl"

echo "== HTTP N-Triples: jellyfish, Ztreamy" >&2
OUT="$OUT/peers-ztreamy.jsonl" bench/ztreamy/run.sh --rounds 2
