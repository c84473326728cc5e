#!/usr/bin/env bash
# Instructions per one-record OffsetCommit v8 and Heartbeat v4 (bench/scenarios/group_path.py: the frame read by the
# connection, the handler over a real standalone Broker's group coordinator and __consumer_offsets log, the response
# encoded; no socket) for two kbus source trees, each run with its own .venv, counted by callgrind over N requests of
# each API only (deterministic, unlike CPU time on a shared machine).
#   usage: bench/scenarios/group_path_cost.sh TREE_A TREE_B [N]   e.g. bench/scenarios/group_path_cost.sh /work/wt/pre . 2000
set -euo pipefail
cd "$(dirname "$0")/../.."
export PYTHONHASHSEED=0  # the same dict layouts in every run
n=${3:-2000}
script="$PWD/bench/scenarios/group_path.py"
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
  (cd "$tree" && CALLGRIND_SHIM="$out/shim.so" GROUP_PATH_COUNT="$n" valgrind --tool=callgrind --instr-atstart=no \
    --callgrind-out-file="$out/cg" "$tree/.venv/bin/python" "$script" >/dev/null 2>"$out/err") \
    || { cat "$out/err" >&2; exit 1; }
  # one dump per API, in group_path.py's order (offsetcommit v8, heartbeat v4); the first file is the start-up's
  i=0
  for api in offsetcommit heartbeat; do
    i=$((i + 1))
    f=$(ls "$out"/cg.* 2>/dev/null | sort -t. -k2 -n | sed -n "${i}p")
    total=$(awk '/^(summary|totals):/ {s += $2} END {print s}' "$f")
    echo "$api $tree $((total / n)) instructions per request (N=$n)"
    [ -z "${KEEP:-}" ] || cp "$f" "$KEEP.$(basename "$tree").$api"
  done
done
rm -rf "$out"
