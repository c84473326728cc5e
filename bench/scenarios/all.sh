#!/usr/bin/env bash
# Every benchmark in bench/notes/RESULTS.md, from a clean clone: sets up .venv if missing, fetches Kafka's jars, then
# runs Kafka, kbus and Tansu side by side (interleaved rounds, same ZooKeeper/config/disk) for each workload.
# Takes ~1-2 hours on 2 cores. Raw results: bench/results/DAY-MACHINE/ ($RESULTS); every table: bench/run report
#   usage: bench/scenarios/all.sh [ROUNDS]     (default 3)
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3}
[ -x .venv/bin/python ] || ./scripts/setup.sh
# shellcheck source=bench/lib/lib.sh
. bench/lib/lib.sh
export RESULTS  # one folder for the whole run, even past midnight
scripts/kafka-jars.sh >/dev/null
echo "bench/scenarios/all.sh started $(date -u +%Y-%m-%dT%H:%M:%S)" >&2
# headline: 1M x 100 B, acks=all, 1 and 3 partitions, with the 10k msg/s latency phase (default client linger)
bench/scenarios/run.sh "$rounds"
bench/scenarios/run.sh "$rounds" -p 3
# latency at 10k msg/s with linger.ms=0
bench/scenarios/run.sh "$rounds" --skip produce,consume --lat-linger-ms 0
# acks=1, 1 KB messages
bench/scenarios/run.sh "$rounds" --acks 1 --skip latency
bench/scenarios/run.sh "$rounds" -p 3 --acks 1 --skip latency
bench/scenarios/run.sh "$rounds" -s 1000 -n 300000 --skip latency
bench/scenarios/run.sh "$rounds" -s 1000 -n 300000 -p 3 --acks 1 --skip latency
# Kafka's own Java load generators
OUT=$RESULTS/perftest-final.jsonl bench/scenarios/perftest.sh "$rounds"
# zero copy on and off, fetch sessions per request and with the Java consumer
SYSTEMS="kafka kbus kbus-copy" OUT=$RESULTS/zerocopy.jsonl bench/scenarios/run.sh "$rounds" --skip latency
SYSTEMS="kafka kbus kbus-copy" OUT=$RESULTS/zerocopy.jsonl bench/scenarios/run.sh "$rounds" --skip latency -s 1000 -n 300000 -p 3
bench/scenarios/fetch_sessions.sh "$rounds" --requests 300
SYSTEMS="kafka kbus kbus-nosession" WARMUP=0 OUT=$RESULTS/sessions.jsonl \
  bench/scenarios/perftest.sh "$rounds" -p 1000 -n 40000 --live-rate 2000
# 3 brokers RF=3 acks=all (Kafka and kbus clusters), then failover, start-up and recovery
bench/scenarios/cluster.sh "$rounds"
bench/scenarios/ops.sh "$rounds"
bench/scenarios/scale.sh 1   # scale curves and their charts (scale_*.png beside scale.jsonl)
