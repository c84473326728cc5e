#!/usr/bin/env bash
# kbus against itself at other commits, in one run, interleaved round by round (a refactor must not cost
# throughput, CPU or latency). Each other commit is a git work tree with its own .venv
# (`git worktree add DIR COMMIT && (cd DIR && scripts/setup.sh)`); each broker runs from its own tree with that
# tree's config/server.properties, all on one ZooKeeper (chroot per broker) and the same log disk, measured by this
# tree's bench/lib/kbench.py. Results: one JSON line per run in $OUT (default $RESULTS/results.jsonl), report on stdout.
#   usage: bench/scenarios/compare.sh ROUNDS NAME=DIR [NAME=DIR ...] [-- kbench args]   (NAME=. is this tree)
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/lib/lib.sh
rounds=$1; shift
declare -a names=(); declare -A dir
while [ $# -gt 0 ] && [ "$1" != "--" ]; do names+=("${1%%=*}"); dir[${1%%=*}]=$(cd "${1#*=}" && pwd); shift; done
[ "${1:-}" = "--" ] && shift
OUT=${OUT:-$RESULTS/results.jsonl}
bench_start compare

zkport=$(free_port); start_zk "$zkport"
declare -A port pid
for who in "${names[@]}"; do
  port[$who]=$(free_port)
  (cd "${dir[$who]}" && exec .venv/bin/python -m kbus.server config/server.properties \
    --override listeners=PLAINTEXT://127.0.0.1:"${port[$who]}" --override log.dirs="$work/$who" \
    --override zookeeper.connect="127.0.0.1:$zkport/$who") >"$work/$who.log" 2>&1 &
  pid[$who]=$!; pids+=("${pid[$who]}")
done
for who in "${names[@]}"; do wait_port "${port[$who]}"; done
for who in "${names[@]}"; do  # one unrecorded warm-up each (page cache), so round 1 is not a cold start
  $PY "$KBENCH" produce -b 127.0.0.1:"${port[$who]}" -n 300000 --quiet --delete "$@" >/dev/null 2>&1 || true
done
for r in $(seq "$rounds"); do
  for who in "${names[@]}"; do
    echo "== round $r: $who $*" >&2
    $PY "$KBENCH" all -b 127.0.0.1:"${port[$who]}" --broker-pid "${pid[$who]}" --label "$who" \
      --out "$OUT" --quiet --delete "$@" >/dev/null || echo "   ($who run reported invalid: see $OUT)" >&2
  done
done
$PY "$KBENCH" report "$OUT" --baseline "${names[0]}"
