#!/usr/bin/env bash
# Instructions per partition of the replication fetch path (bench/scenarios/fetch_path_cost.py) for two kbus source trees,
# counted by callgrind (deterministic, unlike CPU time on a shared machine): (N calls - set-up alone) / N.
#   usage: bench/scenarios/fetch_path_cost.sh TREE_A TREE_B [N]     e.g. bench/scenarios/fetch_path_cost.sh /work/wt-base . 1000
set -euo pipefail
cd "$(dirname "$0")/../.."
PY="$PWD/.venv/bin/python"
export PYTHONHASHSEED=0  # the same dict layouts in every run
n=${3:-1000}
out=$(mktemp -d)
count() {  # count TREE PHASE N RUN -> instructions
  valgrind --tool=callgrind --callgrind-out-file="$out/cg" "$PY" bench/scenarios/fetch_path_cost.py "$1" "$2" "$3" "$4" \
    >/dev/null 2>&1
  awk '/^summary:/ {print $2}' "$out/cg"
}
for phase in ${PHASES:-leader follower}; do
  for tree in "$1" "$2" "$1" "$2"; do  # twice each: the spread between equal runs is the noise
    full=$(count "$tree" "$phase" "$n" 1); base=$(count "$tree" "$phase" "$n" 0)
    echo "$phase $(realpath "$tree") $(( (full - base) / n )) instructions per partition (N=$n)"
  done
done
rm -rf "$out"
