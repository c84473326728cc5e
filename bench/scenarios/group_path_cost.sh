#!/usr/bin/env bash
# Instructions per one-record OffsetCommit v8 and Heartbeat v4 (bench/scenarios/group_path.py: the frame read by the
# connection, the handler over a real standalone Broker's group coordinator and __consumer_offsets log, the response
# encoded; no socket) for two kbus source trees, each run with its own .venv, counted by callgrind over N requests of
# each API only (deterministic, unlike CPU time on a shared machine).
#   usage: bench/scenarios/group_path_cost.sh TREE_A TREE_B [N]   e.g. bench/scenarios/group_path_cost.sh /work/wt/pre . 2000
set -euo pipefail
# KEEP=PREFIX keeps each callgrind file (PREFIX.<tree>.<case>) for callgrind_annotate (bench/lib/callgrind.sh)
cd "$(dirname "$0")/../.."
export PYTHONHASHSEED=0  # the same dict layouts in every run
source bench/lib/callgrind.sh
# one dump per case, in group_path.py's order
callgrind_per_request "$PWD/bench/scenarios/group_path.py" GROUP_PATH_COUNT "${3:-2000}" "offsetcommit heartbeat" "$1" "$2"
