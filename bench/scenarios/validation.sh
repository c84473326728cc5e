#!/usr/bin/env bash
# Produce validation cost: kbus before (a git worktree of the commit before validation, with its own venv) and kbus
# now, side by side, interleaved, same config, standalone (no ZooKeeper), 1 partition, acks=all.
#   usage: bench/scenarios/validation.sh BEFORE_TREE [ROUNDS] [extra kbench args, e.g. --compression lz4]
#   BEFORE_TREE: e.g. `git worktree add ../kbus-before e39440b && (cd ../kbus-before && python3 -m venv .venv &&
#                .venv/bin/pip install -e .)`
# BEFORE_LABEL names the first tree (default "before"; "novalidation" for a tree of this commit with the
# validate_produce call taken out, which isolates validation from everything else that changed since).
# Results append to $RESULTS/validation.jsonl (OUT=...) and a report with ratios against the first tree is printed.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=bench/lib/lib.sh
source bench/lib/lib.sh
before=$(cd "$1" && pwd); shift
rounds=${1:-5}; shift || true
OUT=${OUT:-$RESULTS/validation.jsonl}
blabel=${BEFORE_LABEL:-before}
work=$(mktemp -d "${TMPDIR:-/tmp}/kbus-validation.XXXXXX")
mkdir -p "$(dirname "$OUT")"
trap bench_cleanup EXIT

start() {  # start NAME TREE PORT -> sets pid
  (cd "$2" && exec .venv/bin/python -m kbus.server config/server.properties \
    --override listeners=PLAINTEXT://127.0.0.1:"$3" --override log.dirs="$work/$1" --override zookeeper.connect= \
    >"$work/$1.log" 2>&1) &
  pid=$!; pids+=("$pid")
}
bport=$(free_port); nport=$(free_port)
start before "$before" "$bport"; before_pid=$pid
start now "$PWD" "$nport"; now_pid=$pid
wait_port "$bport"; wait_port "$nport"
echo "before: $(git -C "$before" log -1 --format='%h %s' | cut -c1-80)" >&2
echo "now:    $(git log -1 --format='%h %s' | cut -c1-80)" >&2
for r in $(seq "$rounds"); do
  for who in "$blabel" now; do
    if [ "$who" = now ]; then port=$nport; p=$now_pid; else port=$bport; p=$before_pid; fi
    echo "== round $r: $who" >&2
    $PY "$KBENCH" produce -b 127.0.0.1:"$port" --broker-pid "$p" --label "$who" --out "$OUT" --delete --quiet "$@" \
      >/dev/null || echo "   ($who run reported invalid: see $OUT)" >&2
  done
done
$PY "$KBENCH" report "$OUT" --baseline "$blabel"
