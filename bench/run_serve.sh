#!/usr/bin/env bash
# End-to-end benchmarks of `jelly serve` on loopback, over HTTP, WebSocket and gRPC in
# one run: throughput (one publisher → one subscriber, statements/s) and latency
# (publish → delivery, p50/p99, for items of 5/50/200 statements at 10 ms/1 ms/100 µs
# intervals, the Jelly paper's grid). The server is the release `jelly` binary with a
# file log and no fsync on the path. The latency grid runs twice per transport: with
# the default runtime (idle threads sleep) and with server and subscriber busy-polling
# (`--busy-poll`; each keeps a CPU busy). Writes bench/out/serve.jsonl and bench/out/serve.md.
#
# Usage: bench/run_serve.sh [RUNS]   (throughput runs per transport, default 3; median reported)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${1:-3}"
OUT=bench/out
mkdir -p "$OUT"
: > "$OUT/serve.jsonl"
cargo build -q --release -p jelly-cli -p jelly-bench
B=target/release/serve_bench
TRANSPORTS="${TRANSPORTS:-http ws grpc}"
IN=../shared/datasets/iot-assist-weather/iot-assist-weather.nt

for t in $TRANSPORTS; do
  echo "== throughput $t" >&2
  for _ in $(seq "$RUNS"); do
    $B throughput --transport "$t" --input "$IN" --statements 1000000 --frame 1000 >> "$OUT/serve.jsonl"
  done
done
for t in $TRANSPORTS; do
  echo "== latency $t" >&2
  $B latency --transport "$t" --input "$IN" --sizes 5,50,200 --intervals-us 10000,1000,100 --items 2000 >> "$OUT/serve.jsonl"
done
for t in $TRANSPORTS; do
  echo "== latency $t, busy-poll" >&2
  $B latency --transport "$t" --input "$IN" --sizes 5,50,200 --intervals-us 10000,1000,100 --items 2000 --busy-poll >> "$OUT/serve.jsonl"
done
python3 bench/report_serve.py "$OUT/serve.jsonl" > "$OUT/serve.md"
cat "$OUT/serve.md"
