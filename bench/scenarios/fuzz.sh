#!/usr/bin/env bash
# Long fuzz run: a standalone kbus broker (no ZooKeeper) on a free port, FRAMES fuzzed frames (default 100,000),
# then: acknowledged records read back byte for byte, consumers reach the end of every fuzzed partition, the
# broker still serves, its log holds no traceback. Writes $RESULTS/fuzz-result.json; RSS samples are in it.
#   usage: bench/scenarios/fuzz.sh [FRAMES] [SEED] [fuzz.py options, e.g. --all-apis --null-rate 0.3 --mutate-rate 0.5]
# OUT: where the result JSON goes (default $RESULTS/fuzz-result.json)
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=bench/lib/lib.sh
source bench/lib/lib.sh
frames=${1:-100000}; seed=${2:-1}; shift 2 || shift $#
OUT=${OUT:-$RESULTS/fuzz-result.json}
work=$(mktemp -d "${TMPDIR:-/tmp}/kbus-fuzz.XXXXXX")
mkdir -p "$(dirname "$OUT")"
trap bench_cleanup EXIT
port=$(free_port)
$PY -m kbus.server config/server.properties --override listeners=PLAINTEXT://127.0.0.1:"$port" \
  --override log.dirs="$work/data" --override zookeeper.connect= --override group.initial.rebalance.delay.ms=0 \
  >"$work/broker.log" 2>&1 &
broker=$!; pids+=("$broker")
wait_port "$port"
status=0
$PY bench/scenarios/fuzz.py -b 127.0.0.1:"$port" -n "$frames" --seed "$seed" --broker-pid "$broker" \
  --broker-log "$work/broker.log" "$@" >"$work/result.json" || status=$?
kill -0 "$broker" 2>/dev/null || { echo "fuzz: the broker died" >&2; tail -50 "$work/broker.log" >&2; status=1; }
echo "fuzz: exit status $status, broker log $(wc -l <"$work/broker.log") lines" >&2
cp "$work/result.json" "$OUT"
cat "$OUT"
exit $status
