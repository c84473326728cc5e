#!/usr/bin/env bash
# perf profile of kbus's broker under one small_requests.py shape: ZooKeeper and one kbus (KBUS_SRC=DIR: another
# checkout's), a warm-up run, then `perf record -e cpu-clock -g` of the broker for a second run; the report's
# flat (--no-children) and per-DSO views go to $OUT_DIR/perf-$LABEL-{self,dso}.txt.
#   usage: bench/scenarios/perf_shape.sh LABEL [small_requests.py args]
#   e.g.   bench/scenarios/perf_shape.sh c100w1 --connections 100 --window 1 --records 10 --acks 1 --produce-version 8
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/lib/lib.sh
label=$1; shift
OUT_DIR=${OUT_DIR:-$RESULTS}
mkdir -p "$OUT_DIR"
bench_start perf
SYSTEMS=kbus start_systems
b="127.0.0.1:${port[kbus]}"; bpid=${pid[kbus]}
$PY bench/scenarios/small_requests.py -b "$b" --broker-pid "$bpid" --label warm --api produce --requests 10000 "$@"
perf record -e cpu-clock ${PERF_CALLGRAPH:--g} -o "$work/perf.data" -p "$bpid" 2>/dev/null &
perf_pid=$!
sleep 1
$PY bench/scenarios/small_requests.py -b "$b" --broker-pid "$bpid" --label "$label" --api produce \
  --out "$OUT_DIR/perf-$label-run.jsonl" "$@"
kill -INT "$perf_pid"; wait "$perf_pid" || true
perf report -i "$work/perf.data" --no-children --sort dso,sym --stdio -g none 2>/dev/null \
  | sed -n 1,150p >"$OUT_DIR/perf-$label-self.txt" || true
perf report -i "$work/perf.data" --no-children --sort dso --stdio -g none 2>/dev/null \
  | sed -n 1,40p >"$OUT_DIR/perf-$label-dso.txt" || true
cp "$work/perf.data" "${PERF_DATA:-/tmp/perf-$label.data}"  # large: kept out of the results
