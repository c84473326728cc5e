"""The 1 s sampler's lines (sampler.py) per broker: each second's CPU by thread group (threads named from
bench/lib/gcprobe.py's files), over the idle and load windows of idle_light.sh. Prints, per window and broker, the
total by group and the seconds whose to_thread workers (the checkpoints' threads) or whose whole broker took more
than 10 ms: python spikes.py OUTDIR"""
import glob, json, sys
outdir = sys.argv[1]
names = {}
for f in glob.glob(outdir + "/gc/gc-*.jsonl"):
    for line in open(f):
        d = json.loads(line)
        if "threads" in d:
            names.update(d["threads"])


def group(tid: str) -> str:
    n = names.get(tid, tid)
    if n.startswith("uvloop") or n.startswith("asyncio"):
        return "to_thread workers"
    return n


samples = {}
for line in open(outdir + "/threads.jsonl"):
    d = json.loads(line)
    samples.setdefault(d["label"], []).append(d)
bounds = {}
for name in ("idle", "load"):
    for line in open(f"{outdir}/{name}.jsonl"):
        d = json.loads(line)
        bounds[name] = (d["t0"], d["t1"])
for label, rows in samples.items():
    for name, (t0, t1) in bounds.items():
        inside = [r for r in rows if t0 - 0.5 <= r["t"] <= t1 + 0.5]
        per_s = []
        for a, b in zip(inside, inside[1:]):
            by = {}
            for tid, ns in b["threads"].items():
                g = group(tid)
                by[g] = by.get(g, 0) + (ns - a["threads"].get(tid, ns)) / 1e6
            per_s.append((round(b["t"] - t0), by))
        total = {}
        for _, by in per_s:
            for g, v in by.items():
                total[g] = total.get(g, 0) + v
        print(f"{label} {name}: {len(per_s)} s, by thread group (ms):",
              {g: round(v) for g, v in sorted(total.items(), key=lambda kv: -kv[1]) if v >= 1})
        for g in ("to_thread workers", "MainThread", "zk-metadata-0"):
            vals = [by.get(g, 0) for _, by in per_s] or [0]
            big = [(t, round(by.get(g, 0))) for t, by in per_s if by.get(g, 0) > 10]
            print(f"  {g}: max {max(vals):.1f} ms in one second; seconds over 10 ms: {len(big)} {big}")
