#!/usr/bin/env bash
# A tracer attached to a kbus broker while consume_wire.py (scale.py's consume()) reads 1,000,000 x 100 B from one
# partition, 3 rounds: strace -c by default; the native profile was
#   BENCH_DIR=/tmp/x OUTDIR=/tmp/x/spy TRACER='.venv/bin/py-spy record -r 1000 -f raw --native -o /tmp/x/spy/spy.raw -d 30' \
#     bench/results/2026-11-27-s13-consume/prof_consume.sh
set -euo pipefail
cd "$(dirname "$0")/../../.."
. bench/lib/lib.sh
SYSTEMS=${SYSTEMS:-kbus}
OUTDIR=${OUTDIR:-/tmp/consume-prof}
mkdir -p "$OUTDIR"
bench_start prof
start_systems
who=${SYSTEMS%% *}
wire() { $PY bench/scenarios/consume_wire.py -b 127.0.0.1:"${port[$who]}" --broker-pid "${pid[$who]}" --label "$who" \
    --topic wire-p1 --partitions 1 --log-dir "$work/$who" --messages "${MESSAGES:-1000000}" --size "${SIZE:-100}" \
    --out "$OUTDIR/wire.jsonl" "$@"; }
wire --produce --rounds 0
${TRACER:-strace -c -f -o $OUTDIR/strace.txt} -p "${pid[$who]}" &
perfpid=$!
sleep 1
wire --rounds 3
sleep 1; kill -INT $perfpid; wait $perfpid || true
