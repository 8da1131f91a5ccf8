import sys, statistics as st
for f in sys.argv[1:]:
    rows=[l.split() for l in open(f)]
    lat=[float(a) for a,b in rows]; fe=[int(b) for a,b in rows]
    s=sorted(lat); n=len(s)
    print(f, "n",n,"med %.0f p99 %.0f"%(s[n//2], s[int(n*.99)]))
    byk={}
    k=None
    for l,x in zip(lat,fe):
        if x>0: k=0
        elif k is not None: k+=1
        kk = k if k is None or k<6 else (6 if k<20 else 20)
        byk.setdefault(kk,[]).append(l)
    thr=s[int(n*.99)]
    for kk in sorted(byk, key=lambda v: -1 if v is None else v):
        v=sorted(byk[kk]); 
        print("  k=%s n=%d med=%.0f p90=%.0f p99=%.0f  over_p99=%d"%(kk,len(v),v[len(v)//2],v[int(len(v)*.9)],v[int(len(v)*.99)], sum(1 for x in v if x>=thr)))
