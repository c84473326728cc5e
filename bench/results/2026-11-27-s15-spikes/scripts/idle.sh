#!/usr/bin/env bash
# idle CPU with a 10,000-partition topic: kbus (this worktree) beside kbus-base, per-thread (bench/lib/cpuwin.py)
set -euo pipefail
cd /work/wt/h4-spikes
export BENCH_DIR=/tmp/h4/bench GCPROBE_DIR=/tmp/h4/gcC
source bench/lib/lib.sh
bench_start idlecpu
SYSTEMS="kbus kbus-base"
KBUS_BASE=/work/wt/base-now
start_systems
for who in $SYSTEMS; do
  .venv/bin/python - "${port[$who]}" <<'PY'
import sys
from confluent_kafka.admin import AdminClient, NewTopic
a = AdminClient({"bootstrap.servers": f"127.0.0.1:{sys.argv[1]}", "socket.timeout.ms": 300000})
a.create_topics([NewTopic("idle10k", 10000, 1)], operation_timeout=600, request_timeout=600)["idle10k"].result(600)
PY
done
sleep 20
.venv/bin/python - "${pid[kbus]}" "${pid[kbus-base]}" "${IDLE_S:-60}" <<'PY'
import glob, json, sys, time
sys.path.insert(0, "bench/lib")
import cpuwin
pids = {"kbus": int(sys.argv[1]), "kbus-base": int(sys.argv[2])}
a = {k: cpuwin.snapshot(p) for k, p in pids.items()}
time.sleep(float(sys.argv[3]))
b = {k: cpuwin.snapshot(p) for k, p in pids.items()}
names = {}
for f in glob.glob("/tmp/h4/gcC/gc-*.jsonl"):
    for l in open(f):
        d = json.loads(l)
        if "threads" in d:
            names.update(d["threads"])
for k in pids:
    w = cpuwin.window(a[k], b[k])
    thr = {("main" if t == "main" else names.get(t.rsplit("-", 1)[1], t)): v for t, v in w["threads_ms"].items()}
    print(json.dumps({"label": k, "idle_s": float(sys.argv[3]), "cpu_ms": w["cpu_ms"], "threads_ms": thr}))
PY
