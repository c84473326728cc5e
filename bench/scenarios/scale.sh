#!/usr/bin/env bash
# Scale curves, Apache Kafka and kbus side by side (bench/scenarios/scale.py says what each point measures): partition count
# (first, on fresh brokers; its topics stay, 1 + 10 + ... + 10,000 partitions in all), connections, message size.
# Points alternate between the brokers (Kafka first on one point, kbus first on the next). JSON lines in $OUT
# (default $RESULTS/scale.jsonl), then the charts scale_*.png beside it and the tables.
#   usage: bench/scenarios/scale.sh [ROUNDS]
#   env:   AXES="partitions connections msgsize"  PARTITIONS="1 10 100 1000 10000"
#          CONNECTIONS="10 100 1000 5000"  SIZES="10 100 1000 10000 100000"  SYSTEMS="kafka kbus"
#          MSGSIZE_BYTES=N: bytes produced per message-size point (scale.py's --bytes, default 30 MB; more bytes,
#          less of the CPU clock's 10 ms tick in each figure)
#          PHASES="create load" (partitions axis: "create" alone times only the topic creations)
#          PARTITION_MESSAGES=N: 100 B messages produced and consumed per partitions-axis load point (scale.py's
#          --messages, default 100,000: ~20 ms of kbus CPU at 1 partition, where identical builds differ by +-30%
#          from round to round; bench/notes/produce1p-2026-11-26-s11.md)
#          SCALE_CPU_DETAIL=1: each produce / consume window's line also says where the broker's CPU went (per-thread
#          CPU, user / system, faults, the machine's CPU and vmstat: bench/lib/cpuwin.py), for every system alike
#          SAME_LOG_BATCH=N (default 100; 0: not): every consume cell is followed by a consume of the same log for
#          every broker, a topic written once with batches of exactly N records (scale.py's --same-log-batch; up to
#          SAME_LOG_MAX_PARTITIONS=1000 partitions); each consume cell records the records per batch it read
#          (--log-dir: the broker's own log files)
#          KBUS_BASE=DIR: also kbus-base, the kbus of another checkout (an older commit: before/after, same run)
#          SYSTEMS may name floor, floor-log, floor-at-once, floor-writer (bench/lib/floor_server.py: the connections
#          axis's measured floor, no broker: it runs the connections points only, so `bench/run shapes` may name it)
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/lib/lib.sh
rounds=${1:-1}
OUT=${OUT:-$RESULTS/scale.jsonl}
SYSTEMS=${SYSTEMS:-kafka kbus${KBUS_BASE:+ kbus-base}}
AXES=${AXES:-partitions connections msgsize}
PARTITIONS=${PARTITIONS:-1 10 100 1000 10000}
CONNECTIONS=${CONNECTIONS:-10 100 1000 5000}
SIZES=${SIZES:-10 100 1000 10000 100000}
PHASES=${PHASES:-create load}
$PY -c 'import matplotlib' 2>/dev/null || $PY -m pip install -q "matplotlib>=3.8"  # the charts (pyproject's [bench] extra; not -e .[bench]: that rebuilds the compiled modules)
# 5,000 connections and 11,111 partitions' files, for the brokers and the client: a broker that keeps a segment's
# log and index files open needs ~2-3 descriptors a partition, past a 20,000 hard limit with 5,000 connections
# (kbus at 63bbad5 failed its log dir on EMFILE there). Raised where we may (root), else the hard limit.
ulimit -Hn 262144 2>/dev/null || true
ulimit -n "$(ulimit -Hn)"
since=$(date +%Y-%m-%dT%H:%M:%S)
bench_start scale
start_systems
for who in $SYSTEMS; do  # the topic the connection points produce to
  [[ $who != floor* ]] || continue  # the floor (bench/lib/floor_server.py) answers every request as a Produce
  $PY - "127.0.0.1:${port[$who]}" <<'PY'
import sys
from confluent_kafka.admin import AdminClient, NewTopic
admin = AdminClient({"bootstrap.servers": sys.argv[1]})  # kept: a dropped client cancels the request
admin.create_topics([NewTopic("scale-conn", 10, 1)], operation_timeout=60)["scale-conn"].result(120)
PY
done
same=(--same-log-batch "${SAME_LOG_BATCH:-100}" --same-log-max-partitions "${SAME_LOG_MAX_PARTITIONS:-1000}")
flip=0
point() {  # point AXIS-ARGS...: every system once, the order alternating from one point to the next
  local order=($SYSTEMS)
  if [ $flip = 1 ]; then order=($(printf '%s\n' "${order[@]}" | tac)); fi
  flip=$((1 - flip))
  for who in "${order[@]}"; do
    [[ $who != floor* || $1 = connections ]] || continue  # the floor measures the connections axis only
    echo "== $(date +%T) $who: $*" >&2
    $PY bench/scenarios/scale.py "$@" -b 127.0.0.1:"${port[$who]}" --broker-pid "${pid[$who]}" --label "$who" \
      --log-dir "$work/$who" --out "$OUT" ||
      echo "   ($who: $* failed)" >&2
  done
}
for r in $(seq "$rounds"); do
  for axis in $AXES; do
    case $axis in
      connections) for c in $CONNECTIONS; do point connections --connections "$c" --topic scale-conn; done ;;
      msgsize)
        for s in $SIZES; do point msgsize --size "$s" ${MSGSIZE_BYTES:+--bytes "$MSGSIZE_BYTES"} "${same[@]}"; done ;;
      partitions)  # every topic first (memory per partition before traffic grows the heaps), then the requests
        if [[ " $PHASES " = *" create "* ]] && [ "$r" = 1 ]; then
          for n in $PARTITIONS; do point partitions --phase create --partitions "$n"; done
        fi
        if [[ " $PHASES " = *" load "* ]]; then
          for n in $PARTITIONS; do
            point partitions --phase load --partitions "$n" ${PARTITION_MESSAGES:+--messages "$PARTITION_MESSAGES"} \
              "${same[@]}"
          done
        fi ;;
    esac
  done
done
$PY bench/scenarios/scale.py plot --data "$OUT" --outdir "$(dirname "$OUT")" --since "$since"
$PY bench/scenarios/scale.py table --data "$OUT" --since "$since"
