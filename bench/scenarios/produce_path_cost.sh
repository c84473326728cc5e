#!/usr/bin/env bash
# Instructions per Produce request (bench/scenarios/produce_path_cost.py: header, decode, handler over a standalone
# Broker's log, response; no socket) for two kbus source trees, each run with its own .venv, counted by callgrind
# over N requests of each case only (deterministic, unlike CPU time on a shared machine): onerec-v9 (one 100 B
# record, acks=-1, v9: small_requests.py's), conn-v8 (10 x 100 B, acks=1, v8: scale.py's connections point), conn-v9.
#   usage: bench/scenarios/produce_path_cost.sh TREE_A TREE_B [N]   e.g. bench/scenarios/produce_path_cost.sh /work/wt/pre . 2000
# KEEP=PREFIX keeps each callgrind file (PREFIX.<tree>.<case>) for callgrind_annotate.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PYTHONHASHSEED=0  # the same dict layouts in every run
n=${3:-2000}
script="$PWD/bench/scenarios/produce_path_cost.py"
out=$(mktemp -d)
cat >"$out/shim.c" <<'C'
#include <valgrind/callgrind.h>
void cg_on(void) { CALLGRIND_ZERO_STATS; CALLGRIND_START_INSTRUMENTATION; }
void cg_off(void) { CALLGRIND_STOP_INSTRUMENTATION; CALLGRIND_DUMP_STATS; }
C
cc -shared -fPIC -O1 -o "$out/shim.so" "$out/shim.c"
for tree in "$1" "$2" "$1" "$2"; do  # twice each: the spread between equal runs is the noise
  tree=$(realpath "$tree")
  rm -f "$out"/cg*
  (cd "$tree" && CALLGRIND_SHIM="$out/shim.so" PRODUCE_COST_COUNT="$n" valgrind --tool=callgrind --instr-atstart=no \
    --callgrind-out-file="$out/cg" "$tree/.venv/bin/python" "$script" >/dev/null 2>"$out/err") \
    || { cat "$out/err" >&2; exit 1; }
  i=0
  for case in onerec-v9 conn-v8 conn-v9; do  # one dump per case, in produce_path_cost.py's order
    i=$((i + 1))
    f=$(ls "$out"/cg.* 2>/dev/null | sort -t. -k2 -n | sed -n "${i}p")
    total=$(awk '/^(summary|totals):/ {s += $2} END {print s}' "$f")
    echo "$case $tree $((total / n)) instructions per request (N=$n)"
    [ -z "${KEEP:-}" ] || cp "$f" "$KEEP.$(basename "$tree").$case"
  done
done
rm -rf "$out"
