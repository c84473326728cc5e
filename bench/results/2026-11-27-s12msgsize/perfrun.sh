#!/usr/bin/env bash
# bench/run scale with SCALE_CPU_DETAIL=1 (bench/lib/cpuwin.py per window), and perf record (cpu-clock, call graphs,
# CLOCK_MONOTONIC timestamps: the windows' start_monotonic) on every broker of the run, from start to end.
#   usage: perfrun.sh NAME ROUNDS   (env: SYSTEMS AXES SIZES ... as for scale.sh)
set -u
cd "$(dirname "$0")/../../.."
name=$1; rounds=$2
dir=bench/results/2026-11-27-s12msgsize
export BENCH_DIR=/tmp/ms-bench SCALE_CPU_DETAIL=1 RESULTS=$dir OUT=$dir/$name.jsonl
bench/run scale "$rounds" > "$dir/$name.log" 2>&1 &
runpid=$!
pids=""
for _ in $(seq 600); do  # the brokers of this run: their log.dirs are under $BENCH_DIR
  pids=$(pgrep -f "log.dirs=/tmp/ms-bench/scale\..*/(kafka|kbus)" | paste -sd, -)
  n=$(echo "$pids" | tr ',' '\n' | grep -c .)
  [ "$n" -ge "$(echo $SYSTEMS | wc -w)" ] && break
  sleep 0.5
done
ps -o pid,args -p "$pids" | cut -c1-200 > "$dir/$name.pids"
perf record -k CLOCK_MONOTONIC -e cpu-clock -F 999 -g -p "$pids" -o "/tmp/ms-$name.perf" > "$dir/$name.perf.log" 2>&1 &
perfpid=$!
wait $runpid; echo "scale rc=$?"
kill -INT $perfpid; wait $perfpid
