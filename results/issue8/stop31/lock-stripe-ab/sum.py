import json,glob,statistics as st,collections
res=collections.defaultdict(list)
for f in sorted(glob.glob('results/issue8/stop31/lock-stripe-ab/*.json')):
    w,v,r=f.split('/')[-1][:-5].split('-')
    d=json.load(open(f))
    rows=d['rows'] if isinstance(d,dict) and 'rows' in d else d
    rate={x['strategy']:x['mib_per_s'] for x in rows}
    one=rate['ching:datatype:one-try']
    if 'none' in rate: res[(w,v,'one/none')].append(one/rate['none'])
    res[(w,v,'one/bext')].append(one/rate['bounding-extent'])
    res[(w,v,'one MiB/s')].append(one)
for k in sorted(res): print(k, 'median %.3f'%st.median(res[k]), ' '.join('%.2f'%x for x in res[k]))
