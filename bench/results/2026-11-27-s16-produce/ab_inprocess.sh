#!/usr/bin/env bash
# In process (no sockets), kbus-pre (/work/wt/pre = 1c16b41, compiled) and this tree (compiled), alternated N times, this
# tree's interpreter for both: bench/scenarios/produce_path.py 3000 1 (one-record Produce v9, acks=-1, as
# small_requests), bench/scenarios/connection_path.py C 20 (Produce v9 10 x 100 B, acks=1, C connections), and
# encode_micro.py (the one-partition response alone, v8 and v9).
set -euo pipefail
me=/work/wt/h4-produce
c=${1:-1000}; n=${2:-3}
for i in $(seq "$n"); do
  for tree in /work/wt/pre $me; do
    for what in "bench/scenarios/produce_path.py 3000 1" "bench/scenarios/connection_path.py $c 20" \
                "bench/results/2026-11-27-s16-produce/encode_micro.py"; do
      set -- $what
      script=$1; shift
      echo "$(date -u +%T) ${tree##*/} load=$(cut -d' ' -f1 /proc/loadavg) ${script##*/} $*: $(cd "$tree" && \
        "$me/.venv/bin/python" "$me/$script" "$@" | tr '\n' ' ')"
    done
  done
done
