"""The pairs' table from their validate-N.json files:
    summarize.py N [DIR] [--locks]
N: the last pair; DIR: where the files are (default: beside this script); --locks adds a
column of `bench locks` rows within ±25 %."""
import json, os, sys, statistics
args = [a for a in sys.argv[1:] if a != '--locks']
locks = '--locks' in sys.argv[1:]
here = args[1] if len(args) > 1 else os.path.dirname(os.path.abspath(__file__))
def summ(n):
    try: rows=json.load(open(f'{here}/validate-{n}.json'))
    except Exception: return None
    lock_rows=[r for r in rows if r.get('error_pct') is not None and r['group'] == 'locks']
    rows=[r for r in rows if r.get('error_pct') is not None and r['group'] != 'locks']
    w=sum(1 for r in rows if abs(r['error_pct'])<=25)
    med=statistics.median(abs(r['error_pct']) for r in rows)
    def g(group,cl,row):
        for r in rows:
            if r['group']==group and r['clients']==cl and r['row']==row: return r['error_pct']
    ior=[g('ior-hard',c,s) for c in (4,8) for s in ('bounding-extent','ching:datatype:one-try')]
    tile=[r['error_pct'] for r in rows if r['group']=='tile']
    s3d4=[g('s3d',4,s) for s in ('none','ching:datatype:one-try','ching:list:one-try')]
    s3d8=[g('s3d',8,s) for s in ('none','ching:datatype:one-try','ching:list:one-try')]
    real8=[r['measured'] for r in rows if r['group']=='s3d' and r['clients']==8 and r['row']=='none'][0]
    f=lambda v: ' / '.join(f'{x:+.0f}' for x in v)
    rng=lambda v: f'{min(v):+.0f} … {max(v):+.0f} %'
    if locks:
        lw=sum(1 for r in lock_rows if abs(r['error_pct'])<=25)
        head=f"| {n} | **{w}** of 20 | {lw} of {len(lock_rows)} |"
    else:
        head=f"| {n} | **{w}** |"
    return f"{head} {med:.0f} % | {rng(ior)} | {rng(tile)} | {f(s3d4)} | {f(s3d8)} | {real8:,.0f} |"
if locks:
    print("| pair | workload rows within ±25 % | `bench locks` rows within | median workload \\|err\\| | ior-hard locked rows | tile rows | S3D 4: none / datatype / list | S3D 8: none / datatype / list | real S3D `none` at 8, MiB/s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
else:
    print("| pair | rows within ±25 % | median \\|err\\| | ior-hard locked rows | tile rows | S3D 4: none / datatype / list | S3D 8: none / datatype / list | real S3D `none` at 8, MiB/s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
for n in range(1,int(args[0])+1):
    s=summ(n)
    if s: print(s)
