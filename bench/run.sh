#!/usr/bin/env bash
# Side-by-side benchmark: kbus and Tansu (a Rust Kafka-compatible broker) in the same run, interleaved, with
# ../shared/bench/kbench.py (confluent-kafka). Results append to bench/results.jsonl; a markdown report with
# ratios against Tansu is printed and written to bench/last-report.md.
#   usage: bench/run.sh [ROUNDS] [extra kbench args, e.g. -p 3]
# Env: KBENCH (path to kbench.py), TANSU (path to tansu.sh), OUT (jsonl file).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}; shift || true
KBENCH=${KBENCH:-../shared/bench/kbench.py}
TANSU=${TANSU:-../shared/bench/tansu.sh}
OUT=${OUT:-bench/results.jsonl}
PY=.venv/bin/python
work=$(mktemp -d)
tport=19192; kport=19193

tansu_pid=$("$TANSU" $tport)
$PY -m kbus.server config/server.properties --override listeners=PLAINTEXT://127.0.0.1:$kport \
  --override log.dirs="$work/kbus" --override zookeeper.connect= >"$work/kbus.log" 2>&1 &
kbus_pid=$!
trap 'kill $tansu_pid $kbus_pid 2>/dev/null; wait $kbus_pid 2>/dev/null; rm -rf "$work"' EXIT
for port in $tport $kport; do
  for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
done
for r in $(seq "$rounds"); do
  for who in tansu kbus; do
    if [ $who = tansu ]; then port=$tport; pid=$tansu_pid; else port=$kport; pid=$kbus_pid; fi
    echo "== round $r: $who" >&2
    $PY "$KBENCH" all -b 127.0.0.1:$port --broker-pid "$pid" --label "$who" --out "$OUT" --quiet "$@" >/dev/null || \
      echo "   ($who run reported invalid: see $OUT)" >&2
  done
done
$PY "$KBENCH" report "$OUT" --baseline tansu | tee bench/last-report.md
