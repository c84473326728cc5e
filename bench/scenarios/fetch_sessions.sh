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
zkport=$(free_port); start_zk "$zkport"
declare -A port pid
for who in $SYSTEMS; do
  port[$who]=$(free_port)
  case $who in
    kafka) start_kafka kafka "${port[$who]}" "127.0.0.1:$zkport/kafka"; pid[$who]=$kafka_pid ;;
    kbus) start_kbus kbus "${port[$who]}" "127.0.0.1:$zkport/kbus"; pid[$who]=$kbus_pid ;;
  esac
done
for who in $SYSTEMS; do wait_port "${port[$who]}"; done
for r in $(seq "$rounds"); do
  for who in $SYSTEMS; do
    echo "== round $r: $who" >&2
    $PY bench/scenarios/fetch_sessions.py -b 127.0.0.1:"${port[$who]}" --broker-pid "${pid[$who]}" --label "$who" \
      --out "$OUT" "$@" || echo "   ($who run failed)" >&2
  done
done
$PY bench/scenarios/summarize_fetch_sessions.py "$OUT"
