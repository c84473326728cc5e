#!/usr/bin/env bash
# py-spy profile of one kbus broker (this checkout) under small_requests.py's pipelined one-record requests
# (results/2026-11-27-s15-offsetcommit/profile.sh as it was).
#   usage: profile.sh API OUT_PREFIX [REQUESTS] [NATIVE=--native]
#   (run from the repository's root; ZooKeeper and the broker are started and stopped here)
set -euo pipefail
cd "$(dirname "$0")/../../.."
. bench/lib/lib.sh
api=$1; out=$2; requests=${3:-200000}; native=${4:-}
SYSTEMS=kbus
bench_start profile
start_systems
kpid=${pid[kbus]}
# warm: topics, group, first round
$PY bench/scenarios/small_requests.py -b 127.0.0.1:${port[kbus]} --broker-pid "$kpid" --label kbus --api "$api" \
  --requests 20000
$PY bench/scenarios/small_requests.py -b 127.0.0.1:${port[kbus]} --broker-pid "$kpid" --label kbus --api "$api" \
  --requests "$requests" --out "$out.jsonl" &
bpid=$!
sleep 4
/work/main/.venv/bin/py-spy record $native -r 200 -d 20 -f raw -o "$out.raw" -p "$kpid" >/dev/null 2>&1 || true
wait $bpid
gzip -f "$out.raw"
