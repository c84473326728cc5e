#!/usr/bin/env bash
# The same-run figures of bench/notes/fetch-2026-11-27-s15.md: kbus = this branch (compiled), kbus-nolat = its start
# a98f586 (the compiled modules of that commit, in /tmp/h3-pre), kbus-base = 5630180 (/work/wt/base-now).
set -euo pipefail
cd "$(dirname "$0")/../../.."
R=bench/results/2026-11-27-s15-fetch
export KBUS_BASE=/work/wt/base-now KBUS_NOLAT=/tmp/h3-pre SYSTEMS="kbus kbus-nolat kbus-base"
for step in "$@"; do  # small, scale (scale was stopped in its first point: see the notes)
  case $step in
    small) APIS=fetch OUT=$R/small_requests.jsonl bench/scenarios/small_requests.sh 3 ;;
    scale) AXES=partitions PARTITIONS='100 1000' SAME_LOG_BATCH=100 PARTITION_MESSAGES=1000000 SCALE_CPU_DETAIL=1 \
             OUT=$R/scale.jsonl bench/scenarios/scale.sh 2 ;;
  esac
done
