#!/usr/bin/env python3
"""Markdown tables and a PNG plot from bench/out/fanout.jsonl (see bench/run_fanout.sh).

Usage: report_fanout.py fanout.jsonl [fanout.png]
"""
import json
import sys
from collections import defaultdict

TARGET_N = 40_000
TARGET_P50_MS = 1000
TARGET_P99_MS = 2000
TARGET_RSS_MIB = 2048

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
png = sys.argv[2] if len(sys.argv) > 2 else None


def variant(r):
    """A short name of everything but N: transport, window, encoding, rate."""
    parts = [r["transport"]]
    if r.get("window_ms"):
        parts.append(f"window {r['window_ms']} ms")
    if r.get("encoding", "none") != "none":
        parts.append(r["encoding"])
    if r.get("rate", 4) != 4:
        parts.append(f"{r['rate']:g}/s")
    return ", ".join(parts)


def fmt_ms(v):
    if v is None or v != v:  # NaN
        return "–"
    return f"{v:,.0f}" if v >= 100 else f"{v:.1f}"


def meets(r):
    """Whether a run meets the issue's targets (delay, loss, RSS)."""
    return (
        r["delay_p50_ms"] < TARGET_P50_MS
        and r["delay_p99_ms"] < TARGET_P99_MS
        and r["lost"] == 0
        and r["duplicates"] == 0
        and r["server_rss_peak_mib"] < TARGET_RSS_MIB
    )


groups = defaultdict(list)
for r in rows:
    groups[variant(r)].append(r)

print("### Fan-out: one publisher, N subscribers, one 2-vCPU machine\n")
first = next((r for r in rows if "error" not in r), None)
if first:
    print(
        f"Items: {first['item_statements']:g} statements, {first['item_bytes_published']:.0f} bytes of Jelly "
        f"published, {first['item_bytes_delivered']:.0f} bytes delivered (with the offset/timestamp/header "
        f"metadata); {first['arrivals']} arrivals; window of {first['items']} items at 4/s unless noted. "
        "Delay = receive time − the publisher's send time, over every item at every subscriber.\n"
    )
print(
    "| variant | N | servers | connected | p50 ms | p99 ms | max ms | lost | dup | server CPU % | server RSS MiB "
    "| load-gen CPU % | ramp s | targets |"
)
print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
for name, rs in groups.items():
    for r in sorted(rs, key=lambda r: r["subscribers"]):
        servers = "1" if not r.get("edges") else f"1+{r['edges']} edges"
        if "error" in r:
            err = r["error"].replace("|", "/")[:120]
            print(f"| {name} | {r['subscribers']:,} | {servers} | – | – | – | – | – | – | – | – | – | – | failed: {err} |")
            continue
        conn = f"{r['connected']:,}"
        if r["connect_failures"]:
            conn += f" ({r['connect_failures']:,} failed)"
        if r.get("verify_every", 1) > 1:
            conn += f" ({r['verifying_subscribers']:,} checked)"
        ok = "yes" if meets(r) else "no"
        if r["subscribers"] < TARGET_N:
            ok += " (N < 40k)"
        if r.get("encoding", "none") != "none" and r.get("compressed_subscribers", 0) < r["connected"]:
            ok += f"; only {r.get('compressed_subscribers', 0):,} responses were compressed"
        print(
            f"| {name} | {r['subscribers']:,} | {servers} | {conn} | {fmt_ms(r['delay_p50_ms'])} "
            f"| {fmt_ms(r['delay_p99_ms'])} | {fmt_ms(r['delay_max_ms'])} | {r['lost']:,} | {r['duplicates']:,} "
            f"| {r['server_cpu_pct']:.0f} | {r['server_rss_peak_mib']:,.0f} | {r['loadgen_cpu_pct']:.0f} "
            f"| {r['ramp_secs']:.1f} | {ok} |"
        )
print(
    f"\nTargets (issue 6): {TARGET_N:,} subscribers with p50 < {TARGET_P50_MS / 1000:g} s, "
    f"p99 < {TARGET_P99_MS / 1000:g} s, zero loss and server RSS < {TARGET_RSS_MIB // 1024} GB. "
    "CPU % is of one core (the machine has 2); server CPU and RSS sum the origin and edge processes. "
    "Loss counts items of the window missing at a checked subscriber (all subscribers unless "
    "VERIFY_EVERY > 1), including those still missing after the drain."
)
errs = [r for r in rows if "error" not in r and r.get("errors")]
if errs:
    print("\nErrors seen by subscribers (first few per run):\n")
    for r in errs:
        print(f"- {variant(r)}, N={r['subscribers']:,}: " + "; ".join(map(str, r["errors"]))[:300])

if png:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("\n(matplotlib is missing: no plot)", file=sys.stderr)
        sys.exit(0)
    fig, axes = plt.subplots(2, 2, figsize=(12, 9))
    panels = [
        (axes[0][0], "delay_p50_ms", "median delay (ms)", TARGET_P50_MS),
        (axes[0][1], "delay_p99_ms", "p99 delay (ms)", TARGET_P99_MS),
        (axes[1][0], "server_rss_peak_mib", "server RSS, peak (MiB)", TARGET_RSS_MIB),
        (axes[1][1], "server_cpu_pct", "server CPU (% of one core)", None),
    ]
    for ax, key, title, target in panels:
        for name, rs in groups.items():
            pts = sorted((r["subscribers"], r[key]) for r in rs if "error" not in r)
            if not pts:
                continue
            xs, ys = zip(*pts)
            ax.plot(xs, ys, marker="o", label=name)
        if target:
            ax.axhline(target, color="red", linestyle="--", linewidth=1, label="target")
        ax.axvline(TARGET_N, color="grey", linestyle=":", linewidth=1)
        ax.set_xscale("log")
        if key.startswith("delay"):
            ax.set_yscale("log")
        ax.set_xlabel("subscribers (N)")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.suptitle("jelly serve fan-out: ~900-byte items, one 2-vCPU machine (load generator included)")
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    print(f"\n![fan-out plot]({png.split('/')[-1]})")
