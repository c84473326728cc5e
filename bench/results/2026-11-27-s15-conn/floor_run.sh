#!/usr/bin/env bash
# The connections axis's floor beside kbus, same run (bench/notes/connections-2026-11-27-s15.md). Run from a
# checkout of a98f586 (this session's start, compiled; /tmp/h1-pre) carrying this session's bench/lib/floor_server.py,
# lib.sh and scale.sh, so that kbus is the session's starting build and kbus-base is 5630180 (/work/wt/base-now).
set -euo pipefail
R=/work/wt/h1-conn/bench/results/2026-11-27-s15-conn
cd "${TREE:-/tmp/h1-pre}"
RESULTS=$R OUT=$R/floor.jsonl KBUS_BASE=/work/wt/base-now \
  SYSTEMS="floor floor-log floor-at-once floor-writer kbus kbus-base" AXES=connections CONNECTIONS='1000 5000' \
  bench/scenarios/scale.sh "${1:-2}"
