import json,glob,statistics as st,collections,sys
d0=sys.argv[1] if len(sys.argv)>1 else '/tmp/ab2'
res=collections.defaultdict(list)
for f in sorted(glob.glob(d0+'/*.json')):
    w,v,r=f.split('/')[-1][:-5].split('-')
    rate={x['strategy']:x['mib_per_s'] for x in json.load(open(f))}
    b=rate['bounding-extent']
    for k,x in rate.items():
        res[(w,v,k+' / bounding-extent')].append(x/b)
    if 'none' in rate: res[(w,v,'datatype one-try / none')].append(rate['ching:datatype:one-try']/rate['none'])
for k in sorted(res): print(k, 'median %.3f'%st.median(res[k]), ' '.join('%.2f'%x for x in res[k]))
