#!/usr/bin/env bash
# In process (no sockets): bench/scenarios/connection_path.py C ROUNDS from /work/wt/pre (1c16b41, compiled) and from
# this tree (compiled), alternated N times, this tree's interpreter for both.
set -euo pipefail
cd /work/wt/h1-conn
c=${1:-1000}; rounds=${2:-20}; n=${3:-3}
for i in $(seq "$n"); do
  for tree in /work/wt/pre /work/wt/h1-conn; do
    echo "$(date -u +%T) $tree load=$(cut -d' ' -f1 /proc/loadavg): $(cd "$tree" && /work/wt/h1-conn/.venv/bin/python \
      /work/wt/h1-conn/bench/scenarios/connection_path.py "$c" "$rounds")"
  done
done
