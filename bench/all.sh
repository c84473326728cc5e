#!/usr/bin/env bash
# Every benchmark in bench/RESULTS.md, from a clean clone: sets up .venv if missing, fetches Kafka's jars, then
# runs Kafka, kbus and Tansu side by side (interleaved rounds, same ZooKeeper/config/disk) for each workload.
# Takes ~1-2 hours on 2 cores. Raw results: bench/*.jsonl; every table: bench/report.sh <start time>
#   usage: bench/all.sh [ROUNDS]     (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
[ -x .venv/bin/python ] || ./scripts/setup.sh
scripts/kafka-jars.sh >/dev/null
echo "bench/all.sh started $(date -u +%Y-%m-%dT%H:%M:%S)" >&2
# headline: 1M x 100 B, acks=all, 1 and 3 partitions, with the 10k msg/s latency phase (default client linger)
bench/run.sh "$rounds"
bench/run.sh "$rounds" -p 3
# latency at 10k msg/s with linger.ms=0
bench/run.sh "$rounds" --skip produce,consume --lat-linger-ms 0
# acks=1, 1 KB messages
bench/run.sh "$rounds" --acks 1 --skip latency
bench/run.sh "$rounds" -p 3 --acks 1 --skip latency
bench/run.sh "$rounds" -s 1000 -n 300000 --skip latency
bench/run.sh "$rounds" -s 1000 -n 300000 -p 3 --acks 1 --skip latency
# Kafka's own Java load generators
OUT=bench/perftest-final.jsonl bench/perftest.sh "$rounds"
# zero copy on and off, fetch sessions per request and with the Java consumer
SYSTEMS="kafka kbus kbus-copy" OUT=bench/zerocopy.jsonl bench/run.sh "$rounds" --skip latency
SYSTEMS="kafka kbus kbus-copy" OUT=bench/zerocopy.jsonl bench/run.sh "$rounds" --skip latency -s 1000 -n 300000 -p 3
bench/fetch_sessions.sh "$rounds" --requests 300
SYSTEMS="kafka kbus kbus-nosession" WARMUP=0 OUT=bench/sessions.jsonl \
  bench/perftest.sh "$rounds" -p 1000 -n 40000 --live-rate 2000
# 3 brokers RF=3 acks=all (Kafka and kbus clusters), then failover, start-up and recovery
bench/cluster.sh "$rounds"
bench/ops.sh "$rounds"
bench/scale.sh 1   # scale curves and their charts (bench/scale_*.png)
