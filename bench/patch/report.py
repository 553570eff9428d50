#!/usr/bin/env python3
"""Formats bench/patch/out/results.jsonl as the Markdown tables of RESULTS.md.
For repeated measurements (same tool/op/input) the best (highest rows/s) is kept."""
import json
import sys

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]
machine = next(r for r in rows if r["kind"] == "machine")
sizes = {r["input"]: r for r in rows if r.get("kind") == "sizes"}
best = {}
for r in rows:
    if r.get("kind") == "throughput" or r.get("tool") == "jena-rdfpatch":
        name = r["input"].rsplit("/", 1)[-1]
        key = (r["tool"], r["op"], name)
        rate = r["rows_per_sec"]
        if key not in best or rate > best[key]["rows_per_sec"]:
            best[key] = dict(r, input=name)

print(f"Machine: {machine['nproc']} CPUs ({machine['cpu']}), {machine['date']}, "
      f"{machine['rustc']}, {machine['java']}\n")
print("### Sizes\n")
print("| workload | rows (A / D / TX) | RDF Patch text | text + gzip -6 | Jelly-Patch FLAT | FRAME | PUNCTUATED | FLAT + gzip |")
print("|---|---|---|---|---|---|---|---|")
def mb(n, ref):
    return f"{n / 1e6:.2f} MB ({100 * n / ref:.1f}%)"
for name, s in sizes.items():
    t = s["text_bytes"]
    print(f"| {name} | {s['rows']:,} ({s['adds']:,} / {s['deletes']:,} / {s['transactions']:,}) "
          f"| {t / 1e6:.2f} MB (100%) | {mb(s['text_gzip_bytes'], t)} "
          f"| {mb(s['jelly_flat_bytes'], t)} | {mb(s['jelly_frame_bytes'], t)} "
          f"| {mb(s['jelly_punctuated_bytes'], t)} | {mb(s['jelly_flat_gzip_bytes'], t)} |")
print()
print("Frames: " + "; ".join(
    f"{n}: FLAT {s['jelly_flat_frames']}, FRAME {s['jelly_frame_frames']}, PUNCTUATED {s['jelly_punctuated_frames']}"
    for n, s in sizes.items()))
print("\n### Throughput (rows/s, best of the runs; mean time per iteration within a run)\n")
ops = [
    ("jellyfish", "rdfpatch-write", "ours: RDF Patch text write"),
    ("jellyfish", "rdfpatch-parse", "ours: RDF Patch text parse"),
    ("jena-rdfpatch", "rdfpatch-write", "Jena 5.6.0: RDF Patch text write"),
    ("jena-rdfpatch", "rdfpatch-read", "Jena 5.6.0: RDF Patch text parse"),
]
for st in ["flat", "frame", "punctuated"]:
    ops += [
        ("jellyfish", f"jelly-{st}-encode", f"ours: Jelly-Patch {st.upper()} encode"),
        ("jellyfish", f"jelly-{st}-decode", f"ours: Jelly-Patch {st.upper()} decode (borrowed events)"),
        ("jellyfish", f"jelly-{st}-decode-owned", f"ours: Jelly-Patch {st.upper()} decode to owned rows"),
    ]
names = list(sizes)
print("| operation | " + " | ".join(names) + " |")
print("|---|" + "---|" * len(names))
for tool, op, label in ops:
    cells = []
    for n in names:
        r = best.get((tool, op, n))
        cells.append(f"{r['rows_per_sec'] / 1e6:.2f} M ({r['seconds'] * 1e3:.1f} ms)" if r else "n/a")
    print(f"| {label} | " + " | ".join(cells) + " |")
