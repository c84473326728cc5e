#!/usr/bin/env bash
# Per-thread CPU of kbus (this worktree) beside kbus-pre (/work/wt/pre, 1c16b41) in the same run, with 11,111
# partitions (topics of 1, 10, 100, 1,000 and 10,000 partitions: what scale.sh's partitions axis leaves): idle for
# $IDLE_S, then under a light load for $LOAD_S (loadgen.py: 100 B records, acks=1, ~$RATE/s into the 10-partition
# topic, a consumer reading them), both brokers at once; a 1 s per-thread sampler over the whole run (sampler.py),
# thread names from bench/lib/gcprobe.py. Writes $OUTDIR/{idle,load}.jsonl, threads.jsonl, gc/.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
OUTDIR=${OUTDIR:?OUTDIR=dir}
mkdir -p "$OUTDIR/gc"
OUTDIR=$(realpath "$OUTDIR")  # (kbus-pre runs from its own checkout)
export BENCH_DIR=${BENCH_DIR:-/tmp/h2/bench} GCPROBE_DIR=$OUTDIR/gc KBUS_PRE=${KBUS_PRE:-/work/wt/pre}
source bench/lib/lib.sh
bench_start idle11k
SYSTEMS=${SYSTEMS:-"kbus kbus-pre"}
start_systems
S=bench/results/2026-11-27-s16-spikes/scripts
args=(); for who in $SYSTEMS; do args+=("$who=${pid[$who]}"); done
$PY $S/sampler.py "$OUTDIR/threads.jsonl" "${args[@]}" &
sampler=$!; pids+=("$sampler")
for who in $SYSTEMS; do
  $PY - "${port[$who]}" <<'PY'
import sys
from confluent_kafka.admin import AdminClient, NewTopic
a = AdminClient({"bootstrap.servers": f"127.0.0.1:{sys.argv[1]}", "socket.timeout.ms": 300000})
for n in (1, 10, 100, 1000, 10000):
    a.create_topics([NewTopic(f"p{n}", n, 1)], operation_timeout=600, request_timeout=600)[f"p{n}"].result(600)
PY
done
echo "created $(date -u +%T)"
sleep "${SETTLE_S:-30}"
window() {  # window NAME SECONDS [command...]: both brokers' per-thread CPU over SECONDS
  local name=$1 secs=$2; shift 2
  local pargs=(); for who in $SYSTEMS; do pargs+=("$who=${pid[$who]}"); done
  $PY - "$OUTDIR/$name.jsonl" "$name" "$secs" "$GCPROBE_DIR" "${pargs[@]}" <<'PY' &
import glob, json, sys, time
sys.path.insert(0, "bench/lib")
import cpuwin
out, name, secs, gcdir = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
pids = {k: int(v) for k, v in (a.split("=") for a in sys.argv[5:])}
a = {k: cpuwin.snapshot(p) for k, p in pids.items()}
t0 = time.monotonic()
time.sleep(secs)
t1 = time.monotonic()
b = {k: cpuwin.snapshot(p) for k, p in pids.items()}
names = {}
for f in glob.glob(gcdir + "/gc-*.jsonl"):
    for line in open(f):
        d = json.loads(line)
        if "threads" in d:
            names.update(d["threads"])
with open(out, "a") as f:
    for k in pids:
        w = cpuwin.window(a[k], b[k])
        thr = {}
        for t, v in w["threads_ms"].items():
            n = "main" if t == "main" else names.get(t.rsplit("-", 1)[-1], t)
            n = "uvloop (to_thread workers)" if n.startswith("uvloop") else n
            thr[n] = round(thr.get(n, 0) + v, 1)
        line = {"window": name, "label": k, "secs": secs, "t0": t0, "t1": t1, "cpu_ms": w["cpu_ms"],
                "threads_ms": dict(sorted(thr.items(), key=lambda kv: -kv[1]))}
        f.write(json.dumps(line) + "\n")
        print(json.dumps(line))
PY
  local w=$!
  [ $# -eq 0 ] || "$@"
  wait $w
}
window idle "${IDLE_S:-60}"
loaders=()
for who in $SYSTEMS; do
  $PY $S/loadgen.py "${port[$who]}" "$(( ${LOAD_S:-60} + 4 ))" "${RATE:-500}" > "$OUTDIR/loadgen-$who.txt" 2>&1 &
  loaders+=($!)
done
sleep 3
window load "${LOAD_S:-60}"
wait "${loaders[@]}" || true
kill "$sampler" 2>/dev/null || true
