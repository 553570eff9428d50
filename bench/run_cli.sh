#!/usr/bin/env bash
# End-to-end command-line benchmark, side by side in one run: wall time and peak RSS
# (GNU time) of whole conversions on the same files, for
#   jelly (this repo) · Jelly-JVM 3.7.1 + Jena (bench/jvm peer) · pyjelly (bench/py peer)
#   · oxigraph convert (text-to-text baseline; it has no Jelly support).
# Also the flat-memory check: jelly on a 1M and a ~10M statement stream.
# Writes bench/out/cli.jsonl and bench/out/cli.md.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=bench/out
DATA=$OUT/data
mkdir -p "$DATA"
[ -n "${APPEND:-}" ] || : > "$OUT/cli.jsonl"
D=../shared/datasets

cargo build -q --release -p jelly-cli
JELLY=target/release/jelly
J="$(bench/jvm/build.sh)"
PY="$(bench/py/setup.sh)"
# The oxigraph CLI 0.5.13 comes prebuilt from PyPI (package `oxigraph`), in its own venv.
# OXIGRAPH=path overrides. ONLY=oxigraph runs just its rows; APPEND=1 keeps earlier rows.
OXI="${OXIGRAPH:-}"
if [ -z "$OXI" ]; then
  [ -x "$OUT/oxi-venv/bin/oxigraph" ] || { python3 -m venv "$OUT/oxi-venv" && "$OUT/oxi-venv/bin/pip" install -q oxigraph==0.5.13; }
  OXI="$OUT/oxi-venv/bin/oxigraph"
fi
ONLY="${ONLY:-}"

# Inputs: decompressed N-Triples, and Turtle made from them.
[ -f "$DATA/bsbm-1m.nt" ] || gzip -dc "$D/bsbm-1m/bsbm-1m.nt.gz" > "$DATA/bsbm-1m.nt"
[ -f "$DATA/lubm-10.nt" ] || gzip -dc "$D/lubm-10/lubm-10.nt.gz" > "$DATA/lubm-10.nt"
[ -f "$DATA/bsbm-1m.ttl" ] || { "$JELLY" -q rdf to-jelly "$DATA/bsbm-1m.nt" -o "$DATA/bsbm-ttl-src.jelly" && "$JELLY" -q rdf from-jelly "$DATA/bsbm-ttl-src.jelly" --out-format ttl -o "$DATA/bsbm-1m.ttl"; }

run() { # case tool command...
  local case="$1" tool="$2"; shift 2
  case "$tool" in
    oxigraph*) [ -n "$OXI" ] || { echo "skipped (oxigraph not installed): $case" >&2; return; } ;;
    *) [ "$ONLY" = oxigraph ] && return ;;
  esac
  local t; t=$(mktemp)
  if /usr/bin/time -f "%e %M" -o "$t" "$@" >/dev/null 2>"$t.err"; then
    read -r wall rss < <(tail -1 "$t")
    printf '{"case":"%s","tool":"%s","seconds":%s,"max_rss_kb":%s}\n' "$case" "$tool" "$wall" "$rss" | tee -a "$OUT/cli.jsonl"
  else
    printf '{"case":"%s","tool":"%s","error":"%s"}\n' "$case" "$tool" "$(head -c 200 "$t.err" | tr '\n"' '  ')" | tee -a "$OUT/cli.jsonl"
  fi
  rm -f "$t" "$t.err"
}

for ds in bsbm-1m lubm-10; do
  nt="$DATA/$ds.nt"
  run "$ds: N-Triples to Jelly" jellyfish "$JELLY" -q rdf to-jelly "$nt" -o "$DATA/$ds.jelly"
  run "$ds: N-Triples to Jelly" jelly-jvm java -Xmx8g -jar "$J" to-jelly "$nt" "$DATA/$ds.jvm.jelly"
  run "$ds: N-Triples to Jelly" pyjelly "$PY" bench/py/pyjelly_peer.py to-jelly "$nt" "$DATA/$ds.py.jelly"
  run "$ds: N-Triples to Jelly" "oxigraph (to N-Quads)" "$OXI" convert --from-file "$nt" --to-file "$DATA/$ds.oxi.nq"
  run "$ds: Jelly to N-Quads" jellyfish "$JELLY" -q rdf from-jelly "$DATA/$ds.jelly" -o "$DATA/$ds.out.nq"
  run "$ds: Jelly to N-Quads" jelly-jvm java -Xmx8g -jar "$J" from-jelly "$DATA/$ds.jelly" "$DATA/$ds.jvm.nq"
  run "$ds: Jelly to N-Quads" pyjelly "$PY" bench/py/pyjelly_peer.py from-jelly "$DATA/$ds.jelly" "$DATA/$ds.py.nq"
done
ttl="$DATA/bsbm-1m.ttl"
run "bsbm-1m: Turtle to Jelly" jellyfish "$JELLY" -q rdf to-jelly "$ttl" -o "$DATA/bsbm-ttl.jelly"
run "bsbm-1m: Turtle to Jelly" jelly-jvm java -Xmx8g -jar "$J" to-jelly "$ttl" "$DATA/bsbm-ttl.jvm.jelly"
run "bsbm-1m: Turtle to Jelly" "oxigraph (to N-Quads)" "$OXI" convert --from-file "$ttl" --to-file "$DATA/bsbm-ttl.oxi.nq"

# Flat memory: the same pipeline on 1M and on ~10.5M statements (LUBM-10 eight times).
run "memory: 1.3M statements to Jelly" jellyfish sh -c "cat $DATA/lubm-10.nt | $JELLY -q rdf to-jelly --in-format nt -o $DATA/lubm1x.jelly"
run "memory: 10.5M statements to Jelly" jellyfish sh -c "for i in 1 2 3 4 5 6 7 8; do cat $DATA/lubm-10.nt; done | $JELLY -q rdf to-jelly --in-format nt -o $DATA/lubm8x.jelly"
run "memory: 1.3M statements from Jelly" jellyfish "$JELLY" -q rdf from-jelly "$DATA/lubm1x.jelly" -o /dev/null
run "memory: 10.5M statements from Jelly" jellyfish "$JELLY" -q rdf from-jelly "$DATA/lubm8x.jelly" -o /dev/null

python3 - "$OUT/cli.jsonl" > "$OUT/cli.md" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print("| case | tool | wall time | peak RSS |")
print("|---|---|---:|---:|")
for r in rows:
    if "error" in r:
        print(f"| {r['case']} | {r['tool']} | error: {r['error'][:60]} | |")
    else:
        print(f"| {r['case']} | {r['tool']} | {r['seconds']:.2f} s | {r['max_rss_kb'] / 1024:.0f} MiB |")
PY
cat "$OUT/cli.md"
