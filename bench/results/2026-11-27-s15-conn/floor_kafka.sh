#!/usr/bin/env bash
# The floor beside Kafka 3.9.2 and kbus (main at 719dd22, compiled), same run.
set -euo pipefail
R=/work/wt/h1-conn/bench/results/2026-11-27-s15-conn
cd /work/wt/h1-conn
RESULTS=$R OUT=$R/floor_kafka.jsonl SYSTEMS="kafka kbus floor floor-log" AXES=connections CONNECTIONS='1000 5000' \
  bench/scenarios/scale.sh "${1:-2}"
