#!/usr/bin/env bash
# create_threads.sh WHO LABEL: per-thread broker CPU over the creation of a 10,000-partition topic
set -euo pipefail
cd /work/main
. bench/lib/lib.sh
who=$1; label=$2; OUT_DIR=/tmp/s16-createprof; mkdir -p $OUT_DIR
bench_start create_threads
SYSTEMS=$who start_systems
b="127.0.0.1:${port[$who]}"; bpid=${pid[$who]}
sleep 2
snap() { for t in /proc/$bpid/task/*; do echo "$(basename $t) $(cut -d' ' -f14,15 $t/stat 2>/dev/null)"; done; }
snap > $OUT_DIR/threads-$label.before
$PY bench/scenarios/scale.py partitions --phase create --partitions 10000 -b "$b" --broker-pid "$bpid" --label "$label" --out "$OUT_DIR/create_threads.jsonl"
snap > $OUT_DIR/threads-$label.after
.venv/bin/py-spy dump -p "$bpid" 2>/dev/null | grep '^Thread' > $OUT_DIR/threads-$label.names || true
