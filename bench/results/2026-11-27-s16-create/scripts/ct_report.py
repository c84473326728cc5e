import sys,re,glob,json
TICK=100
def snap(p): return {l.split()[0]:(int(l.split()[1])+int(l.split()[2])) for l in open(p) if len(l.split())==3}
for label in sys.argv[1:]:
    d='/tmp/s16-createprof/threads-'+label
    try: a=snap(d+'.before'); b=snap(d+'.after')
    except FileNotFoundError: continue
    names={}
    for l in open(d+'.names'):
        m=re.match(r'Thread (0x[0-9A-F]+|\d+) \(\w+\): "([^"]*)"',l)
        m2=re.search(r'Thread (\d+) .*"([^"]*)"',l)
        if m2: names[m2.group(1)]=m2.group(2)
    diff={t:(b[t]-a.get(t,0))/TICK for t in b}
    tot=sum(diff.values())
    top=sorted(diff.items(),key=lambda kv:-kv[1])[:8]
    print(label,'total %.1f s'%tot, ', '.join('%s %.1f'%(names.get(t,t),v) for t,v in top))
for l in open('/tmp/s16-createprof/create_threads.jsonl'):
    r=json.loads(l); print(r['label'],round(r['create_s'],1),round(r['create_cpu_s'],1),round(r['loadavg_start'],1))
