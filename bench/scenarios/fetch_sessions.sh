#!/usr/bin/env bash
# Broker CPU per Fetch request with 1,000 partitions, full fetches vs an incremental fetch session (KIP-227):
# Apache Kafka and kbus side by side (bench/scenarios/fetch_sessions.py says how). JSON lines in $OUT
# (default $RESULTS/fetch_sessions.jsonl).
#   usage: bench/scenarios/fetch_sessions.sh [ROUNDS] [fetch_sessions.py args, e.g. --partitions 1000 --requests 300]
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/lib/lib.sh
rounds=${1:-3}; shift || true
OUT=${OUT:-$RESULTS/fetch_sessions.jsonl}
SYSTEMS=${SYSTEMS:-kafka kbus}
bench_start sessions
start_systems
for r in $(seq "$rounds"); do
  for who in $SYSTEMS; do
    echo "== round $r: $who" >&2
    $PY bench/scenarios/fetch_sessions.py -b 127.0.0.1:"${port[$who]}" --broker-pid "${pid[$who]}" --label "$who" \
      --out "$OUT" "$@" || echo "   ($who run failed)" >&2
  done
done
$PY bench/scenarios/summarize_fetch_sessions.py "$OUT"
