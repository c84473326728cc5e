"""A py-spy raw profile (on stdin, `py-spy record -f raw`) read under one frame: every sample with a frame containing
KEY on its stack, the frames below it inclusive (% of KEY's samples, % of the event loop's), its direct children and
the leaf frames (self).
    zcat ../2026-11-27-s15-conn/pyspy-pre-c5000.raw.gz | python3 h4_sub.py CPyDef_produce___produce [TOP]
"""
import sys,re,collections
key=sys.argv[1]
incl=collections.Counter(); selfc=collections.Counter(); child=collections.Counter(); tot=0; alls=0
for line in sys.stdin:
    stack,_,n=line.rstrip().rpartition(' '); n=int(n)
    fr=[re.sub(r' \(/.*?\)| \(kbus/_hotpath.*?\)| \(.*?\.so\)','',f) for f in stack.split(';')]
    if any('run_forever' in f for f in fr): alls+=n
    idx=[i for i,f in enumerate(fr) if key in f]
    if not idx: continue
    sub=fr[idx[0]:]
    tot+=n
    for f in set(sub): incl[f]+=n
    selfc[sub[-1]]+=n
    if len(sub)>1: child[sub[1]]+=n
print('loop samples',alls,'key samples',tot)
for f,n in incl.most_common(int(sys.argv[2]) if len(sys.argv)>2 else 70): print(f'{100*n/tot:5.1f} {100*n/alls:5.1f} {f[:150]}')
print('--- direct children')
for f,n in child.most_common(30): print(f'{100*n/tot:5.1f} {f[:150]}')
print('--- self')
for f,n in selfc.most_common(30): print(f'{100*n/tot:5.1f} {f[:150]}')
