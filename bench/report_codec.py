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

# With ROUNDS > 1, bench/run_codec.sh measures the compared pairs once per round, so a
# (tool, op) pair can have several rows: they are kept in order and combined below.
def tool_of(r):
    if r["tool"] == "jellyfish" and r["op"] == "encode" and r.get("input_form") == "interned":
        return "jellyfish (interned input)"
    if r["tool"] == "jellyfish" and r["op"] == "encode" and r.get("input_form") == "interned-shared":
        return "jellyfish (shared session)"
    if r["tool"] == "jelly-jvm" and r["op"] == "encode" and r.get("input_form") == "unshared":
        return "jelly-jvm (unshared input)"
    return r["tool"]


rounds = defaultdict(lambda: defaultdict(list))
for r in rows:
    rounds[(r["dataset"], r["kind"])][(tool_of(r), r["op"])].append(r)
# The first round's row stands for sizes and counts (they do not change between rounds).
by = {key: {k: v[0] for k, v in m.items()} for key, m in rounds.items()}


def rate(r):
    # Every tool reports stmts_per_sec (statements per second of loop time); their
    # "seconds" fields differ (mean per iteration vs total). Over several rounds the
    # rate is the mean of the rounds' rates (each round loops for the same time).
    if not r:
        return None
    rs = rounds[(r["dataset"], r["kind"])][(tool_of(r), r["op"])]
    vals = [x["stmts_per_sec"] for x in rs if x.get("stmts_per_sec")]
    return sum(vals) / len(vals) if vals else None


def median_rate(r):
    # Statements ÷ the median iteration time (over rounds, the median of the rounds'
    # medians), for the tools that report it: steadier than the mean on a shared host.
    if not r:
        return None
    rs = rounds[(r["dataset"], r["kind"])][(tool_of(r), r["op"])]
    meds = sorted(x["median_seconds"] for x in rs if x.get("median_seconds"))
    if not meds:
        return None
    k = len(meds) // 2
    mid = meds[k] if len(meds) % 2 else (meds[k - 1] + meds[k]) / 2
    return r["statements"] / mid


def fmt(x):
    return "–" if x is None else f"{x / 1e6:.2f} M/s"


def ratio_of(a, b):
    return f"{a / b:.2f}×" if a and b else "–"


n_rounds = max((len(v) for m in rounds.values() for v in m.values()), default=1)
print(f"Rounds: {n_rounds}. Rates are statements ÷ mean iteration time; the last two")
print("columns use the median iteration time instead.")
print()
print("| dataset | frames | op | jellyfish | Jelly-JVM | pyjelly | jellyfish ÷ JVM | median: jellyfish / JVM | ÷ by median |")
print("|---|---|---|---:|---:|---:|---:|---:|---:|")
def compared(ds, kind, label, ours_r, theirs_r, theirs_shown=True, py=""):
    """One table row: jellyfish's rate against Jelly-JVM's, by mean and by median."""
    o, t = rate(ours_r), rate(theirs_r)
    mo, mt = median_rate(ours_r), median_rate(theirs_r)
    med = f"{fmt(mo)} / {fmt(mt)}" if mo and mt else "–"
    shown = fmt(t) if theirs_shown else ""
    cells = [ds, kind, label, fmt(o), shown, py, ratio_of(o, t), med, ratio_of(mo, mt)]
    print("|" + "|".join(f" {c} " if c else " " for c in cells) + "|")


for (ds, kind), m in by.items():
    for op in ("encode", "decode"):
        jvm_r = m.get(("jelly-jvm", op))
        jvm = rate(jvm_r)
        compared(ds, kind, op, m.get(("jellyfish", op)), jvm_r, py=fmt(rate(m.get(("pyjelly", op)))))
        if op == "encode" and ("jelly-jvm (unshared input)", "encode") in m:
            compared(
                ds,
                kind,
                "encode, both from a string per term occurrence",
                m.get(("jellyfish", op)),
                m[("jelly-jvm (unshared input)", "encode")],
            )
        if op == "encode" and ("jellyfish (interned input)", "encode") in m:
            oi = rate(m[("jellyfish (interned input)", "encode")])
            r2 = f"{oi / jvm:.2f}×" if oi and jvm else "–"
            print(f"| {ds} | {kind} | encode, interned input | {fmt(oi)} | | | {r2} | | |")
        if op == "encode" and ("jellyfish (shared session)", "encode") in m:
            compared(
                ds,
                kind,
                "encode, interned input, shared session",
                m[("jellyfish (shared session)", "encode")],
                jvm_r,
                theirs_shown=False,
            )
        if op == "decode" and ("jellyfish", "decode-owned") in m:
            do = rate(m[("jellyfish", "decode-owned")])
            r3 = f"{do / jvm:.2f}×" if do and jvm else "–"
            print(f"| {ds} | {kind} | decode into owned oxrdf quads | {fmt(do)} | | | {r3} | | |")

print()
print("Each round's pair, jellyfish ÷ Jelly-JVM (by mean iteration time; rounds in order):")
print()
print("| dataset | frames | encode: shared session ÷ parsed input | encode: owned ÷ unshared input | encode: owned ÷ parsed input | decode |")
print("|---|---|---:|---:|---:|---:|")
for (ds, kind), m in rounds.items():
    def pair(a, b, op="encode"):
        xs, ys = m.get((a, op), []), m.get((b, op), [])
        if not xs or not ys:
            return "–"
        return " / ".join(f"{x['stmts_per_sec'] / y['stmts_per_sec']:.2f}" for x, y in zip(xs, ys))

    print(
        f"| {ds} | {kind} | {pair('jellyfish (shared session)', 'jelly-jvm')} | "
        f"{pair('jellyfish', 'jelly-jvm (unshared input)')} | {pair('jellyfish', 'jelly-jvm')} | "
        f"{pair('jellyfish', 'jelly-jvm', 'decode')} |"
    )

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
