#!/usr/bin/env python3
"""Re-predict the measured rows of earlier pairs with today's model, with and without
the sleepless pick-up (`net.*_next_ns`, set from each calibration's own batch figures at
the ratio measured today): rows within ±25 % per variant."""
import json, subprocess, sys, os, glob
exe = 'target/release/atomio'
ratio_c = float(sys.argv[1]); ratio_s = float(sys.argv[2]); groups = sys.argv[3]
pairs = []
for d, ids in [('stop40', ['21']), ('stop41', ['1','2','3','4']), ('stop44', ['1','2t'])] + \
        ([('stop40', [str(i) for i in range(9, 21)])] if groups != 'locks' else []):
    for i in ids:
        v = f'results/issue13/scale/{d}/validate-{i}.json'
        c = f'results/issue13/scale/{d}/calib-{i}.json'
        if os.path.exists(v) and os.path.exists(c):
            pairs.append((d + '-' + i, v, c))
tot = {}
for name, v, c in pairs:
    meas = {(r['group'], r['row'], r['clients']): r['measured'] for r in json.load(open(v)) if r['measured']}
    if not any(k[0] in groups.split(',') for k in meas):
        continue
    out = []
    for variant in ['old', 'next']:
        cj = json.load(open(c))
        n = cj['net']
        if variant == 'next':
            n['client_next_ns'] = n['client_batch_ns'] * ratio_c
            n['server_next_ns'] = n['server_batch_ns'] * ratio_s
        f = f'/tmp/rp/{name}-{variant}.json'
        json.dump(cj, open(f, 'w'))
        jf = f'/tmp/rp/{name}-{variant}-pred.json'
        subprocess.run([exe, 'sim', 'validate', '--costs', f, '--predict-only', '--groups', groups, '--json', jf],
                       capture_output=True, check=True)
        within, rows = 0, 0
        errs = []
        for r in json.load(open(jf)):
            k = (r['group'], r['row'], r['clients'])
            if k in meas:
                e = (r['predicted'] - meas[k]) / meas[k] * 100
                rows += 1; within += abs(e) <= 25
                errs.append(f"{r['row'][:14]}@{r['clients']}:{e:+.0f}")
        tot.setdefault(variant, [0, 0]); tot[variant][0] += within; tot[variant][1] += rows
        out.append(f"{variant}: {within}/{rows}")
        if '-v' in sys.argv: print(name, variant, ' '.join(errs))
    print(name, '  '.join(out))
print('total', tot)
