"""Per-thread CPU of each broker over the msgsize axis (from the first msgsize window's start to the last one's
end, bench scale.jsonl's cpu detail), from the 1 s sampler's lines, threads named from the gcprobe files."""
import glob, json, sys
samples, gcdir, scale = sys.argv[1], sys.argv[2], sys.argv[3]
names = {}
for f in glob.glob(gcdir + "/gc-*.jsonl"):
    for l in open(f):
        d = json.loads(l)
        if "threads" in d:
            names.update(d["threads"])
span = {}
for l in open(scale):
    d = json.loads(l)
    if d["axis"] != "msgsize":
        continue
    for k in ("produce_detail", "consume_detail", "same_log_consume_detail"):
        if k in d:
            a, b = d[k]["start_monotonic"], d[k]["start_monotonic"] + d[k]["wall_ms"] / 1000
            lo, hi = span.get(d["label"], (a, b))
            span[d["label"]] = (min(lo, a), max(hi, b))
first, last = {}, {}
for l in open(samples):
    d = json.loads(l)
    if d["label"] not in span:
        continue
    lo, hi = span[d["label"]]
    if lo - 1 <= d["t"] <= hi + 1:
        first.setdefault(d["label"], d)
        last[d["label"]] = d
for label in sorted(first):
    a, b = first[label], last[label]
    per = {}
    for tid, ns in b["threads"].items():
        n = names.get(tid, tid)
        n = "uvloop (to_thread workers)" if n.startswith("uvloop") else n
        per[n] = per.get(n, 0) + (ns - a["threads"].get(tid, 0)) / 1e6
    print(f"{label}: {b['t'] - a['t']:.0f} s (the msgsize axis, 3 rounds), broker CPU {sum(per.values()):.0f} ms:",
          {k: round(v) for k, v in sorted(per.items(), key=lambda kv: -kv[1]) if v >= 1})
