"""Each message-size window of scale.jsonl (SCALE_CPU_DETAIL=1): broker CPU per message and where it went by
thread group (threads named from bench/lib/gcprobe.py's files): python windows.py DIR"""
import glob, json, sys
d0 = sys.argv[1]
names = {}
for f in glob.glob(d0 + "/gc/gc-*.jsonl"):
    for line in open(f):
        d = json.loads(line)
        if "threads" in d:
            names.update(d["threads"])
rnd = {}
for line in open(d0 + "/scale.jsonl"):
    d = json.loads(line)
    if d["axis"] != "msgsize":
        continue
    key = (d["label"], d["size"])
    rnd[key] = rnd.get(key, 0) + 1
    for k in ("produce", "consume", "same_log_consume"):
        det = d.get(k + "_detail")
        if det is None:
            continue
        by = {}
        for t, v in det["threads_ms"].items():
            n = "main" if t == "main" else names.get(t.rsplit("-", 1)[-1], t)
            n = "workers" if n.startswith(("uvloop", "asyncio")) else n
            by[n] = by.get(n, 0) + v
        print(f"{d['label']:9} {d['size']:>4} B r{rnd[key]} {k:17} {d[k + '_cpu_us_per_msg']:.4f} us/msg "
              f"{det['wall_ms']:.0f} ms wall, {det['cpu_ms']:.0f} ms cpu:",
              {n: round(v, 1) for n, v in sorted(by.items(), key=lambda kv: -kv[1]) if v >= 1})
