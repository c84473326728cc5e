#!/usr/bin/env bash
# Kafka's own load generators (kafka-producer-perf-test / kafka-consumer-perf-test, the Java client) against
# Apache Kafka and kbus, started side by side as in bench/scenarios/run.sh and measured interleaved round by round.
# One JSON line per run in $OUT (default $RESULTS/perftest.jsonl); summary: bench/summarize_perftest.py.
#   usage: bench/scenarios/perftest.sh [ROUNDS] [perftest.py args, e.g. -p 3 -s 1000 --acks 1]
# Env: SYSTEMS (default "kafka kbus"; also kbus-nosession, kbus-base: the kbus of the checkout in KBUS_BASE), OUT.
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/lib/lib.sh
rounds=${1:-3}; shift || true
OUT=${OUT:-$RESULTS/perftest.jsonl}
SYSTEMS=${SYSTEMS:-kafka kbus}
bench_start perf
libs=$(kafka_libs)
zkport=$(free_port); start_zk "$zkport"
declare -A port pid mport
for who in $SYSTEMS; do
  port[$who]=$(free_port); mport[$who]=0
  case $who in kbus*) mport[$who]=$(free_port) ;; esac  # kbus's /metrics: Fetch requests served
  over=(); [ "${mport[$who]}" = 0 ] || over=(--override metrics.port="${mport[$who]}")
  start_system "$who" "$who" "${port[$who]}" "$who" "${over[@]}"; pid[$who]=$last_pid
done
for who in $SYSTEMS; do wait_port "${port[$who]}"; done
for who in $SYSTEMS; do  # unrecorded warm-up (Kafka's JIT); WARMUP=0 skips it
  [ "${WARMUP:-1}" = 0 ] || $PY bench/scenarios/perftest.py -b 127.0.0.1:"${port[$who]}" --broker-pid "${pid[$who]}" --libs "$libs" -n 300000 \
    "$@" >/dev/null 2>&1 || true
done
for r in $(seq "$rounds"); do
  for who in $SYSTEMS; do
    echo "== round $r: $who (Kafka's perf tools) $*" >&2
    $PY bench/scenarios/perftest.py -b 127.0.0.1:"${port[$who]}" --broker-pid "${pid[$who]}" --libs "$libs" \
      --metrics-port "${mport[$who]}" --label "$who${TAG:-}" --out "$OUT" "$@" >/dev/null || echo "   ($who run failed: see $OUT)" >&2
  done
done
$PY bench/scenarios/summarize_perftest.py "$OUT"
