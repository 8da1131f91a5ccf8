#!/usr/bin/env python3
"""Re-predict stops 45-46's measured rows with two builds: rows within ±25 % per build.
  repredict.py OLD_EXE NEW_EXE GROUPS [-v]   (from the repository root; writes /tmp/rp/)"""
import json, subprocess, sys, os
os.makedirs('/tmp/rp', exist_ok=True)
old, new, groups = sys.argv[1], sys.argv[2], sys.argv[3]
pairs = [(d, i) for d, ids in [('stop45', ['1', '2', '3io', '4']), ('stop46', ['1', '2', '3', '4'])] for i in ids]
tot = {}
for d, i in pairs:
    v = f'results/issue13/scale/{d}/validate-{i}.json'; c = f'results/issue13/scale/{d}/calib-{i}.json'
    meas = {(r['group'], r['row'], r['clients']): r['measured'] for r in json.load(open(v)) if r['measured']}
    out = []
    for name, exe in [('old', old), ('new', new)]:
        jf = f'/tmp/rp/{d}-{i}-{name}.json'
        subprocess.run([exe, 'sim', 'validate', '--costs', c, '--predict-only', '--groups', groups, '--json', jf],
                       capture_output=True, check=True)
        within = rows = 0; errs = []
        for r in json.load(open(jf)):
            k = (r['group'], r['row'], r['clients'])
            if k in meas:
                e = (r['predicted'] - meas[k]) / meas[k] * 100
                rows += 1; within += abs(e) <= 25
                errs.append(f"{r['row'][:16]}@{r['clients']}:{e:+.0f}")
        tot.setdefault(name, [0, 0]); tot[name][0] += within; tot[name][1] += rows
        out.append(f"{name}: {within}/{rows}")
        if '-v' in sys.argv: print(f'{d}-{i}', name, ' '.join(errs))
    print(f'{d}-{i}', '  '.join(out))
print('total', tot)
