#!/usr/bin/env bash
# This session's connection-layer cuts on the wire, same run: kbus (this tree, compiled), kbus-pre (1c16b41, the
# session's start, compiled: /work/wt/pre) and the measured floor with its log write (bench/lib/floor_server.py
# --log), scale.py's connections point (one Produce of 10 x 100 B, acks=1, in flight on each connection).
set -euo pipefail
R=/work/wt/h1-conn/bench/results/2026-11-27-s16-conn
cd /work/wt/h1-conn
RESULTS=$R OUT=$R/${AB_OUT:-ab.jsonl} KBUS_PRE=/work/wt/pre \
  SYSTEMS="${SYSTEMS:-kbus kbus-pre floor-log}" AXES=connections CONNECTIONS="${CONNECTIONS:-10 100 1000 5000}" \
  bench/scenarios/scale.sh "${1:-2}"
