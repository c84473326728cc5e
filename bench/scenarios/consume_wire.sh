#!/usr/bin/env bash
# The partitions axis's consume cell on the wire (bench/scenarios/consume_wire.py): fresh brokers, one topic of
# $PARTITIONS partitions each, scale.py's produce of $MESSAGES x $SIZE B, then the log's shape and one raw Fetch
# (one line per system, round 0), then ROUNDS consumes with librdkafka's statistics and the client's CPU by thread
# ($PROCS > 0: also that many consumer processes at once), the systems in turn within each round (Kafka first in
# one round, last in the next). JSON lines in $OUT (default $RESULTS/consume_wire.jsonl).
#   usage: bench/scenarios/consume_wire.sh [ROUNDS, default 3]
#   env:   SYSTEMS="kafka kbus" PARTITIONS=1000 MESSAGES=1000000 SIZE=100 PROCS=0
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
wire() {  # wire SYSTEM ARGS...
  $PY bench/scenarios/consume_wire.py -b 127.0.0.1:"${port[$1]}" --broker-pid "${pid[$1]}" --label "$1" \
    --topic "wire-p$PARTITIONS" --partitions "$PARTITIONS" --log-dir "$work/$1" --messages "${MESSAGES:-1000000}" \
    --size "${SIZE:-100}" --procs "${PROCS:-0}" --out "$OUT" "${@:2}"
}
for who in $SYSTEMS; do
  echo "== $(date +%T) $who: produce" >&2
  wire "$who" --produce --rounds 0 --batch-records "${BATCH_RECORDS:-0}"
done
order=($SYSTEMS)
for r in $(seq "${1:-${ROUNDS:-3}}"); do
  for who in "${order[@]}"; do
    echo "== $(date +%T) $who: round $r" >&2
    wire "$who" --rounds 1 --round "$r"
  done
  order=($(printf '%s\n' "${order[@]}" | tac))
done
