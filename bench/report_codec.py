#!/usr/bin/env python3
"""Turns bench/out/codec.jsonl (from bench/run_codec.sh) into Markdown tables."""
import csv
import json
import os
import sys
from collections import defaultdict

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
here = os.path.dirname(os.path.abspath(__file__))
summary = {}
with open(os.path.join(here, "..", "..", "shared", "datasets", "SUMMARY.tsv")) as f:
    for r in csv.DictReader(f, delimiter="\t"):
        summary[r["dataset"]] = r
name_map = {"iot-weather": "iot-assist-weather", "nanopubs": "nanopubs-fair-pkd"}

by = defaultdict(dict)
for r in rows:
    key = (r["dataset"], r["kind"])
    tool = r["tool"]
    op = r["op"]
    if tool == "jellyfish" and op == "encode" and r.get("input_form") == "interned":
        tool = "jellyfish (interned input)"
    by[key][(tool, op)] = r


def rate(r):
    # Every tool reports stmts_per_sec (statements per second of loop time); their
    # "seconds" fields differ (mean per iteration vs total).
    return r.get("stmts_per_sec") if r else None


def fmt(x):
    return "–" if x is None else f"{x / 1e6:.2f} M/s"


print("| dataset | frames | op | jellyfish | Jelly-JVM | pyjelly | jellyfish ÷ JVM |")
print("|---|---|---|---:|---:|---:|---:|")
for (ds, kind), m in by.items():
    for op in ("encode", "decode"):
        ours = rate(m.get(("jellyfish", op)))
        jvm = rate(m.get(("jelly-jvm", op)))
        py = rate(m.get(("pyjelly", op)))
        ratio = f"{ours / jvm:.2f}×" if ours and jvm else "–"
        print(f"| {ds} | {kind} | {op} | {fmt(ours)} | {fmt(jvm)} | {fmt(py)} | {ratio} |")
        if op == "encode" and ("jellyfish (interned input)", "encode") in m:
            oi = rate(m[("jellyfish (interned input)", "encode")])
            r2 = f"{oi / jvm:.2f}×" if oi and jvm else "–"
            print(f"| {ds} | {kind} | encode, interned input | {fmt(oi)} | | | {r2} |")
        if op == "decode" and ("jellyfish", "decode-owned") in m:
            do = rate(m[("jellyfish", "decode-owned")])
            r3 = f"{do / jvm:.2f}×" if do and jvm else "–"
            print(f"| {ds} | {kind} | decode into owned oxrdf quads | {fmt(do)} | | | {r3} |")

print()
print("| dataset | frames | statements | jellyfish bytes | Jelly-JVM bytes | difference | % of N-Triples | oxttl parse | oxttl write |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
for (ds, kind), m in by.items():
    ours = m.get(("jellyfish", "encode"))
    jvm = m.get(("jelly-jvm", "encode"))
    if not ours:
        continue
    diff = f"{(ours['bytes'] - jvm['bytes']) / jvm['bytes'] * 100:+.2f}%" if jvm else "–"
    s = summary.get(name_map.get(ds, ds), {})
    nt = int(s.get("uncompressed_bytes") or 0)
    pct = f"{ours['bytes'] / nt * 100:.1f}%" if nt else "–"
    op = rate(m.get(("jellyfish", "oxttl-parse")))
    ow = rate(m.get(("jellyfish", "oxttl-write")))
    print(
        f"| {ds} | {kind} | {ours['statements']:,} | {ours['bytes']:,} | {format(jvm['bytes'], ',') if jvm else '–'} | {diff} | {pct} | {fmt(op)} | {fmt(ow)} |"
    )
