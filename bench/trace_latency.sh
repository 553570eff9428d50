#!/usr/bin/env bash
# Where the latency of one item goes: runs `serve_bench latency` (one size, one
# interval) under `perf record` with syscall tracepoints, then splits each item's path
# into segments by the system calls of the publisher, the server and the subscriber
# (bench/trace_latency.py). Needs perf with tracepoint access (root, or
# kernel.perf_event_paranoid <= -1). Tracing adds a few µs per system call, so compare
# segments between runs of this script, not with serve_bench's own figures.
#
# Usage: bench/trace_latency.sh [TRANSPORT] [INTERVAL_US] [ITEMS] [extra serve_bench args...]
#        e.g. bench/trace_latency.sh grpc 10000 300 --busy-poll
set -euo pipefail
cd "$(dirname "$0")/.."
T="${1:-grpc}"; I="${2:-10000}"; N="${3:-300}"; shift $(( $# < 3 ? $# : 3 ))
cargo build -q --release -p jelly-cli -p jelly-bench
OUT="$(mktemp -d)"
# epoll_wait (232), sched_yield (24) and epoll_pwait (281) are left out: busy polling
# makes millions of them.
F='id != 232 && id != 24 && id != 281'
perf record -q -o "$OUT/perf.data" -e raw_syscalls:sys_enter --filter "$F" \
  -e raw_syscalls:sys_exit --filter "$F" -- \
  target/release/serve_bench latency --transport "$T" --sizes 50 --intervals-us "$I" \
  --items "$N" "$@" 2>/dev/null
perf script -i "$OUT/perf.data" -F comm,tid,time,event,trace --ns 2>/dev/null > "$OUT/trace.txt"
python3 bench/trace_latency.py "$OUT/trace.txt"
rm -rf "$OUT"
