#!/usr/bin/env bash
# py-spy --native on one kbus broker while prof_drive.py repeats the partitions axis's Fetch cells (full Fetch of
# N partitions at their high watermarks; consume of the same-log topic), then while small_requests.py sends one-record
# Fetches. Raw py-spy stacks into $OUTDIR/<system>-<load>.raw.
#   SYSTEMS=kbus|kbus-base|kbus-nolat OUTDIR=... bench/results/2026-11-27-s15-fetch/prof.sh
set -euo pipefail
cd "$(dirname "$0")/../../.."
. bench/lib/lib.sh
SYSTEMS=${SYSTEMS:-kbus}
OUTDIR=${OUTDIR:-/tmp/h3-prof}
SECONDS_EACH=${SECONDS_EACH:-25}
SPY=${SPY:-/work/main/.venv/bin/py-spy}
mkdir -p "$OUTDIR"
bench_start prof
start_systems
who=${SYSTEMS%% *}
b=127.0.0.1:${port[$who]}
drive() { $PY bench/results/2026-11-27-s15-fetch/prof_drive.py "$@" -b "$b" --broker-pid "${pid[$who]}" \
  --partitions "${PARTITIONS:-1000}"; }
drive setup
for load in ${LOADS:-full consume onerec}; do
  $SPY record -r 250 -f raw --native -o "$OUTDIR/$who-$load.raw" -p "${pid[$who]}" -d "$SECONDS_EACH" \
    >/dev/null 2>&1 &
  spy=$!
  case $load in
    onerec) timeout "$SECONDS_EACH" $PY bench/scenarios/small_requests.py -b "$b" --broker-pid "${pid[$who]}" \
      --label "$who" --api fetch --requests 10000000 --out "$OUTDIR/onerec.jsonl" || true ;;
    *) drive "$load" --seconds "$SECONDS_EACH" ;;
  esac
  wait $spy || true
done
