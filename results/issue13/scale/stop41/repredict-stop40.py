#!/usr/bin/env python3
"""Stop 40's pairs predicted again: one shared run queue against per-core queues.

    results/issue13/scale/stop41/repredict-stop40.py [target/release/atomio]

Stop 40's cost files have no scheduler tick, so the model reads them with one shared run
queue; the same files with `machine.tick_ns` = 4 ms and `migration_cost_ns` = 500 µs (what
stop 41's calibrations measured) get per-core queues. Each prediction (`sim validate
--predict-only`) is compared with the rows that pair measured (`validate-N.json`): the
workload rows (ior-hard, tile, s3d), pairs 9-21 (three calibrations and three
invocations each).
"""
import json, os, subprocess, sys, tempfile

here = os.path.dirname(os.path.abspath(__file__))
stop40 = os.path.join(here, "..", "stop40")
exe = sys.argv[1] if len(sys.argv) > 1 else "target/release/atomio"


def predict(costs):
    out = subprocess.run([exe, "sim", "validate", "--costs", costs, "--predict-only"],
                         capture_output=True, text=True, check=True).stdout
    rows = {}
    for line in out.splitlines():
        p = line.split()
        if len(p) >= 7 and p[0] in ("ior-hard", "tile", "s3d"):
            rows[(p[0], p[1], p[2])] = float(p[5].replace(",", ""))
    return rows


totals = {"shared": [], "per-core": []}
for n in range(9, 22):
    calib = os.path.join(stop40, f"calib-{n}.json")
    if not os.path.exists(calib):
        continue
    v = json.load(open(os.path.join(stop40, f"validate-{n}.json")))
    rows = v["rows"] if isinstance(v, dict) else v
    measured = {(r["group"], r["row"], str(r["clients"])): r["measured"]
                for r in rows if r["group"] != "locks"}
    c = json.load(open(calib))
    c["machine"]["tick_ns"], c["machine"]["migration_cost_ns"] = 4e6, 5e5
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(c, f)
    line = [f"pair {n:2d}"]
    for name, path in (("shared", calib), ("per-core", f.name)):
        p = predict(path)
        errs = [abs(p[k] / m - 1) * 100 for k, m in measured.items()]
        totals[name] += errs
        line.append(f"{name}: {sum(e <= 25 for e in errs):2d} of {len(errs)} within ±25 %, "
                    f"median |err| {sorted(errs)[len(errs) // 2]:4.1f} %")
    os.unlink(f.name)
    print(" | ".join(line))
for name, e in totals.items():
    print(f"{name}: {sum(x <= 25 for x in e)} of {len(e)} rows within ±25 %, "
          f"mean |err| {sum(e) / len(e):.1f} %")
