#!/usr/bin/env bash
# Reading a log of one-record batches (what producers with linger.ms=0 leave behind): each broker of $SYSTEMS gets
# a fresh 1-partition topic filled with N (default 200,000) records of S bytes as N one-record batches (librdkafka,
# linger.ms=0, batch.num.messages=1, acks=1), then a librdkafka consumer reads the whole topic from the beginning,
# interleaved round by round, the order rotated each round (so that no system always reads first or after the same
# one). Each consume is one JSON line in $OUT (default $RESULTS/onerec_consume.jsonl, label = system): consumer
# msgs_per_s, broker_cpu_us_per_msg (the broker's utime+stime while the consumer read) and client_runqueue_wait_s
# (how long the consumer's threads waited for a CPU: on a loaded machine, most of the elapsed time).
#   usage: bench/scenarios/onerec_consume.sh [ROUNDS] [N] [S]
# Env: SYSTEMS (default "kafka kbus"; kbus-base = the kbus of the checkout in KBUS_BASE), OUT, TAG.
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/lib/lib.sh
rounds=${1:-3}; n=${2:-200000}; size=${3:-100}
OUT=${OUT:-$RESULTS/onerec_consume.jsonl}
SYSTEMS=${SYSTEMS:-kafka kbus}
bench_start onerec
start_systems
topic=onerec-$RANDOM
for who in $SYSTEMS; do
  echo "== producing $n one-record batches into $who" >&2
  $PY "$KBENCH" produce -b 127.0.0.1:"${port[$who]}" -t "$topic" -n "$n" -s "$size" --acks 1 --linger-ms 0 \
    --pconf batch.num.messages=1 --quiet >/dev/null
  echo "   $who log: $(du -sk "$work/$who"/"$topic"-0 | cut -f1) KB for $n records" >&2
done
# one unrecorded read each (page cache, Kafka's JIT)
for who in $SYSTEMS; do
  $PY "$KBENCH" consume -b 127.0.0.1:"${port[$who]}" -t "$topic" --expect "$n" --quiet >/dev/null || true
done
read -ra order <<<"$SYSTEMS"
for r in $(seq "$rounds"); do
  for i in "${!order[@]}"; do
    who=${order[$(( (i + r - 1) % ${#order[@]} ))]}
    echo "== round $r: $who" >&2
    $PY "$KBENCH" consume -b 127.0.0.1:"${port[$who]}" -t "$topic" --expect "$n" --broker-pid "${pid[$who]}" \
      --label "$who${TAG:-}" --out "$OUT" --quiet >/dev/null || echo "   ($who run reported invalid: see $OUT)" >&2
  done
done
$PY bench/scenarios/summarize_onerec.py "$OUT" --topic "$topic"
