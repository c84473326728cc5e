#!/usr/bin/env bash
# Replicated kbus: ZooKeeper + 3 brokers on loopback, a topic with replication factor 3 (min.insync.replicas=2),
# measured with kbench (acks=all). Results append to bench/results.jsonl under the label kbus-3x-rf3;
# broker CPU is that of the partition leader's process.
#   usage: bench/cluster.sh [ROUNDS] [extra kbench args]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}; shift || true
KBENCH=${KBENCH:-../shared/bench/kbench.py}
OUT=${OUT:-bench/results.jsonl}
PY=.venv/bin/python
work=$(mktemp -d); echo "work dir: $work" >&2
zkport=12181
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; [ -n "${KEEP_WORK:-}" ] || rm -rf "$work"; }
trap cleanup EXIT

printf 'dataDir=%s/zk\nclientPort=%d\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n' "$work" $zkport \
  >"$work/zookeeper.properties"
.venv/bin/kbus zookeeper-start "$work/zookeeper.properties" >"$work/zk.log" 2>&1 &
pids+=($!)
for _ in $(seq 200); do (exec 3<>/dev/tcp/127.0.0.1/$zkport) 2>/dev/null && break; sleep 0.1; done
bootstrap=""
for id in 1 2 3; do
  port=$((19200 + id))
  $PY -m kbus.server config/server.properties --override broker.id=$id \
    --override listeners=PLAINTEXT://127.0.0.1:$port --override log.dirs="$work/b$id" \
    --override zookeeper.connect=127.0.0.1:$zkport --override offsets.topic.replication.factor=3 \
    --override default.replication.factor=3 --override min.insync.replicas=2 \
    >"$work/b$id.log" 2>&1 &
  pids+=($!)
  eval "pid_$id=$!"
  bootstrap="$bootstrap${bootstrap:+,}127.0.0.1:$port"
done
for id in 1 2 3; do
  for _ in $(seq 200); do (exec 3<>/dev/tcp/127.0.0.1/$((19200 + id))) 2>/dev/null && break; sleep 0.1; done
done
for r in $(seq "$rounds"); do
  topic="rf3-$r-$RANDOM"
  .venv/bin/kbus topics --bootstrap-server "$bootstrap" --create --topic "$topic" --partitions 1 \
    --replication-factor 3 --config min.insync.replicas=2 >/dev/null
  leader=$(.venv/bin/kbus topics --bootstrap-server "$bootstrap" --describe --topic "$topic" |
    sed -n 's/.*Leader: \([0-9]*\).*/\1/p' | head -1)
  leader_pid_var="pid_$leader"
  echo "== round $r: kbus 3 brokers, RF=3, leader $leader" >&2
  $PY "$KBENCH" all -b "$bootstrap" --topic "$topic" --broker-pid "${!leader_pid_var}" --label kbus-3x-rf3 --replication-factor 3 \
    --out "$OUT" --quiet "$@" >/dev/null || echo "   (run reported invalid: see $OUT)" >&2
done
$PY "$KBENCH" report "$OUT" --baseline tansu
