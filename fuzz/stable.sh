#!/usr/bin/env bash
# Coverage-guided fuzzing on a stable toolchain: builds the targets with libFuzzer's
# SanitizerCoverage instrumentation (stable codegen flags; only AddressSanitizer needs
# nightly, and the codec has no unsafe code for it to watch), seeds each target's corpus,
# and runs every target.
#
#   fuzz/stable.sh [--runs N] [--seed S] [--time SECONDS] [TARGET...]
#
# --runs N (default 20000) with --seed S (default 1) makes a run repeatable: the same
# code gives the same inputs, so CI is not red by chance. --time SECONDS instead runs
# each target for that long from a random seed, for a longer local search. A crash
# exits non-zero and leaves the input in $JELLY_FUZZ_OUT/artifacts/<target>/ (printed).
set -euo pipefail
cd "$(dirname "$0")"

runs=20000
seed=1
secs=""
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    --time) secs="$2"; shift 2 ;;
    -*) echo "fuzz/stable.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
# The default (CI) list: the cheap targets. Not text_position (it repeats its input
# past 128 KiB: 50,000 runs take minutes) nor the server's (ingest, filter_query).
[ ${#targets[@]} -gt 0 ] || targets=(decode roundtrip patch_decode rdf_patch_text rebase
  text_nesting xml_guard framing splice jsonld_parts text_format)

shared="${JELLY_SHARED:-$(cd .. && pwd)/../shared}"
conformance="$shared/jelly-conformance"
[ -d "$conformance" ] || { echo "fuzz/stable.sh: no conformance suite at $conformance" >&2; exit 2; }

host="$(rustc -vV | sed -n 's/^host: //p')"
# --target keeps the instrumentation off build scripts and proc macros.
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$(pwd)/target}"
# Only the targets asked for: the server's targets build the whole server.
bins=()
for t in "${targets[@]}"; do
  bins+=(--bin "$t")
  case "$t" in ingest|filter_query) bins+=(--features server) ;; esac
done
cargo build --release --locked --target "$host" "${bins[@]}"
bin="$CARGO_TARGET_DIR/$host/release"

out="${JELLY_FUZZ_OUT:-$(mktemp -d)}"
keep_out="${JELLY_FUZZ_OUT:+1}"
cleanup() { [ -n "$keep_out" ] || [ -n "${failed:-}" ] || rm -rf "$out"; }
trap cleanup EXIT

# Seeds: the conformance suite's streams for the byte-level targets (the rebase target
# reads a target-options byte first); a few RDF Patch rows for the text parser.
seed_corpus() {
  local t="$1" dir="$out/corpus/$t" n=0
  mkdir -p "$dir"
  case "$t" in
    decode|patch_decode)
      while IFS= read -r f; do n=$((n+1)); cp "$f" "$dir/conf_$n"; done \
        < <(find "$conformance" -name '*.jelly' | sort) ;;
    rebase)
      while IFS= read -r f; do n=$((n+1))
        { printf "\\x$(printf %02x $(( (n * 7) % 64 )))"; cat "$f"; } > "$dir/conf_$n"
      done < <(find "$conformance" -name '*.jelly' | sort) ;;
    text_format)
      # Byte 0 even: text; odd: a frame's bytes.
      printf '\x00# Frame 0\nrows { options { physical_type: PHYSICAL_STREAM_TYPE_TRIPLES max_name_table_size: 8 version: 1 } }\nrows { triple { s_iri { prefix_id: 1 name_id: 0 } p_bnode: "b\\303\\251" o_literal { lex: "x\\n" langtag: "en" } } }\n' > "$dir/text"
      printf '\x02rows < name: { id: 3, value: \x27a\x27 "b" } >; rows { 99: 0x7f 100: "\\x01" } # c\nrows { quad { s_literal { lex: "1" datatype: 2 } g_default_graph {} } }' > "$dir/syntax"
      printf '\x01\x0a\x02\x2a\x00' > "$dir/graph_end"
      printf '\x03\x0a\x0a\x0a\x08\x0a\x02\x08\x01\x12\x02\x6e\x6d' > "$dir/nested" ;;
    rdf_patch_text)
      printf 'H id <urn:uuid:1> .\nTX .\nPA "ex" <http://example.org/> .\nA <http://e/s> <http://e/p> "o"@en .\nD _:b <http://e/p> "1"^^<http://www.w3.org/2001/XMLSchema#integer> <http://e/g> .\nTC .\n' > "$dir/rows"
      printf 'TX .\nA <http://e/s> <http://e/p> << <http://e/a> <http://e/b> "c" >> .\nTA .\n' > "$dir/star" ;;
    text_nesting|text_position)
      # The head (limits or repetition, then piece sizes), then text.
      while IFS= read -r f; do n=$((n+1))
        { printf '\x03\x05\x01\x07\x02\x0b'; cat "$f"; } > "$dir/text_$n"
      done < <({ find "$conformance" \( -name '*.nt' -o -name '*.nq' -o -name '*.ttl' \) -size -4k
                 find "$shared/datasets/hostile-real-world" \( -name '*.ttl' -o -name '*.n3' \) -size -16k
               } | sort | head -80)
      printf '\x02\x03\x00\x01\x1f\x05@prefix ex: <http://ex.org/> .\nex:s ex:p << ex:a ex:b <<( ex:c ex:d "<<" )>> >> {| ex:q ( [ ex:r """[x]""" ] ) |} .\n' > "$dir/star"
      printf '\x07\x0f\x04\x09\x10\x03PREFIX e: <e#>\r\nBASE <http://b/>\n{ e:a e:b e:c } => { e:a e:d ("x" \x27y\x27) } . # <<\n' > "$dir/n3" ;;
    xml_guard)
      printf '\x40\x01\x07\x02\x0b<?xml version="1.0"?>\n<!DOCTYPE rdf:RDF [<!ENTITY ex "http://ex.org/"><!ENTITY %% p "&ex;&ex;">]>\n<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns:ex="&ex;">\n<!-- <a> --><rdf:Description rdf:about="&ex;s"><ex:p rdf:parseType="Literal"><b>x</b><![CDATA[<i>]]></ex:p><ex:q rdf:parseType="Resource"><ex:r>&amp;&#65;</ex:r></ex:q></rdf:Description></rdf:RDF>\n' > "$dir/rdfxml"
      printf '\x08\x03\x01\x04\x09<!DOCTYPE r [<!ENTITY a "aaaaaaaa"><!ENTITY b "&a;&a;&a;&a;"><!ENTITY c "&b;&b;&b;&b;">]><r>&c;&c;<?pi x?></r>' > "$dir/entities" ;;
    jsonld_parts)
      printf '\x10\x04\x01\x07\x02\x0b[{"@id": "http://ex/a", "http://ex/p": "x"}, {"@id": "_:b", "http://ex/p": [1, 2.5e3, true, null]}]' > "$dir/array"
      printf '\x20\x02\x00\x05\x03\x11{"@context": {"ex": "http://ex/"},\n "@id": "ex:g", "@graph": [\n  {"@id": "ex:a", "ex:p": "a\\"b]"},\n  {"@id": "ex:b", "ex:q": {"@list": ["x", {"@value": "y"}]}}\n]}' > "$dir/graph"
      printf '\xff\xff\x01\x07\x02\x0b{"@context": "http://remote/", "@id": "x"}' > "$dir/whole" ;;
    framing)
      # The head: the frame limit, then piece sizes.
      while IFS= read -r f; do n=$((n+1))
        { printf "\\x$(printf %02x $(( (n * 37) % 256 )))\x01\x07\x02\x20"; cat "$f"; } > "$dir/conf_$n"
      done < <(find "$conformance" -name '*.jelly' -size -8k | sort) ;;
    splice)
      # The head: the metadata entry's key and value lengths, key, value.
      while IFS= read -r f; do n=$((n+1))
        { printf '\x06\x02offset42'; cat "$f"; } > "$dir/conf_$n"
      done < <(find "$conformance" -name '*.jelly' -size -8k | sort) ;;
    ingest)
      # The head: content type (bits 0-2: Jelly, N-Quads, N-Triples, Turtle, TriG,
      # RDF/XML, JSON-LD) and topic bits, then a body.
      while IFS= read -r f; do n=$((n+1))
        case "$f" in
          *.jelly) h='\x00' ;; *.nq) h='\x01' ;; *.nt) h='\x0a' ;; *) h='\x53' ;;
        esac
        { printf "$h"; cat "$f"; } > "$dir/file_$n"
      done < <({ find "$conformance" \( -name '*.jelly' -o -name '*.nq' -o -name '*.nt' \) -size -2k | sort | head -60
                 find "$shared/datasets/hostile-real-world" -name '*.ttl' -size -16k | sort; })
      printf '\x94@prefix ex: <http://ex.org/> .\nex:g { ex:s ex:p ex:o , "x"@en-GB ; ex:q [ ex:r ( 1 2.0 true ) ] }\n{ <<( ex:a ex:b ex:c )>> ex:p ex:o {| ex:q ex:r |} }\n' > "$dir/trig"
      printf '\x45<?xml version="1.0"?>\n<!DOCTYPE rdf:RDF [<!ENTITY ex "http://ex.org/">]>\n<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns:ex="&ex;" xml:base="http://b.org/d/">\n<rdf:Description rdf:about="s"><ex:p rdf:parseType="Literal"><b>x</b></ex:p><ex:q rdf:parseType="Resource"><ex:r xml:lang="fr">y</ex:r></ex:q><ex:l rdf:parseType="Collection"><rdf:Description rdf:ID="i"/></ex:l></rdf:Description></rdf:RDF>\n' > "$dir/rdfxml"
      printf '\x46{"@context": {"ex": "http://ex.org/", "@base": "http://b.org/"},\n "@id": "ex:g", "@graph": [\n  {"@id": "a", "ex:p": "x", "@type": "ex:C"},\n  {"@id": "_:b", "ex:q": {"@list": [1, {"@value": "y", "@language": "en"}]}}\n]}' > "$dir/jsonld"
      printf '\x06[{"@id": "http://ex.org/a", "http://ex.org/p": [{"@id": "_:x"}, 2.5]}]' > "$dir/jsonld_array" ;;
    filter_query)
      printf 'from=earliest&source=sensor-1,s2&prefix=http://ex.org/ urn:' > "$dir/lists"
      printf 'pattern=%%3Fs+%%3Chttp%%3A%%2F%%2Fex.org%%2Fp%%3E+%%22o%%22%%40en+%%3Fg&follow=false' > "$dir/pattern"
      printf 'pattern=* <http://ex.org/p> << ?a ?b "1"^^<http://www.w3.org/2001/XMLSchema#integer> >>' > "$dir/quoted"
      printf 'ask=PREFIX ex: <http://ex.org/> ASK { ?s ex:p ?o . FILTER(lang(?o) = "en" %%26%%26 regex(str(?o), "o")) }&mode=compact' > "$dir/ask"
      printf 'ask=ASK { { ?s ?p ?o } UNION { GRAPH ?g { ?s ?p ?o OPTIONAL { ?o ?q ?r } } } MINUS { ?s a ?c } }&window=10' > "$dir/ask2" ;;
    roundtrip) ;;
  esac
}

status=0
for t in "${targets[@]}"; do
  seed_corpus "$t"
  mkdir -p "$out/artifacts/$t"
  if [ -n "$secs" ]; then budget=(-max_total_time="$secs"); else budget=(-runs="$runs" -seed="$seed"); fi
  echo "== fuzz $t (${budget[*]})" >&2
  if ! "$bin/$t" "${budget[@]}" -timeout=10 -malloc_limit_mb=512 -rss_limit_mb=2048 \
      -artifact_prefix="$out/artifacts/$t/" -print_final_stats=1 "$out/corpus/$t" \
      > "$out/$t.log" 2>&1; then
    status=1; failed=1
    tail -40 "$out/$t.log" >&2
    echo "fuzz/stable.sh: $t failed; the input is in $out/artifacts/$t/" >&2
  else
    grep -E '^(stat::number_of_executed_units|Done)' "$out/$t.log" | tail -1 >&2 || true
  fi
done
exit $status
