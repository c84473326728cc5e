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
  case $who in
    kafka) start_kafka kafka "${port[$who]}" "127.0.0.1:$zkport/kafka"; pid[$who]=$kafka_pid ;;
    kbus) start_kbus kbus "${port[$who]}" "127.0.0.1:$zkport/kbus" --override metrics.port="${mport[$who]}"
      pid[$who]=$kbus_pid ;;
    # the kbus of another checkout (KBUS_BASE, e.g. a worktree of main before a change): before/after, same run
    kbus-base) KBUS_SRC=${KBUS_BASE:?KBUS_BASE=checkout} start_kbus kbus-base "${port[$who]}" \
      "127.0.0.1:$zkport/kbus-base" --override metrics.port="${mport[$who]}"; pid[$who]=$kbus_pid ;;
    # kbus without incremental fetch sessions (for measuring KIP-227)
    kbus-nosession) start_kbus kbus-nosession "${port[$who]}" "127.0.0.1:$zkport/kbus-nosession" \
      --override max.incremental.fetch.session.cache.slots=0 --override metrics.port="${mport[$who]}"
      pid[$who]=$kbus_pid ;;
    tansu) start_tansu "${port[$who]}"; pid[$who]=$tansu_pid ;;
  esac
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
