#!/usr/bin/env bash
# Instructions per consumer Fetch request (bench/scenarios/fetch_handler_cost.py: decode, handler over real logs,
# response framed and spliced; no socket) for two kbus source trees, counted by callgrind over the N measured
# requests only (deterministic, unlike CPU time on a shared machine).
#   usage: bench/scenarios/fetch_handler_cost.sh TREE_A TREE_B [N]   e.g. bench/scenarios/fetch_handler_cost.sh /work/wt/base-now . 20
#   env:   SHAPES="full1000 onerec regions100" (onerec runs 50 x N requests)
set -euo pipefail
cd "$(dirname "$0")/../.."
PY="$PWD/.venv/bin/python"
export PYTHONHASHSEED=0  # the same dict layouts in every run
n=${3:-20}
out=$(mktemp -d)
source bench/lib/callgrind.sh
callgrind_shim "$out"
count() {  # count TREE SHAPE N -> instructions of the N requests
  rm -f "$out"/cg*
  CALLGRIND_SHIM="$out/shim.so" valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out/cg" \
    "$PY" bench/scenarios/fetch_handler_cost.py "$1" "$2" "$3" >/dev/null 2>"$out/err" || { cat "$out/err" >&2; exit 1; }
  cat "$out"/cg* | awk '/^(summary|totals):/ {s += $2} END {print s}'
}
for shape in ${SHAPES:-full1000 onerec regions100}; do
  reqs=$n; [ "$shape" != onerec ] || reqs=$((n * 50))
  for tree in "$1" "$2" "$1" "$2"; do  # twice each: the spread between equal runs is the noise
    total=$(count "$tree" "$shape" "$reqs")
    echo "$shape $(realpath "$tree") $((total / reqs)) instructions per request (N=$reqs)"
  done
done
rm -rf "$out"
