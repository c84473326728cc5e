#!/usr/bin/env bash
# Broker CPU per replicated message (RF=3, acks=all, 1 partition, 100 B) for two kbus source trees side by side:
# one ZooKeeper, a 3-broker cluster per tree (chroots /a and /b), rounds interleaved a, b, a, b, ...
#   usage: bench/scenarios/replication_cost.sh TREE_A LABEL_A TREE_B LABEL_B [ROUNDS] [MESSAGES]
# e.g. bench/scenarios/replication_cost.sh /work/wt-base before . after 5 200000   (results: $RESULTS/replication_cost.jsonl)
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/lib/lib.sh
PY="$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")"  # absolute, still the venv's
tree_a=$(realpath "$1"); label_a=$2; tree_b=$(realpath "$3"); label_b=$4; rounds=${5:-5}; n=${6:-200000}
bench_start repl
zkport=$(free_port); start_zk "$zkport"
declare -A boot bpids
for side in a b; do
  tree_var=tree_$side; tree=${!tree_var}
  for id in 1 2 3; do
    port=$(free_port)
    # python -m from the tree's directory runs that tree's kbus
    (cd "$tree" && exec "$PY" -m kbus.server config/server.properties --override broker.id=$id \
      --override listeners=PLAINTEXT://127.0.0.1:"$port" --override log.dirs="$work/$side$id" \
      --override zookeeper.connect="127.0.0.1:$zkport/$side" --override offsets.topic.replication.factor=3 \
      >"$work/$side$id.log" 2>&1) &
    pids+=("$!"); bpids[$side]="${bpids[$side]:-}${bpids[$side]:+,}$!"
    boot[$side]="${boot[$side]:-}${boot[$side]:+,}127.0.0.1:$port"
    wait_port "$port"
  done
done
sleep 3
for side in a b; do  # one unrecorded warm-up each
  $PY bench/scenarios/replication_cost.py -b "${boot[$side]}" --pids "${bpids[$side]}" --label warmup --topic warm -n 50000 \
    --out /dev/null >/dev/null
done
for r in $(seq "$rounds"); do
  for side in a b; do
    label_var=label_$side
    $PY bench/scenarios/replication_cost.py -b "${boot[$side]}" --pids "${bpids[$side]}" --label "${!label_var}" \
      --topic "rf3-$r-$RANDOM" -n "$n"
  done
done
