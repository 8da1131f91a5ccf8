#!/usr/bin/env python3
"""Re-predict the measured rows of earlier pairs with a model built from one of the
diffs here, with and without the sleepless pick-up: rows within ±25 % per variant.

  EXE=<atomio built with the diff> repredict-sleepless.py MODE X RATIO_S GROUPS [-v]

MODE `client` (sleepless-pickup.diff): net.client_next_ns = X × client_batch_ns.
MODE `send` (sleepless-pickup-and-send.diff): net.server_send_ns = X ns.
Both: net.server_next_ns = RATIO_S × server_batch_ns. The `client` runs of this stop took
stop 40's pairs 9-20 as well for the workload groups; `send` runs took stops 41 and 44
(and stop 40's pair 21 for `locks`)."""
import json, subprocess, sys, os, glob
exe = os.environ.get('EXE', 'target/release/atomio')
mode = sys.argv[1]; ratio_c = float(sys.argv[2]); ratio_s = float(sys.argv[3]); groups = sys.argv[4]
pairs = []
for d, ids in [('stop41', ['1','2','3','4']), ('stop44', ['1','2t'])] + \
        ([('stop40', ['21'])] if groups == 'locks' else []):
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
            n['server_next_ns'] = n['server_batch_ns'] * ratio_s
            if mode == 'client':
                n['client_next_ns'] = n['client_batch_ns'] * ratio_c
            else:
                n['server_send_ns'] = ratio_c
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
