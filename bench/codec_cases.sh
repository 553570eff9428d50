# The datasets and helpers of the codec benchmarks (sourced by run_codec.sh and
# run_codec_paired.sh).
# name | file | kind (flat: 512 rows per frame, BIG preset; grouped: one frame per graph)
CASES=(
  "iot-weather|$D/iot-assist-weather/iot-assist-weather.nt|flat"
  "nanopubs|$D/nanopubs-fair-pkd/nanopubs-fair-pkd.nq|flat"
  "nanopubs|$D/nanopubs-fair-pkd/nanopubs-fair-pkd.nq|grouped"
  "dbpedia-ontology|$D/dbpedia-ontology/dbpedia-ontology.nt|flat"
  "bsbm-200k-graphs|$D/bsbm-200k-graphs/bsbm-200k-graphs.nq.gz|grouped"
  "bsbm-1m|$D/bsbm-1m/bsbm-1m.nt.gz|flat"
  "lubm-10|$D/lubm-10/lubm-10.nt.gz|flat"
)

# The plain file of `file`: a .gz is unpacked once into bench/out/data (the JVM peer
# does not read gzip), so that every tool reads the same bytes.
plain_file() {
  case "$1" in
    *.gz)
      local plain="bench/out/data/$(basename "${1%.gz}")"
      [ -f "$plain" ] || gzip -dc "$1" > "$plain"
      echo "$plain"
      ;;
    *) echo "$1" ;;
  esac
}

# One JSON line from stdin with the fields of the JSON object $1 added.
tag() { python3 -c 'import json,sys; d=json.loads(sys.stdin.readline()); d.update(json.loads(sys.argv[1])); print(json.dumps(d))' "$1"; }

# After a JVM run, a pause before the next measurement, so that whatever the JVM's exit
# leaves to the system (its heap of several GiB to unmap) does not fall on the next
# tool's loop. In session 9 the tool measured right after a JVM run was repeatedly the
# slow one.
settle() { sleep "${SETTLE:-3}"; }
