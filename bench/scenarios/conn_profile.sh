#!/usr/bin/env bash
# Where a broker's CPU goes during scale.py's connections point (one Produce of 10 x 100 B in flight on each of C
# connections): ZooKeeper and one broker (SYSTEMS=kbus by default; kbus-base with KBUS_BASE=DIR, or a floor*), a
# warm-up point, then a profiled point of REQUESTS requests: py-spy record --native (the broker's threads, on-CPU
# samples only) into $OUT_DIR/pyspy-$LABEL.raw, and with PERF=1 also perf record -e cpu-clock -g (flat and per-DSO
# reports $OUT_DIR/perf-$LABEL-{self,dso}.txt). The profiled point's scale.jsonl line goes to
# $OUT_DIR/conn_profile.jsonl (the profiler's own cost is in its CPU figure: read it for shares, not for cost).
#   usage: bench/scenarios/conn_profile.sh CONNECTIONS [LABEL]
#   env:   REQUESTS (default 60000), SYSTEMS (one system), OUT_DIR (default $RESULTS), PYSPY (py-spy binary)
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/lib/lib.sh
c=$1; who=${SYSTEMS:-kbus}; label=${2:-$who-c$c}
OUT_DIR=${OUT_DIR:-$RESULTS}
PYSPY=${PYSPY:-$(command -v py-spy || echo /work/main/.venv/bin/py-spy)}
mkdir -p "$OUT_DIR"
ulimit -Hn 262144 2>/dev/null || true
ulimit -n "$(ulimit -Hn)"
bench_start conn_profile
SYSTEMS=$who start_systems
b="127.0.0.1:${port[$who]}"; bpid=${pid[$who]}
if [[ $who != floor* ]]; then
  $PY - "$b" <<'PY'
import sys
from confluent_kafka.admin import AdminClient, NewTopic
admin = AdminClient({"bootstrap.servers": sys.argv[1]})
admin.create_topics([NewTopic("scale-conn", 10, 1)], operation_timeout=60)["scale-conn"].result(120)
PY
fi
point() { $PY bench/scenarios/scale.py connections --connections "$c" --topic scale-conn -b "$b" --broker-pid "$bpid" "$@"; }
point --label warm --requests 20000 --idle-seconds 1 >/dev/null
"$PYSPY" record --native -r 200 -f raw -o "$OUT_DIR/pyspy-$label.raw" -p "$bpid" >"$work/pyspy.log" 2>&1 &
spy=$!
if [ -n "${PERF:-}" ]; then
  perf record -e cpu-clock -g -o "$work/perf.data" -p "$bpid" >"$work/perf.log" 2>&1 &
  perf_pid=$!
fi
sleep 1
point --label "$label" --requests "${REQUESTS:-60000}" --idle-seconds 1 --out "$OUT_DIR/conn_profile.jsonl"
kill -INT "$spy"; wait "$spy" || true
if [ -n "${PERF:-}" ]; then
  kill -INT "$perf_pid"; wait "$perf_pid" || true
  perf report -i "$work/perf.data" --no-children --sort dso,sym --stdio -g none 2>/dev/null \
    | sed -n 1,150p >"$OUT_DIR/perf-$label-self.txt" || true
  perf report -i "$work/perf.data" --no-children --sort dso --stdio -g none 2>/dev/null \
    | sed -n 1,40p >"$OUT_DIR/perf-$label-dso.txt" || true
fi
gzip -f "$OUT_DIR/pyspy-$label.raw"
