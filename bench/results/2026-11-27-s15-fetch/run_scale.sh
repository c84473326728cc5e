#!/usr/bin/env bash
# The partitions axis's Fetch cells at 1,000 partitions, three builds in one run, while the worktree itself was being
# rebuilt after the rebase: kbus-nolat = this branch's code (7c44f47, compiled, copied to /tmp/h3-r2), kbus-pre =
# a98f586 (/tmp/h3-pre), kbus-base = 5630180 (/work/wt/base-now).
set -euo pipefail
cd "$(dirname "$0")/../../.."
KBUS_NOLAT=/tmp/h3-r2 KBUS_PRE=/tmp/h3-pre KBUS_BASE=/work/wt/base-now SYSTEMS="kbus-nolat kbus-pre kbus-base" \
  AXES=partitions PARTITIONS=1000 SAME_LOG_BATCH=100 PARTITION_MESSAGES=1000000 SCALE_CPU_DETAIL=1 \
  OUT=bench/results/2026-11-27-s15-fetch/scale_p1000.jsonl bench/scenarios/scale.sh "${1:-1}"
