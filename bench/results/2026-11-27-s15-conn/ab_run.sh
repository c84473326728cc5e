#!/usr/bin/env bash
# This session's network-layer cuts on the wire, same run: kbus (this tree, compiled), kbus-pre (a98f586, the
# session's start, compiled: /tmp/h1-pre) and kbus-base (5630180, /work/wt/base-now), scale.py's connections point.
set -euo pipefail
R=/work/wt/h1-conn/bench/results/2026-11-27-s15-conn
cd /work/wt/h1-conn
RESULTS=$R OUT=$R/${AB_OUT:-ab.jsonl} KBUS_BASE=/work/wt/base-now KBUS_PRE=/tmp/h1-pre \
  SYSTEMS="kbus kbus-pre kbus-base" AXES=connections CONNECTIONS="${CONNECTIONS:-1000 5000}" \
  bench/scenarios/scale.sh "${1:-2}"
