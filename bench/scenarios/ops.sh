#!/usr/bin/env bash
# Start-up with 1,000 partitions, recovery after kill -9 with >= 1 GB of log, leader failover after kill -9
# and SIGTERM: Apache Kafka and kbus interleaved (bench/scenarios/ops.py says how each is timed). JSON lines in $OUT
# (default $RESULTS/ops.jsonl); summary: bench/summarize_ops.py.
#   usage: bench/scenarios/ops.sh [ROUNDS] [ops.py args, e.g. startup recovery failover --recovery-mb 1100]
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/lib/lib.sh
rounds=${1:-3}; shift || true
OUT=${OUT:-$RESULTS/ops.jsonl}
bench_start ops
KAFKA_LIBS=$(kafka_libs); export KAFKA_LIBS KAFKA_HEAP_OPTS
KAFKA_JVM_OPTS="${KAFKA_JVM_OPTS[*]}"; export KAFKA_JVM_OPTS
zkport=$(free_port); start_zk "$zkport"
$PY bench/scenarios/ops.py --zk "127.0.0.1:$zkport" --work "$work" --rounds "$rounds" --out "$OUT" "$@" &
pids+=($!); wait $!
$PY bench/scenarios/summarize_ops.py "$OUT"
