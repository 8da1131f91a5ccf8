import json,sys
for fn in sys.argv[1:]:
    d=json.load(open(fn))
    for row in d['rows']:
        if row['strategy']=='limit':
            print(fn.split('/')[-1], 'limit p99', round(row['p99_ratio'],3), end='  ')
            continue
        runs=row['runs']
        print('vers p99', round(row['p99_ratio'],3),'med',round(row['median_ratio'],3), 'runs', [round(r['p99_ratio'],2) for r in runs],
              'wmed', [round(r['write_median_us']/1000,1) for r in runs],
              'cachedp99', [round((r['split']['cached'] or {}).get('p99_us',0)) for r in runs],
              'idlep99', [round(r['idle']['p99_us']) for r in runs],
              'fetch%', [round(100*r['split']['fetching_share'],2) for r in runs])
