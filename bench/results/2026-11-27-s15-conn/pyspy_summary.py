import collections, sys, re
path=sys.argv[1]; must=sys.argv[2] if len(sys.argv)>2 else 'connection_path.py'
self_c=collections.Counter(); incl=collections.Counter(); total=0; alls=0
for line in open(path):
    stack,_,n=line.rstrip().rpartition(' ')
    n=int(n); alls+=n
    if must not in stack: continue
    total+=n
    frames=[re.sub(r' \(/.*?\)| \(kbus/_hotpath.*?\)','',f) for f in stack.split(';')]
    self_c[frames[-1]]+=n
    for f in set(frames): incl[f]+=n
print("samples",alls,"in scope",total)
print("--- self")
for f,n in self_c.most_common(45): print(f"{100*n/total:5.1f} {f[:140]}")
print("--- inclusive")
for f,n in incl.most_common(60): print(f"{100*n/total:5.1f} {f[:140]}")
