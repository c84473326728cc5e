#!/usr/bin/env bash
# Broker CPU per small request (bench/scenarios/small_requests.py: pipelined one-record Produce, Fetch, Metadata,
# OffsetCommit, Heartbeat, ApiVersions over 16 connections): Apache Kafka, kbus and (with KBUS_BASE=DIR) the kbus of
# another checkout, interleaved round by round on one ZooKeeper and the same config/server.properties. JSON lines in
# $OUT (default $RESULTS/small_requests.jsonl).
#   usage: bench/scenarios/small_requests.sh [ROUNDS] [small_requests.py args]
#   env: SYSTEMS, APIS (default "produce fetch metadata offsetcommit heartbeat")
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/lib/lib.sh
rounds=${1:-3}; shift || true
OUT=${OUT:-$RESULTS/small_requests.jsonl}
SYSTEMS=${SYSTEMS:-kafka kbus${KBUS_BASE:+ kbus-base}}
SYSTEMS=$(for who in $SYSTEMS; do [[ $who = floor* ]] || echo "$who"; done)  # the floor answers only Produce frames (scale.sh's connections axis): `bench/run shapes` may name it
APIS=${APIS:-produce fetch metadata offsetcommit heartbeat}
bench_start small
start_systems
for r in $(seq 1 "$rounds"); do
  for api in $APIS; do
    for who in $SYSTEMS; do
      echo "== round $r: $who $api load $(cut -d' ' -f1-3 /proc/loadavg)"
      $PY bench/scenarios/small_requests.py -b "127.0.0.1:${port[$who]}" --broker-pid "${pid[$who]}" --label "$who" \
        --api "$api" --out "$OUT" "$@"
    done
  done
done
