#!/usr/bin/env bash
# Side by side, in the same run and interleaved round by round: Apache Kafka (ZooKeeper mode), kbus and Tansu
# (a Rust Kafka-compatible broker, in-memory storage), measured with bench/lib/kbench.py (confluent-kafka).
# Kafka and kbus share one Debian ZooKeeper (chroots /kafka and /kbus), config/server.properties, the log disk
# (a scratch directory under $BENCH_DIR, default .cache/bench) and the machine's Java. Each result is one JSON
# line in $OUT (default $RESULTS/results.jsonl); a markdown report with ratios to Kafka goes to .cache/bench/last-report.md.
#   usage: bench/scenarios/run.sh [ROUNDS] [extra kbench args, e.g. -p 3 -s 1000 --acks 1]
# Env: SYSTEMS (default "kafka kbus tansu"; also kbus-copy: kbus with KBUS_SENDFILE=0, kbus-base: the kbus of
# the checkout in KBUS_BASE), OUT, KAFKA_VERSION (3.9.2), TAG (added to every label).
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/lib/lib.sh
rounds=${1:-3}; shift || true
OUT=${OUT:-$RESULTS/results.jsonl}
SYSTEMS=${SYSTEMS:-kafka kbus tansu}
bench_start run

start_systems
# one unrecorded warm-up each (Kafka's JIT, page cache), so round 1 is not a cold start
for who in $SYSTEMS; do
  $PY "$KBENCH" produce -b 127.0.0.1:"${port[$who]}" -n 300000 --quiet --delete "$@" >/dev/null 2>&1 || true
done
for r in $(seq "$rounds"); do
  for who in $SYSTEMS; do
    echo "== round $r: $who $*" >&2
    $PY "$KBENCH" all -b 127.0.0.1:"${port[$who]}" --broker-pid "${pid[$who]}" --label "$who${TAG:-}" \
      --out "$OUT" --quiet --delete "$@" >/dev/null || echo "   ($who run reported invalid: see $OUT)" >&2
  done
done
$PY "$KBENCH" report "$OUT" --baseline "kafka${TAG:-}" | tee "${BENCH_DIR:-.cache/bench}/last-report.md"
