#!/usr/bin/env bash
# run E: the fix (controller gate + fast path + mzxid peek + peek requests made once) beside kbus-base (5630180); GC probe (thread names) and a
# per-thread CPU sampler over the whole run
cd /work/wt/h4-spikes
export GCPROBE_DIR=/tmp/h4/gcE BENCH_DIR=/tmp/h4/bench SYSTEMS="kbus kbus-base" KBUS_BASE=/work/wt/base-now \
  AXES="partitions msgsize" PARTITIONS="10000" PHASES=create SIZES="10 100 1000 100000" MSGSIZE_BYTES=200000000 \
  SCALE_CPU_DETAIL=1 OUT=/tmp/h4/E/scale.jsonl
.venv/bin/python /tmp/h4/sampler.py /tmp/h4/E/threads.jsonl &
sp=$!
bench/scenarios/scale.sh 3 > /tmp/h4/E/run.log 2>&1
echo "rc=$?" >> /tmp/h4/E/run.log
kill $sp
