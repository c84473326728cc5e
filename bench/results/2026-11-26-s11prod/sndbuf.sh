#!/usr/bin/env bash
# session 11 (bench/notes/produce1p-2026-11-26-s11.md): kbus with socket.send.buffer.bytes 102400 (default) vs -1 (OS autotuning): 10 KB consume, alternating
set -euo pipefail
source bench/lib/lib.sh
bench_start sndbuf1p
zkport=$(free_port); start_zk "$zkport"
p1=$(free_port); start_system kbus kbus-def "$p1" def; pid1=$last_pid
p2=$(free_port); start_system kbus kbus-auto "$p2" auto --override socket.send.buffer.bytes=-1; pid2=$last_pid
wait_port $p1; wait_port $p2
for r in 1 2 3 4 5 6; do
  for w in def auto; do
    if [ $w = def ]; then port=$p1; pid=$pid1; else port=$p2; pid=$pid2; fi
    echo "round $r $w: $(PROFILER=${PROFILER:-none} $PY bench/results/2026-11-26-s11prod/perfconsume.py 127.0.0.1:$port $pid 10000 20000 /tmp/prod1p/sb-$w-$r.strace 2>&1 | grep -v '^produce' | tr '\n' ' ')"
  done
done
