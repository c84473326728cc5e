#!/usr/bin/env bash
# interleaved in-process A/B: base-now vs this tree, connection_path.py N ROUNDS, PAIRS times
set -u
ME=/work/wt/h3-produce; BASE=/work/wt/base-now
N=${1:-1000}; ROUNDS=${2:-20}; PAIRS=${3:-3}
for i in $(seq 1 "$PAIRS"); do
  echo "base $(cd $BASE && $ME/.venv/bin/python $ME/bench/scenarios/connection_path.py $N $ROUNDS) load $(cut -d' ' -f1 /proc/loadavg)"
  echo "mine $(cd $ME && $ME/.venv/bin/python $ME/bench/scenarios/connection_path.py $N $ROUNDS) load $(cut -d' ' -f1 /proc/loadavg)"
done
