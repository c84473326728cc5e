#!/usr/bin/env bash
# End-to-end latency only (kbench's latency phase: 10,000 msg/s for 10 s, 100 B, acks=all), single broker and
# 3 brokers RF=3 (min.insync.replicas=2), with the client's default linger.ms (5) and with linger.ms=0, every
# system in the same run: Apache Kafka, kbus, and (with KBUS_BASE=DIR) the kbus of another checkout as
# kbus-base (and with KBUS_NOLAT=DIR a third checkout as kbus-nolat). Everything starts once; each round runs every (topology, linger, system) in turn, so the machine's
# load falls on all of them alike. Each topic is created first and its partition leader's process is the one
# whose CPU is counted. Results: $OUT (default $RESULTS/latency.jsonl), summary: bench/latsummary.py.
#   usage: bench/scenarios/latency.sh [ROUNDS] [extra kbench args]
# Env: SYSTEMS (default "kafka kbus", plus kbus-base with KBUS_BASE), TOPOLOGIES (default "single rf3"),
#      LINGERS (default "5 0"), OUT, BASE_LABEL (kbus-base's label, e.g. kbus-base-nolat).
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/lib/lib.sh
rounds=${1:-3}; shift || true
OUT=${OUT:-$RESULTS/latency.jsonl}
SYSTEMS=${SYSTEMS:-kafka kbus${KBUS_BASE:+ kbus-base}}
TOPOLOGIES=${TOPOLOGIES:-single rf3}
LINGERS=${LINGERS:-5 0}
bench_start latency
zkport=$(free_port); start_zk "$zkport"
declare -A boot bpid
for who in $SYSTEMS; do
  for topo in $TOPOLOGIES; do
    if [ "$topo" = single ]; then
      port=$(free_port); start_system "$who" "$who" "$port" "$who"
      boot[$who/single]=127.0.0.1:$port; bpid[$who/single/1]=$last_pid; bpid[$who/single/0]=$last_pid
      wait_port "$port"
    else
      for id in 1 2 3; do
        port=$(free_port)
        start_system "$who" "$who-rf3-$id" "$port" "$who-rf3" --override broker.id=$id \
          --override offsets.topic.replication.factor=3 --override default.replication.factor=3 \
          --override min.insync.replicas=2
        boot[$who/rf3]="${boot[$who/rf3]:-}${boot[$who/rf3]:+,}127.0.0.1:$port"; bpid[$who/rf3/$id]=$last_pid
        wait_port "$port"
      done
    fi
  done
done
sleep 3  # every broker registered and seen by the others
for who in $SYSTEMS; do  # one unrecorded warm-up each (Kafka's JIT, page cache)
  for topo in $TOPOLOGIES; do
    rf=1; [ "$topo" = single ] || rf=3
    $PY bench/lib/topic.py create -b "${boot[$who/$topo]}" --topic warmup --replication-factor $rf >/dev/null || true
    $PY "$KBENCH" produce -b "${boot[$who/$topo]}" --topic warmup -n 200000 --quiet >/dev/null 2>&1 || true
  done
done
for r in $(seq "$rounds"); do
  for topo in $TOPOLOGIES; do
    for linger in $LINGERS; do
      for who in $SYSTEMS; do
        name=$who; [ "$who" != kbus-base ] || name=${BASE_LABEL:-kbus-base}
        rf=1 label=$name; [ "$topo" = single ] || { rf=3; label=$name-3x-rf3; }
        topic="lat-$r-$RANDOM"
        leader=$($PY bench/lib/topic.py create -b "${boot[$who/$topo]}" --topic "$topic-lat" --replication-factor $rf \
          --config min.insync.replicas=$((rf > 1 ? 2 : 1)))
        [ "$topo" = single ] && leader=1
        echo "== round $r: $label linger.ms=$linger (leader $leader) load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
        $PY "$KBENCH" all --skip produce,consume -b "${boot[$who/$topo]}" --topic "$topic" \
          --broker-pid "${bpid[$who/$topo/$leader]}" --label "$label" --replication-factor $rf \
          --lat-linger-ms "$linger" --out "$OUT" --quiet --delete "$@" >/dev/null ||
          echo "   (run reported invalid: see $OUT)" >&2
      done
    done
  done
done
$PY bench/scenarios/latsummary.py "$OUT" --since "$(date -u +%Y-%m-%d)"
