#!/usr/bin/env bash
# The fan-out benchmark (issue 6, Ztreamy's scenario): one publisher posts ~900-byte
# items at 4/s (Poisson arrivals, as in Ztreamy's experiments); N long-lived subscribers
# on the same machine receive them. For each configuration, `fanout_bench run` starts the
# servers, the publisher and the load-generator processes, waits until every subscriber
# is connected, measures one window and appends one JSON line to bench/out/fanout.jsonl.
# Then bench/report_fanout.py writes bench/out/fanout.md and bench/out/fanout.png.
#
# Usage: bench/run_fanout.sh            (the whole matrix, about 20-30 minutes)
#        NS="1000 10000" VARIANTS=plain WS_NS= FAST_NS= bench/run_fanout.sh   (a quick run)
#
# Every dimension is an environment variable:
#   NS            HTTP subscriber counts               (1000 10000 20000 40000 60000)
#   VARIANTS      HTTP variants: plain window gzip window+gzip zstd window+zstd
#                                                      (plain window gzip window+gzip)
#   WINDOW_MS     buffer window of the `window` variants, ms (500: Ztreamy's server buffer)
#   WS_NS         WebSocket subscriber counts, plain   (1000 10000 40000)
#   FAST_NS       subscriber counts at FAST_RATE       (1000)
#   FAST_RATE     items/s of the fast runs             (100)
#   FAST_VARIANTS variants of the fast runs: http-plain http-window ws  (http-plain ws)
#   RATE          items/s of the other runs            (4)
#   ARRIVALS      poisson | fixed                      (poisson)
#   ITEM_BYTES    target Jelly bytes per item          (900)
#   MEASURE_SECS  measurement window, s                (20)
#   SETTLE_SECS   pause between ramp-up and window, s  (2)
#   EDGES         auto | K: edge servers mirroring the origin on one SO_REUSEPORT port;
#                 auto = none up to PER_EDGE subscribers, else ceil(N / PER_EDGE)  (auto)
#   PER_EDGE      subscribers per edge server for EDGES=auto   (15000)
#   PER_PROCESS   subscribers per load-generator process       (15000)
#   PER_IP        subscribers per 127.0.0.x source address     (10000)
#   CONNECT_PARALLEL  connection set-ups in flight per load-generator process (256)
#   VERIFY_EVERY  only every K-th subscriber decodes and checks its items (delay, loss);
#                 the others read and discard, as Ztreamy's many-clients tool did. 1 = all.
#                 Decoding gzip at 60k subscribers costs the load generator about a core.  (1)
#   SERVER_EXTRA  TOML lines added to every server's config (use \n between lines)
#   APPEND=1      keep the existing bench/out/fanout.jsonl
#
# The fd hard limit of this machine is 20000 per process and cannot be raised here, so
# no process holds more than PER_EDGE / PER_PROCESS connections: above PER_EDGE
# subscribers the server side is an origin plus edge servers (repeaters, `[[mirror]]`)
# sharing one port with `reuse_port = true`, and the clients are several processes.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=bench/out
mkdir -p "$OUT"
JSONL="$OUT/fanout.jsonl"
[ "${APPEND:-0}" = 1 ] || : > "$JSONL"

NS="${NS-1000 10000 20000 40000 60000}"
VARIANTS="${VARIANTS-plain window gzip window+gzip}"
WINDOW_MS="${WINDOW_MS:-500}"
WS_NS="${WS_NS-1000 10000 40000}"
FAST_NS="${FAST_NS-1000}"
FAST_RATE="${FAST_RATE:-100}"
FAST_VARIANTS="${FAST_VARIANTS-http-plain ws}"
RATE="${RATE:-4}"

ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
echo "fd limit: $(ulimit -n); somaxconn: $(cat /proc/sys/net/core/somaxconn 2>/dev/null || echo ?)" >&2

cargo build -q --release -p jelly-cli -p jelly-bench --bin jelly --bin fanout_bench
B=target/release/fanout_bench

# Each run is its own process group, so an interrupted run leaves no server behind.
RUN_PID=
cleanup() {
  if [ -n "$RUN_PID" ]; then
    kill -TERM -- "-$RUN_PID" 2>/dev/null || true
    sleep 1
    kill -KILL -- "-$RUN_PID" 2>/dev/null || true
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# run LABEL ARGS...: one configuration; its JSON line (result or error) goes to $JSONL.
run() {
  local label="$1"
  shift
  echo "== $label $*" >&2
  local tmp
  tmp="$(mktemp)"
  setsid "$B" run --label "$label" \
    --rate "${RATE}" --arrivals "${ARRIVALS:-poisson}" \
    --item-bytes "${ITEM_BYTES:-900}" --measure-secs "${MEASURE_SECS:-20}" \
    --settle-secs "${SETTLE_SECS:-2}" --edges "${EDGES:-auto}" \
    --per-edge "${PER_EDGE:-15000}" --per-process "${PER_PROCESS:-15000}" \
    --per-ip "${PER_IP:-10000}" --connect-parallel "${CONNECT_PARALLEL:-256}" \
    --verify-every "${VERIFY_EVERY:-1}" \
    --server-extra "${SERVER_EXTRA:-}" "$@" > "$tmp" &
  RUN_PID=$!
  wait "$RUN_PID" || echo "   (failed; see the error in $JSONL)" >&2
  RUN_PID=
  cat "$tmp" >> "$JSONL"
  python3 - "$tmp" <<'EOF' >&2 || true
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if "error" in r:
        print("   error:", r["error"])
    else:
        print(f"   connected {r['connected']}/{r['subscribers']}  p50 {r['delay_p50_ms']} ms  p99 {r['delay_p99_ms']} ms  "
              f"lost {r['lost']}  dup {r['duplicates']}  server CPU {r['server_cpu_pct']}%  RSS {r['server_rss_peak_mib']} MiB  "
              f"ramp {r['ramp_secs']} s")
EOF
  rm -f "$tmp"
}

variant_args() {
  case "$1" in
    plain) echo "" ;;
    window) echo "--window-ms $WINDOW_MS" ;;
    gzip) echo "--encoding gzip" ;;
    window+gzip) echo "--window-ms $WINDOW_MS --encoding gzip" ;;
    zstd) echo "--encoding zstd" ;;
    window+zstd) echo "--window-ms $WINDOW_MS --encoding zstd" ;;
    *) echo "unknown variant $1" >&2; exit 2 ;;
  esac
}

for n in $NS; do
  for v in $VARIANTS; do
    # shellcheck disable=SC2046
    run "http-$v" --transport http --subscribers "$n" $(variant_args "$v")
  done
done
for n in $WS_NS; do
  run ws --transport ws --subscribers "$n"
done
for n in $FAST_NS; do
  for v in $FAST_VARIANTS; do
    case "$v" in
      http-plain) RATE="$FAST_RATE" run "http-plain-${FAST_RATE}/s" --transport http --subscribers "$n" ;;
      http-window) RATE="$FAST_RATE" run "http-window-${FAST_RATE}/s" --transport http --subscribers "$n" --window-ms "$WINDOW_MS" ;;
      ws) RATE="$FAST_RATE" run "ws-${FAST_RATE}/s" --transport ws --subscribers "$n" ;;
      *) echo "unknown fast variant $v" >&2; exit 2 ;;
    esac
  done
done

python3 -c 'import matplotlib' 2>/dev/null || python3 -m pip install --quiet matplotlib >&2 || true
python3 bench/report_fanout.py "$JSONL" "$OUT/fanout.png" > "$OUT/fanout.md"
cat "$OUT/fanout.md"
