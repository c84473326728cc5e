#!/usr/bin/env bash
# reconcile_cost.sh ROUNDS PASSES: one ZooKeeper; per round, kbus (this worktree) then kbus-pre ($KBUS_PRE), order
# alternating, each in its own chroot (a fresh one per round) -> $OUT_DIR/reconcile_cost.jsonl
set -euo pipefail
cd "$(dirname "$0")/../../../.."
here=$PWD
. bench/lib/lib.sh
OUT_DIR=${OUT_DIR:?}; mkdir -p "$OUT_DIR"
script=$here/bench/results/2026-11-27-s17-zk/scripts/reconcile_cost.py
bench_start reconcile_cost
zkport=$(free_port); start_zk "$zkport"
for r in $(seq "${1:-2}"); do
  order="kbus kbus-pre"; [ $((r % 2)) = 0 ] && order="kbus-pre kbus"
  for who in $order; do
    tree=$here; [ "$who" = kbus-pre ] && tree=${KBUS_PRE:?}
    (cd "$tree" && .venv/bin/python "$script" "127.0.0.1:$zkport" "rc-$who-$r" "$who" "${2:-12}" \
      "$OUT_DIR/reconcile_cost.jsonl")
  done
done
