#!/usr/bin/env bash
# Session 14's Fetch-path measurements (bench/notes/fetch-2026-11-27-s14.md), in the order they ran. kbus = this
# branch (compiled), kbus-base = /work/wt/base-now (5630180, compiled). Every command is echoed to commands.txt.
#   usage: bench/results/2026-11-27-s14-fetch/run.sh STEP...   (steps: packets wire100 wire10b wire1 small strace)
set -euo pipefail
cd "$(dirname "$0")/../../.."
R=bench/results/2026-11-27-s14-fetch
export BENCH_DIR=${BENCH_DIR:-/tmp/h4-bench} KBUS_BASE=${KBUS_BASE:-/work/wt/base-now} RESULTS=$R
mkdir -p "$BENCH_DIR"
run() { echo "$(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg): $*" | tee -a $R/commands.txt; "$@"; }
for step in "$@"; do
  case $step in
    packets)
      run .venv/bin/python $R/packets.py --regions 1 --region-bytes 900000 --requests 1500 --rounds 5 --out $R/packets.jsonl
      run .venv/bin/python $R/packets.py --regions 100 --region-bytes 40000 --requests 200 --rounds 5 --out $R/packets.jsonl ;;
    wire100)
      run env SYSTEMS="kafka kbus kbus-base" PARTITIONS=100 MESSAGES=1000000 OUT=$R/wire_p100.jsonl bench/run consume-wire 5 ;;
    wire10b)
      run env SYSTEMS="kafka kbus kbus-base" PARTITIONS=1 MESSAGES=300000 SIZE=10 OUT=$R/wire_s10.jsonl bench/run consume-wire 5 ;;
    wire1)
      run env SYSTEMS="kbus kbus-base" PARTITIONS=1 MESSAGES=1000000 OUT=$R/wire_p1.jsonl bench/run consume-wire 5 ;;
    small)
      run env SYSTEMS="kafka kbus kbus-base" APIS=fetch OUT=$R/small_requests.jsonl bench/run small-requests 3 ;;
    strace)
      for who in kbus kbus-base; do
        run env SYSTEMS=$who OUTDIR="$BENCH_DIR/strace-$who" bench/results/2026-11-27-s13-consume/prof_consume.sh
        cp "$BENCH_DIR/strace-$who/strace.txt" $R/strace-$who-p1.txt
        cp "$BENCH_DIR/strace-$who/wire.jsonl" $R/strace-$who-p1-wire.jsonl
      done ;;
    *) echo "unknown step $step" >&2; exit 2 ;;
  esac
done
