#!/usr/bin/env bash
# run A: before the fix (kbus = a98f586's compiled modules, kbus-base = 5630180), GC probe on both, py-spy on kbus
# during the msgsize axis
cd /work/wt/h4-spikes
export GCPROBE_DIR=/tmp/h4/gcA BENCH_DIR=/tmp/h4/bench SYSTEMS="kbus kbus-base" KBUS_BASE=/work/wt/base-now \
  AXES="partitions msgsize" PARTITIONS="10000" PHASES=create SIZES="10 100 1000 100000" MSGSIZE_BYTES=200000000 \
  SCALE_CPU_DETAIL=1 OUT=/tmp/h4/A/scale.jsonl
bench/scenarios/scale.sh 3 > /tmp/h4/A/run.log 2>&1 &
runpid=$!
# py-spy on kbus once the msgsize axis starts
for i in $(seq 600); do
  p=$(pgrep -f "scale.py msgsize.*--label kbus " | head -1)
  [ -n "$p" ] && break; sleep 1
done
bp=$(ps -o args= -p "$p" | sed -E 's/.*--broker-pid ([0-9]+).*/\1/')
echo "kbus broker pid $bp" >> /tmp/h4/A/run.log
/work/main/.venv/bin/py-spy record -t -r 100 -f raw -d 90 --nonblocking -o /tmp/h4/A/spy-kbus.txt -p "$bp" > /tmp/h4/A/spy.log 2>&1
wait $runpid
echo "rc=$?" >> /tmp/h4/A/run.log
