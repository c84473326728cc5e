#!/usr/bin/env bash
# Transactions side by side: Apache Kafka 3.9 (ZooKeeper mode) and kbus, same server.properties, interleaved
# rounds, bench/scenarios/txn.py on each (idempotent vs transactional produce, read_uncommitted vs read_committed consume).
#   usage: bench/scenarios/txn.sh [ROUNDS] [txn.py args, e.g. -n 1000000 --commit-ms 100]
# Results: one JSON line per figure in $OUT (default $RESULTS/txn-results.jsonl).
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/lib/lib.sh
rounds=${1:-3}; shift || true
OUT=${OUT:-$RESULTS/txn-results.jsonl}
bench_start txn
zkport=$(free_port); start_zk "$zkport"
kport=$(free_port); start_kafka kafka "$kport" "127.0.0.1:$zkport/kafka"
bport=$(free_port); start_kbus kbus "$bport" "127.0.0.1:$zkport/kbus"
wait_port "$kport"; wait_port "$bport"
for r in $(seq "$rounds"); do
  for who in kafka kbus; do
    p=$kport; [ $who = kbus ] && p=$bport
    echo "== round $r: $who" >&2
    $PY bench/scenarios/txn.py 127.0.0.1:"$p" "$who" "$OUT" "$@"
  done
done
