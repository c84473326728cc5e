#!/usr/bin/env bash
# Instructions per Produce request (bench/scenarios/produce_path_cost.py: header, decode, handler over a standalone
# Broker's log, response; no socket) for two kbus source trees, each run with its own .venv, counted by callgrind
# over N requests of each case only (deterministic, unlike CPU time on a shared machine): onerec-v9 (one 100 B
# record, acks=-1, v9: small_requests.py's), conn-v8 (10 x 100 B, acks=1, v8: scale.py's connections point), conn-v9.
#   usage: bench/scenarios/produce_path_cost.sh TREE_A TREE_B [N]   e.g. bench/scenarios/produce_path_cost.sh /work/wt/pre . 2000
set -euo pipefail
# KEEP=PREFIX keeps each callgrind file (PREFIX.<tree>.<case>) for callgrind_annotate (bench/lib/callgrind.sh)
cd "$(dirname "$0")/../.."
export PYTHONHASHSEED=0  # the same dict layouts in every run
source bench/lib/callgrind.sh
# one dump per case, in produce_path_cost.py's order
callgrind_per_request "$PWD/bench/scenarios/produce_path_cost.py" PRODUCE_COST_COUNT "${3:-2000}" "onerec-v9 conn-v8 conn-v9" "$1" "$2"
