import glob, json, sys
path, gcdir = sys.argv[1], sys.argv[2]
names = {}
for f in glob.glob(gcdir + '/gc-*.jsonl'):
    for l in open(f):
        d = json.loads(l)
        if 'threads' in d:
            names.update(d['threads'])
def nm(k):
    if k == 'main': return 'main'
    tid = k.rsplit('-', 1)[1]
    return names.get(tid, k)
for l in open(path):
    d = json.loads(l)
    if d['axis'] != 'msgsize' and d.get('phase') != 'load': continue
    for k in ('produce_detail', 'consume_detail', 'same_log_consume_detail'):
        if k not in d: continue
        v = d[k]; m = k.replace('_detail', '_cpu_us_per_msg')
        thr = {}
        for a, b in v['threads_ms'].items():
            n = nm(a); n = 'uvloop(to_thread)' if n.startswith('uvloop') else n
            thr[n] = thr.get(n, 0) + b
        print(d['time'][11:], f"{d['label']:9s}", d['x'], k.replace('_detail', ''), round(d[m], 3), 'cpu', round(v['cpu_ms']), {a: round(b) for a, b in sorted(thr.items(), key=lambda x: -x[1]) if b >= 5})
