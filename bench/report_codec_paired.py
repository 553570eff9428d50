#!/usr/bin/env python3
"""Markdown table of bench/run_codec_paired.sh's JSON lines: per dataset and comparison,
each round's jellyfish ÷ Jelly-JVM over all its slices, the median and lowest slice
ratio, and the rates."""
import json
import sys
from collections import OrderedDict

OPS = [
    ("encode-shared", "encode: shared session ÷ parsed input"),
    ("encode", "encode: owned ÷ unshared input"),
    ("decode", "decode"),
]


def main(path):
    rows = OrderedDict()
    for line in open(path):
        line = line.strip()
        if not line:
            continue
        d = json.loads(line)
        rows.setdefault((d["dataset"], d["kind"], d["op"]), []).append(d)
    print("| dataset | frames | comparison | jellyfish | Jelly-JVM | ÷ per round | "
          "median slice ÷ | lowest slice ÷ |")
    print("|---|---|---|---:|---:|---|---|---:|")
    seen = OrderedDict((k[:2], None) for k in rows)
    for ds, kind in seen:
        for op, label in OPS:
            runs = rows.get((ds, kind, op))
            if not runs:
                continue
            ours = sum(r["jellyfish_stmts_per_sec"] for r in runs) / len(runs)
            theirs = sum(r["jvm_stmts_per_sec"] for r in runs) / len(runs)
            per_round = " / ".join(f"{r['ratio']:.2f}" for r in runs)
            medians = " / ".join(f"{r['median_slice_ratio']:.2f}" for r in runs)
            lowest = min(r["min_slice_ratio"] for r in runs)
            print(f"| {ds} | {kind} | {label} | {ours / 1e6:.2f} M/s | {theirs / 1e6:.2f} M/s | "
                  f"{per_round} | {medians} | {lowest:.2f} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "bench/out/codec_paired.jsonl")
