#!/usr/bin/env python3
"""Medians over invocations of `atomio bench <workload>` JSON files, as ratios inside
each invocation: python3 summarize.py ihd-*.json (the rows' order is the first file's)."""
import json, statistics, sys

ratios = {}
for path in sys.argv[1:]:
    rows = {r["strategy"]: r["mib_per_s"] for r in json.load(open(path))}
    refs = {k: rows[k] for k in ("none", "posix-fcntl", "bounding-extent") if k in rows}
    for name, rate in rows.items():
        for ref, base in refs.items():
            ratios.setdefault(name, {}).setdefault(ref, []).append(rate / base)
refs = sorted({ref for per in ratios.values() for ref in per})
print(f"{'row':30s} " + "  ".join(f"x {r:>15s} (median; each invocation)" for r in refs))
for name, per in ratios.items():
    cells = []
    for ref in refs:
        v = per.get(ref, [])
        cells.append(f"{statistics.median(v):5.3f} ({' '.join(f'{x:.2f}' for x in v)})" if v else "-")
    print(f"{name:30s} " + "  ".join(f"{c:40s}" for c in cells))
