# folio-size histogram of a file's page-cache pages (root): mmap, touch, pagemap -> kpageflags
import mmap, os, struct, sys, collections
def hist(path, limit=64<<20):
    fd=os.open(path, os.O_RDONLY); size=min(os.fstat(fd).st_size, limit)
    if size==0: return {}
    m=mmap.mmap(fd, size, prot=mmap.PROT_READ)
    buf=(ctypes:=None)
    import ctypes
    addr=ctypes.addressof(ctypes.c_char.from_buffer_copy(b'\0'))  # dummy
    # get mapping address via /proc/self/maps lookup of the path
    base=None
    for line in open('/proc/self/maps'):
        if line.rstrip().endswith(os.path.realpath(path)):
            base=int(line.split('-')[0],16); break
    n=size//4096
    for i in range(n): m[i*4096]
    pm=open('/proc/self/pagemap','rb'); kf=open('/proc/kpageflags','rb')
    pm.seek(base//4096*8); ents=struct.unpack('%dQ'%n, pm.read(8*n))
    sizes=collections.Counter(); run=0
    for e in ents:
        pfn=e & ((1<<55)-1)
        kf.seek(pfn*8); f=struct.unpack('Q',kf.read(8))[0]
        head=(f>>15)&1; tail=(f>>16)&1
        if tail: run+=1
        else:
            if run: sizes[run]+=1
            run=1
    if run: sizes[run]+=1
    m.close(); os.close(fd)
    return dict(sorted((k*4,v) for k,v in sizes.items()))
for p in sys.argv[1:]:
    print(p, "KiB:count", hist(p))
