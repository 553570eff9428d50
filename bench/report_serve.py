#!/usr/bin/env python3
"""Markdown tables from bench/out/serve.jsonl (see bench/run_serve.sh)."""
import json
import statistics
import sys
from collections import defaultdict

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
tp = defaultdict(list)
for r in rows:
    if r["bench"] == "throughput":
        tp[r["transport"]].append(r)
print("### Throughput: one publisher → one subscriber, 1M statements, 1,000 per frame\n")
print("| transport | runs | median statements/s | min | max | server CPU s (median) | server peak RSS |")
print("|---|---:|---:|---:|---:|---:|---:|")
for t, rs in tp.items():
    rates = sorted(r["statements_per_sec"] for r in rs)
    cpu = statistics.median(r["server_cpu_secs"] for r in rs)
    rss = max(r["server_peak_rss_kib"] for r in rs)
    print(f"| {t} | {len(rs)} | {statistics.median(rates)/1e6:.2f} M | {rates[0]/1e6:.2f} M | {rates[-1]/1e6:.2f} M | {cpu:.2f} | {rss/1024:.0f} MiB |")
print("\n### Latency: publish → delivery (µs)\n")
print("| transport | idle threads | statements/item | interval | items | p50 | p90 | p99 | max |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    if r["bench"] != "latency":
        continue
    iv = r["interval_us"]
    ivs = f"{iv/1000:g} ms" if iv >= 1000 else f"{iv} µs"
    idle = "busy-poll" if r.get("busy_poll") else "sleep"
    print(f"| {r['transport']} | {idle} | {r['statements_per_item']} | {ivs} | {r['items']} | {r['p50_us']:.0f} | {r['p90_us']:.0f} | {r['p99_us']:.0f} | {r['max_us']:.0f} |")
