#!/usr/bin/env bash
# run D: the fix (controller gate + fast path + mzxid peek) beside kbus-base (5630180); GC probe (thread names) and a
# per-thread CPU sampler over the whole run
cd /work/wt/h4-spikes
export GCPROBE_DIR=/tmp/h4/gcD BENCH_DIR=/tmp/h4/bench SYSTEMS="kbus kbus-base" KBUS_BASE=/work/wt/base-now \
  AXES="partitions msgsize" PARTITIONS="10000" PHASES=create SIZES="10 100 1000 100000" MSGSIZE_BYTES=200000000 \
  SCALE_CPU_DETAIL=1 OUT=/tmp/h4/D/scale.jsonl
.venv/bin/python /tmp/h4/sampler.py /tmp/h4/D/threads.jsonl &
sp=$!
bench/scenarios/scale.sh 3 > /tmp/h4/D/run.log 2>&1
echo "rc=$?" >> /tmp/h4/D/run.log
kill $sp
