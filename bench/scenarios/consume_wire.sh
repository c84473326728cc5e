#!/usr/bin/env bash
# The partitions axis's consume cell on the wire (bench/scenarios/consume_wire.py): fresh brokers, one topic of
# $PARTITIONS partitions each, scale.py's produce of $MESSAGES x 100 B, then the log's shape, one raw Fetch and
# ROUNDS consumes with librdkafka's statistics and the client's CPU by thread ($PROCS > 0: also that many consumer
# processes at once). JSON lines in $OUT (default $RESULTS/consume_wire.jsonl).
#   usage: bench/scenarios/consume_wire.sh [ROUNDS, default 3]
#   env:   SYSTEMS="kafka kbus" PARTITIONS=1000 MESSAGES=1000000 PROCS=0
#          BATCH_RECORDS=N: the same log for every broker (batches of exactly N records, consume_wire.py's
#          --batch-records) instead of librdkafka's producer, whose batches depend on the broker's speed
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/lib/lib.sh
OUT=${OUT:-$RESULTS/consume_wire.jsonl}
SYSTEMS=${SYSTEMS:-kafka kbus${KBUS_BASE:+ kbus-base}}
PARTITIONS=${PARTITIONS:-1000}
ulimit -n "$(ulimit -Hn)"
bench_start consume_wire
start_systems
for who in $SYSTEMS; do
  echo "== $(date +%T) $who" >&2
  $PY bench/scenarios/consume_wire.py -b 127.0.0.1:"${port[$who]}" --broker-pid "${pid[$who]}" --label "$who" \
    --topic "wire-p$PARTITIONS" --partitions "$PARTITIONS" --log-dir "$work/$who" --messages "${MESSAGES:-1000000}" \
    --produce --rounds "${1:-${ROUNDS:-3}}" --procs "${PROCS:-0}" --batch-records "${BATCH_RECORDS:-0}" --out "$OUT"
done
