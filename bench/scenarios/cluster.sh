#!/usr/bin/env bash
# Replicated: one Debian ZooKeeper, 3 Apache Kafka brokers (chroot /kafka) and 3 kbus brokers (chroot /kbus) on
# loopback, same server.properties keys; each round creates a RF=3 topic (min.insync.replicas=2) on each cluster
# and runs bench/lib/kbench.py with acks=all, Kafka then kbus. Labels kafka-3x-rf3 and kbus-3x-rf3 in $OUT; broker
# CPU is the partition leader's process (it also serves both followers' fetches), cluster CPU all three brokers'.
#   usage: bench/scenarios/cluster.sh [ROUNDS] [extra kbench args]
# Env: SYSTEMS (default "kafka kbus"; kbus-base: the kbus of the checkout in KBUS_BASE), OUT.
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/lib/lib.sh
rounds=${1:-3}; shift || true
OUT=${OUT:-$RESULTS/results.jsonl}
SYSTEMS=${SYSTEMS:-kafka kbus}
bench_start cluster
zkport=$(free_port); start_zk "$zkport"
declare -A boot bpid
for who in $SYSTEMS; do
  for id in 1 2 3; do
    port=$(free_port)
    over=(--override broker.id=$id --override offsets.topic.replication.factor=3
      --override default.replication.factor=3 --override min.insync.replicas=2)
    if [ "$who" = kafka ]; then
      start_kafka "kafka$id" "$port" "127.0.0.1:$zkport/kafka" "${over[@]}"; bpid[$who$id]=$kafka_pid
    else
      src=.; [ "$who" != kbus-base ] || src=${KBUS_BASE:?KBUS_BASE=checkout}
      KBUS_SRC=$src start_kbus "$who$id" "$port" "127.0.0.1:$zkport/$who" "${over[@]}"; bpid[$who$id]=$kbus_pid
    fi
    boot[$who]="${boot[$who]:-}${boot[$who]:+,}127.0.0.1:$port"
    wait_port "$port"
  done
done
sleep 3  # every broker registered and seen by the others
for who in $SYSTEMS; do  # one unrecorded warm-up each (Kafka's JIT)
  $PY bench/lib/topic.py create -b "${boot[$who]}" --topic warmup --replication-factor 3 >/dev/null
  $PY "$KBENCH" produce -b "${boot[$who]}" --topic warmup -n 300000 --quiet >/dev/null 2>&1 || true
done
for r in $(seq "$rounds"); do
  for who in $SYSTEMS; do
    topic="rf3-$r-$RANDOM"
    leader=$($PY bench/lib/topic.py create -b "${boot[$who]}" --topic "$topic" --partitions 1 --replication-factor 3 \
      --config min.insync.replicas=2)
    # the latency phase's topic ($topic-lat) led by the same broker, whose CPU kbench counts
    others=$(printf '%s\n' 1 2 3 | grep -vx "$leader" | paste -sd,)
    $PY bench/lib/topic.py create -b "${boot[$who]}" --topic "$topic-lat" --replica-assignment "$leader,$others" \
      --config min.insync.replicas=2 >/dev/null
    echo "== round $r: $who, 3 brokers, RF=3, leader $leader" >&2
    $PY "$KBENCH" all -b "${boot[$who]}" --topic "$topic" --broker-pid "${bpid[$who$leader]}" \
      --cluster-pids "${bpid[${who}1]},${bpid[${who}2]},${bpid[${who}3]}" \
      --label "$who-3x-rf3" --replication-factor 3 --out "$OUT" --quiet --delete "$@" >/dev/null ||
      echo "   (run reported invalid: see $OUT)" >&2
  done
done
$PY bench/scenarios/summarize.py "$OUT" --since "$(date -u +%Y-%m-%d)"
