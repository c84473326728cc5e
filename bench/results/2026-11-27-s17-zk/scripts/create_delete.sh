#!/usr/bin/env bash
# create_delete.sh ROUNDS: kbus (this worktree) and kbus-pre ($KBUS_PRE) started together on one ZooKeeper; each
# round creates and deletes a 10,000-partition topic on each, alternating which goes first. OUT_DIR (jsonl, names)
set -euo pipefail
cd "$(dirname "$0")/../../../.."
. bench/lib/lib.sh
OUT_DIR=${OUT_DIR:?}; mkdir -p "$OUT_DIR"
N=${N:-10000}
bench_start create_delete
SYSTEMS=${SYSTEMS:-kbus kbus-pre}
start_systems
sleep 3
for r in $(seq "${1:-2}"); do
  order=$SYSTEMS; [ $((r % 2)) = 0 ] && order=$(echo $SYSTEMS | tr " " "\n" | tac | tr "\n" " ")
  for who in $order; do
    $PY bench/results/2026-11-27-s17-zk/scripts/create_delete.py "127.0.0.1:${port[$who]}" "${pid[$who]}" \
      "$work/$who" "$N" "$who" "$OUT_DIR/create_delete.jsonl"
  done
done
for who in $SYSTEMS; do
  /work/main/.venv/bin/py-spy dump -p "${pid[$who]}" 2>/dev/null | grep '^Thread' > "$OUT_DIR/threads-$who.names" || true
done
