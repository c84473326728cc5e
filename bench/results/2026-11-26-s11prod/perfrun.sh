#!/usr/bin/env bash
# perfrun.sh SYSTEM SIZE COUNT PERFOUT [phase]  (from the worktree root)
set -euo pipefail
source bench/lib/lib.sh
bench_start perf1p
SYSTEMS=$1 start_systems
who=$1
$PY bench/results/2026-11-26-s11prod/perfconsume.py 127.0.0.1:${port[$who]} ${pid[$who]} $2 $3 $4 ${5:-consume}
