#!/usr/bin/env bash
# run B: the fix (kbus = worktree: zk_view controller gate + mzxid peek) beside kbus-base (5630180), GC probe on both
cd /work/wt/h4-spikes
export GCPROBE_DIR=/tmp/h4/gcB BENCH_DIR=/tmp/h4/bench SYSTEMS="kbus kbus-base" KBUS_BASE=/work/wt/base-now \
  AXES="partitions msgsize" PARTITIONS="10000" PHASES=create SIZES="10 100 1000 100000" MSGSIZE_BYTES=200000000 \
  SCALE_CPU_DETAIL=1 OUT=/tmp/h4/B/scale.jsonl
bench/scenarios/scale.sh 3 > /tmp/h4/B/run.log 2>&1
echo "rc=$?" >> /tmp/h4/B/run.log
