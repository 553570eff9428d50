#!/usr/bin/env bash
# Ztreamy 0.5 and `jelly serve` side by side in one run (see README.md here).
#
# Usage: bench/ztreamy/run.sh [compare.py options...]
#   e.g. bench/ztreamy/run.sh --rounds 2
# Environment:
#   JELLY=path            the jelly binary (default target/release/jelly; not built here)
#   PY2=path              Python 2.7 for the venv (default ~/.pyenv/versions/2.7.18/bin/python)
#   ZTREAMY_BUFFER=S      also run a second Ztreamy server with buffering_time S seconds
#   OUT=file.jsonl        where the JSON lines go (default bench/ztreamy/out/run-<time>.jsonl)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
PY2="${PY2:-$HOME/.pyenv/versions/2.7.18/bin/python}"
JELLY="${JELLY:-$ROOT/target/release/jelly}"
VENV="$HERE/.venv"

# --- the Python 2.7 virtualenv with ztreamy 0.5
if ! "$VENV/bin/python" -c 'import ztreamy' 2>/dev/null; then
  echo "== setting up $VENV" >&2
  if ! command -v curl-config >/dev/null; then   # pycurl (a ztreamy dependency) builds against libcurl
    if [ "$(id -u)" = 0 ]; then
      apt-get install -y libcurl4-openssl-dev >/dev/null || { apt-get update >/dev/null; apt-get install -y libcurl4-openssl-dev >/dev/null; }
    else
      echo "need libcurl4-openssl-dev (curl-config) for pycurl" >&2; exit 1
    fi
  fi
  rm -rf "$VENV"
  if "$PY2" -m virtualenv --version >/dev/null 2>&1; then
    "$PY2" -m virtualenv -q "$VENV"
  else
    # virtualenv 20.21.1 is the last that creates Python 2 environments (pip 20.3.4 inside)
    python3 -m venv "$HERE/.venv-tool"
    "$HERE/.venv-tool/bin/pip" install -q 'virtualenv==20.21.1'
    "$HERE/.venv-tool/bin/virtualenv" -q -p "$PY2" "$VENV"
  fi
  "$VENV/bin/pip" install -q -r "$HERE/requirements-py2.txt" 2>&1 | grep -v DEPRECATION >&2 || true
  "$VENV/bin/python" -c 'import ztreamy'
fi

[ -x "$JELLY" ] || { echo "no $JELLY: cargo build --release -p jelly-cli" >&2; exit 1; }

TMP="$(mktemp -d /tmp/ztreamy-bench.XXXXXX)"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$TMP"
}
trap cleanup EXIT

wait_line() {  # file pattern
  for _ in $(seq 100); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "server did not start: $1" >&2; cat "$1" >&2; exit 1
}

"$JELLY" serve --log-level warn --set listen=127.0.0.1:0 --set durability=none \
  --set "data=$TMP/data" 2>"$TMP/jelly.err" &
PIDS+=($!); JPID=$!
"$VENV/bin/python" "$HERE/server.py" --port 0 >"$TMP/ztreamy.out" 2>"$TMP/ztreamy.err" &
PIDS+=($!); ZPID=$!
wait_line "$TMP/jelly.err" 'listening on'
wait_line "$TMP/ztreamy.out" 'listening on'
JURL="$(grep -o 'http://[0-9.:]*' "$TMP/jelly.err" | head -1)"
ZURL="$(grep -o 'http://[^ ]*' "$TMP/ztreamy.out" | head -1)"
SERVERS=(--server "jelly=jelly:$JURL" --server "ztreamy=ztreamy:$ZURL" --pid "jelly=$JPID" --pid "ztreamy=$ZPID")
echo "# $(cat "$TMP/ztreamy.out")" >&2
echo "# jelly: $JELLY ($(date -u -r "$JELLY" +%FT%TZ)) serve --set durability=none (file log) at $JURL" >&2
if [ -n "${ZTREAMY_BUFFER:-}" ]; then
  "$VENV/bin/python" "$HERE/server.py" --port 0 --buffer "$ZTREAMY_BUFFER" >"$TMP/ztreamy-buf.out" 2>"$TMP/ztreamy-buf.err" &
  PIDS+=($!); BPID=$!
  wait_line "$TMP/ztreamy-buf.out" 'listening on'
  echo "# $(cat "$TMP/ztreamy-buf.out")" >&2
  ms="$(python3 -c "print(int(float('$ZTREAMY_BUFFER')*1000))")"
  SERVERS+=(--server "ztreamy-buf${ms}ms=ztreamy:$(grep -o 'http://[^ ]*' "$TMP/ztreamy-buf.out" | head -1)" --pid "ztreamy-buf${ms}ms=$BPID")
fi

mkdir -p "$HERE/out"
OUT="${OUT:-$HERE/out/run-$(date -u +%Y%m%dT%H%M%SZ).jsonl}"
python3 "$HERE/compare.py" "${SERVERS[@]}" --jsonl "$OUT" "$@"
echo "# JSON lines in $OUT" >&2
for f in "$TMP"/*.err; do   # anything the servers complained about
  if [ -s "$f" ]; then echo "# $(basename "$f"): $(grep -c . "$f") line(s) on stderr, last:" >&2; tail -3 "$f" >&2; fi
done
